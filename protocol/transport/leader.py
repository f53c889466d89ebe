"""Following the leading master: the retained announcement on `<p>/leader`.

Every party on a bus (a slave process may run many slaves on one bus) gets each new
`Leader`; a party re-registers or re-subscribes when the epoch is newer than that of the
master it registered with. The bus itself drops anything a master with an older epoch
sends (see `protocol.transport.fencing`), so a deposed leader is not acted upon.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable

from protocol.transport.base import Transport
from protocol.transport.inbound import Dispatcher
from protocol.wire.messages import Leader
from protocol.wire.topics import Topics

Follower = Callable[[Leader], Awaitable[None]]


class LeaderWatch:
    _of_bus: weakref.WeakKeyDictionary[Transport, LeaderWatch] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self.leader: Leader | None = None
        self._followers: list[Follower] = []

    @classmethod
    async def on(cls, bus: Transport, topics: Topics, follower: Follower) -> LeaderWatch:
        """Call `follower` with every newer leader announced on this bus's cluster."""
        watch = cls._of_bus.get(bus)
        if watch is None:
            watch = cls._of_bus[bus] = cls()
            d = Dispatcher(bus, "party")
            d.on(Leader, watch._announced)
            await bus.subscribe(topics.leader, d)
        watch._followers.append(follower)
        return watch

    async def _announced(self, msg: Leader, _reply_to: str | None) -> None:
        if self.leader is not None and msg.epoch <= self.leader.epoch:
            return  # the same leader again (a reconnect re-delivers the retained message)
        self.leader = msg
        for follower in list(self._followers):
            await follower(msg)
