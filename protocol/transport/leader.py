"""Following the leading master: the retained announcement on `<p>/leader`, and the
beat the leader sends there every heartbeat interval.

Every party on a bus (a slave process may run many slaves on one bus) gets each new
`Leader`; a party re-registers or re-subscribes when the epoch is newer than that of the
master it registered with. The bus itself drops anything a master with an older epoch
sends (see `protocol.transport.fencing`), so a deposed leader is not acted upon. The
beat (a `Heartbeat`, not retained: one message an interval for every bus, however many
slaves it carries) goes to the parties that listen for it: a slave's watch of its
master's silence (`protocol.master_silence`).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable

from protocol.transport.base import Transport
from protocol.transport.inbound import Dispatcher
from protocol.wire.messages import Heartbeat, Leader
from protocol.wire.topics import Topics

Follower = Callable[[Leader], Awaitable[None]]
Listener = Callable[[Heartbeat], None]


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
            d.on(Heartbeat, watch._beat)
            await bus.subscribe(topics.leader, d)
        if follower is not None:
            watch._followers.append(follower)
        if beat is not None:
            watch._listeners.append(beat)
        return watch

    async def _announced(self, msg: Leader, _reply_to: str | None) -> None:
        if self.leader is not None and msg.epoch <= self.leader.epoch:
            return  # the same leader again (a reconnect re-delivers the retained message)
        self.leader = msg
        for follower in list(self._followers):
            await follower(msg)

    async def _beat(self, msg: Heartbeat, _reply_to: str | None) -> None:
        for listener in list(self._listeners):
            listener(msg)
