"""A slave's liveness with the master it registered with, both ways.

Its heartbeats go to the master every interval the master's `Registered` asked for (a
fleet's go in one loop for all its slaves: `slave.fleet`). The master's come back as the
leader's beat on its leader topic (`protocol.transport.leader`), one message an interval
for every bus: a Mesos agent counts its master's pings (agent ping timeout) and looks for
a master again once they stop, and a slave here counts the beats as a framework counts
its heartbeats (`protocol.master_silence`): MISSED intervals unheard are said at warning
(`slave.master_silent`, with how long), and the master heard again (it answers a
registration, or beats) as `slave.master_heard`.

It registers again by itself when a master comes back: a new leader's announcement (a
newer epoch: `Registration.on_leader`), or the master's answer to a heartbeat of a slave it
does not know (`unknown-slave`), has it re-register with its tasks; and so does a beat
from a master other than the one it registered with (one started again in the same
epoch, which no announcement tells). A beat of the master it registered with, after a
silence (its loop stalled, or its connection was away), is only heard: re-registering
then would have every slave of a large cluster do so at once, into a master that has
just caught up; one that forgot a slave meanwhile tells it so (`unknown-slave`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from protocol.master_silence import SLAVE, MasterSilence
from protocol.transport.base import Transport
from protocol.wire.messages import Heartbeat, Leader


class MasterLink:
    def __init__(
        self,
        bus: Transport,
        to_master: str,
        slave_id: str,
        cluster: str,
        registered: asyncio.Event,
        announce: Callable[[], None],
        log: Any,
    ) -> None:
        self._bus, self._to_master, self._slave_id = bus, to_master, slave_id
        self._registered, self._announce, self._log = registered, announce, log
        self.master_id = ""  # the master it registered with
        self.interval = 5.0  # its heartbeats' (and the master's beats'), as it asked
        self.silence = MasterSilence(
            lambda: log, cluster, lambda: bus.connected and registered.is_set(), SLAVE
        )

    def registered_with(self, master_id: str, interval: float) -> None:
        """The master answered a registration: it beats every `interval` seconds."""
        self.master_id, self.interval = master_id, interval
        self.silence.subscribed(interval)

    def beat(self, msg: Leader) -> None:
        """The leader's beat (its announcement again, on the bus's leader topic)."""
        if not self._registered.is_set():
            return  # (registering: its answer is what is waited for)
        self.silence.heard()
        if msg.master_id != self.master_id:
            self._log.info("slave.other_master", master_id=msg.master_id, was=self.master_id)
            self._announce()

    async def heartbeats(self) -> None:
        """Until cancelled: a heartbeat to the master every interval, while registered."""
        while True:
            await self._registered.wait()
            self._bus.post(
                self._to_master,
                Heartbeat(source=self._slave_id, incarnation=self._bus.incarnation),
                qos=0,
            )
            await asyncio.sleep(self.interval)
