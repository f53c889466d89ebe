"""The bus's send path: what the MQTT client holds until the broker acknowledges it, by
message id, and what waits for the next connection.

A QoS 1 payload is kept until its PUBACK comes; if the connection is lost first, it is
sent again, in order, after the reconnect (at least once). Without a connection it waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from protocol.tooling.brokers import MAX_PACKET_BYTES
from protocol.transport.batching import Outgoing
from protocol.transport.paho_link import PahoLink

# bytes in one MQTT payload at most: what the brokers we start (and the compose cluster's)
# take, less room for the topic and the headers
MAX_PAYLOAD = MAX_PACKET_BYTES - 64 * 1024


class SendPath:
    def __init__(self, log: Any, stats: dict[str, int]) -> None:
        self.log, self.stats = log, stats
        self.link: PahoLink | None = None  # while connected, once subscribed
        self.unacked: dict[int, Outgoing] = {}
        self.waiting: list[Outgoing] = []
        self.sent_all = asyncio.Event()  # nothing unacknowledged and nothing waiting
        self.sent_all.set()

    def send(self, out: Outgoing) -> None:
        """Hand a payload to the MQTT client now (written when the loop next comes round),
        or keep it for the next connection."""
        self.sent_all.clear()
        if len(out.payload) > MAX_PAYLOAD:  # the broker would drop the connection for it,
            # and every reconnect would send it again: it fails, alone, here
            limit = f"{len(out.payload)} bytes is over the broker's limit of {MAX_PAYLOAD}"
            self._unpublishable(out, ValueError(limit))
            return
        link = self.link
        if link is None or self.waiting:
            self.waiting.append(out)
            return
        try:
            rc, mid, published = link.publish(out.topic, out.payload, out.qos, out.retain)
        except ValueError as e:  # a topic or payload MQTT cannot carry: this one only
            self._unpublishable(out, e)
            return
        self.stats["published"] += 1
        if rc != 0:  # the connection is going: the reconnect sends it
            self.waiting.append(out)
        elif out.qos == 0 or published:
            out.succeed()
            self._check_sent_all()
        else:
            self.unacked[mid] = out

    def _unpublishable(self, out: Outgoing, error: ValueError) -> None:
        self.log.error(
            "bus.unpublishable", topic=out.topic, bytes=len(out.payload), error=str(error)
        )
        out.fail(error)
        self._check_sent_all()

    def acknowledged(self, mid: int) -> None:
        out = self.unacked.pop(mid, None)
        if out is not None:
            out.succeed()
            self._check_sent_all()

    def _check_sent_all(self) -> None:
        if not self.unacked and not self.waiting:
            self.sent_all.set()

    def ready(self, link: PahoLink) -> None:
        """Connected and subscribed: the last connection's unacknowledged go again, then
        what waited."""
        self.link = link
        waiting, self.waiting = self.waiting, []
        for out in waiting:
            self.send(out)
        self._check_sent_all()

    def lost(self) -> None:
        """The connection is gone: what it had not acknowledged waits, first."""
        self.link = None
        lost = list(self.unacked.values())  # in the order they were sent
        self.unacked.clear()
        self.waiting[:0] = lost

    def oldest_in_flight(self) -> Outgoing | None:
        return next(iter(self.unacked.values()), None)

    def fail_all(self, error: BaseException) -> None:
        """Nothing queued will be sent: tell whoever awaits it."""
        for out in [*self.unacked.values(), *self.waiting]:
            out.fail(error)
        self.unacked.clear()
        self.waiting.clear()
        self.sent_all.set()
