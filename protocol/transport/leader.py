"""Following the leading master: the retained announcement on `<p>/leader`, and the
beat the leader sends there every heartbeat interval.

Every party on a bus (a slave process may run many slaves on one bus) gets each new
`Leader`; a party re-registers or re-subscribes when the epoch is newer than that of the
master it registered with. The bus itself drops anything a master with an older epoch
sends (see `protocol.transport.fencing`), so a deposed leader is not acted upon. The
beat (the leader's `Leader` sent again, not retained: one message an interval for every
bus, however many slaves it carries) goes to the parties that listen for it: a slave's
watch of its master's silence (`protocol.master_silence`). It is a `Leader`, not a
message of its own, so that a party of a release before the beat, which takes `Leader`
alone here, takes it as the same leader again (a kind it did not take was a warning
every interval). Every `Leader` is a beat: a newer one is an announcement too.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable

from protocol.transport.base import Transport
from protocol.transport.inbound import Dispatcher
from protocol.wire.messages import Leader
from protocol.wire.topics import Topics

Follower = Callable[[Leader], Awaitable[None]]
Listener = Callable[[Leader], None]  # (a beat: the leader's announcement, again)


class LeaderWatch:
    _of_bus: weakref.WeakKeyDictionary[Transport, LeaderWatch] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.leader: Leader | None = None
        self._followers: list[Follower] = []
        self._listeners: list[Listener] = []

    @classmethod
    async def on(
        cls,
        bus: Transport,
        topics: Topics,
        follower: Follower | None,
        *,
        beat: Listener | None = None,
    ) -> LeaderWatch:
        """Call `follower` with every newer leader announced on this bus's cluster, and
        `beat` with every beat of the leader."""
        watch = cls._of_bus.get(bus)
        if watch is None:
            watch = cls._of_bus[bus] = cls()
            d = Dispatcher(bus, "party")
            d.on(Leader, watch._announced)
            await bus.subscribe(topics.leader, d)
        if follower is not None:
            watch._followers.append(follower)
        if beat is not None:
            watch._listeners.append(beat)
        return watch

    async def _announced(self, msg: Leader, _reply_to: str | None) -> None:
        if self.leader is None or msg.epoch > self.leader.epoch:
            self.leader = msg  # (else the same leader again: its beat, or a reconnect's
            for follower in list(self._followers):  # re-delivered retained message)
                await follower(msg)
        for listener in list(self._listeners):
            listener(msg)
