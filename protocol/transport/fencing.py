"""Epoch fencing, a leadership rule: drop what a deposed master sends.

A master stamps its leadership epoch (see `protocol.wire.messages.Leader`) on everything it
sends; a party drops whatever arrives with an older epoch than the newest it has seen, so
a deposed master is not acted upon. It is an envelope filter (see
`protocol.transport.inbound`): the transports carry epochs, they do not judge them.
"""

from __future__ import annotations

from typing import Any

from protocol.transport.message_counts import MessageCounts
from protocol.wire.codec import Envelope


class EpochFence:
    def __init__(self, log: Any, stats: dict[str, int], messages: MessageCounts) -> None:
        self.log = log
        self.stats = stats
        self.messages = messages
        self.newest = 0  # the newest epoch seen

    def __call__(self, topic: str, item: Envelope) -> bool:
        if not item.epoch:  # not from a master
            return True
        if item.epoch < self.newest:
            self.stats["fenced"] += 1
            self.messages.outcomes[(item.message.TYPE, "dropped", "fenced")] += 1
            self.log.warning(
                "bus.fenced",
                topic=topic,
                type=item.message.TYPE,
                epoch=item.epoch,
                newest=self.newest,
            )
            return False
        self.newest = item.epoch
        return True
