"""A process's logical slaves (`drfmesos slave --count N`) on its one connection.

As a real deployment shapes them, the slaves of one process share one principal and one
connection, so they share its traffic too:

- one subscription, the wildcard `out/slave/<principal>/+` the ACL already grants, not
  one per slave (20,000 SUBSCRIBEs outran aiomqtt's wait for their SUBACKs); the bus
  hands each slave's own topic to that slave (`Bus.route`);
- one heartbeat loop: the registered slaves' ids leave in `Heartbeats` messages of up to
  1,000, so the master reads a few messages an interval, not one a slave. The master
  still checks each id: a heartbeat counts only for a slave registered under the
  principal whose topic it came on;
- one loop re-sends the owed status updates that are due, for all of them, looking at a
  slave only when its next re-send is due (a heap by due time);
- one paces their (re-)registrations (`slave.registrations`): each slave's random wait
  and backoff kept, the attempts due in a tick sent together, and a retry held while the
  master is still reading this process's earlier attempts;
- one says, while slaves wait on a live connection for a master to answer their
  registration, how many and for how long (the bus says when the broker is missing);
- one watches the master's beats for all of them (`slave.master_link`): a silence is said
  once for the process (`slave.master_silent`), not once a slave.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import heapq
import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from protocol import logs
from protocol.journal import JournalFile
from protocol.master_silence import SLAVE, MasterSilence
from protocol.transport.aio import cancel_and_wait
from protocol.transport.bus import Bus
from protocol.transport.leader import LeaderWatch
from protocol.transport.patience import Patience
from protocol.wire.messages import MAX_HEARTBEATS, Heartbeats, Wire
from protocol.wire.topics import Topics
from slave.kept_resources import load_all
from slave.registrations import Registrations
from slave.slave import JOURNAL_FILE, Slave, SlaveConfig
from slave.updates import RESEND_CHECK

# ids in one Heartbeats (of at most MAX_HEARTBEATS): a few messages an interval per
# process keep the master's load even, at some 50 us of its loop each
HEARTBEATS_PER_MESSAGE = min(1000, MAX_HEARTBEATS)
WAIT_CHECK = 0.5  # seconds between two looks at whether slaves still wait for a master


@contextlib.contextmanager
def kept_for_life() -> Iterator[None]:
    """What the block makes, made with the cyclic collector paused, then frozen (out of
    its walks) with all else alive: a fleet's slaves live as long as it runs, some fifty
    objects each, and the collector walked them all again at every full collection while
    they were made -- six walks of a heap growing to 4,000 slaves, 80% of the time it took
    to make them (1.07 CPU-s, against 0.2 paused), and again while they registered."""
    gc.collect()  # (garbage now would be frozen with the rest)
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()


class Fleet:
    def __init__(self, bus: Bus, topics: Topics, principal: str) -> None:
        self.bus = bus
        self.topics = topics
        self.principal = principal
        self.to_master = topics.inbound("slave", principal)
        self.slaves: list[Slave] = []
        self.registrations = Registrations(0.0, lambda: bus.connected)  # (run() makes its own)
        # the slaves with an update to send again, by when the next is due (resend_loop):
        # a heap of (due, n, slave), and each slave's earliest entry in it
        self._resends: list[tuple[float, int, Slave]] = []
        self._due: dict[Slave, float] = {}
        self._pushes = itertools.count()  # (ties in the heap never compare slaves)
        self.heartbeats_sent = 0
        # asked when they stop: whether their command tasks end with them (a Mesos agent's
        # SIGUSR1), or run on for the next start to recover (its SIGTERM)
        self.kill_tasks_on_stop: Callable[[], bool] = lambda: False
        self.log = logs.get("fleet", principal=principal)
        self.silence = MasterSilence(  # (said once for all its slaves: how many, with it)
            lambda: self.log.bind(slaves=len(self.slaves)), topics.cluster, self._watched, SLAVE
        )

    async def run(self, configs: list[SlaveConfig]) -> None:
        """Run these slaves until cancelled; stop every one of them then."""
        # one file for all their journals: one sync makes a turn's records of every
        # slave durable (protocol.journal), in the directory their work dirs share
        base = Path(os.path.commonpath([c.work_dir for c in configs])) if configs else None
        journals = JournalFile(base / JOURNAL_FILE) if base is not None else None
        started: list[Slave] = []
        try:
            with kept_for_life():  # (they, and what their start makes, live while it runs)
                self.slaves = [Slave(self.bus, self.topics, c, journals) for c in configs]
                factor = configs[0].registration_backoff_factor if configs else 0.0
                self.registrations = Registrations(factor, lambda: self.bus.connected)
                for slave in self.slaves:
                    slave.updates.on_scheduled = functools.partial(self._resend_due_at, slave)
                    slave.registration.pacer = self.registrations
                for slave in self.slaves:  # before the wildcard: what it brings is theirs
                    slave.hold_early()  # (a persistent session's, queued while it was away)
                await self.bus.subscribe(self.topics.slaves_of(self.principal), self._unrouted)
                await load_all([s.resources for s in self.slaves])
                for slave in self.slaves:
                    await slave.start()
                    started.append(slave)
            await LeaderWatch.on(self.bus, self.topics, None, beat=lambda _: self.silence.heard())
            loops = asyncio.ensure_future(self._loops())
            ended = asyncio.ensure_future(self._all_ended())
            try:  # until stopped, or until no slave of it may run on (each marked gone)
                await asyncio.wait({loops, ended}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for part in (loops, ended):
                    await cancel_and_wait(part)
        finally:
            kill = self.kill_tasks_on_stop()
            for slave in started:
                await slave.stop(kill_tasks=kill)
            # what it made may go now (so may all else frozen, the process's start's too:
            # walked again, which a fleet's process, ending with it, no longer minds)
            gc.unfreeze()

    async def _loops(self) -> None:
        await asyncio.gather(
            self.heartbeat_loop(),
            self.resend_loop(),
            self.registrations.run(),
            self.tell_waiting(),
            self.silence.run(),
        )

    def _watched(self) -> bool:
        """Whether the master's silence is its to say: connected, and registered."""
        return self.bus.connected and any(s.registered.is_set() for s in self.slaves)

    async def _all_ended(self) -> None:
        for slave in self.slaves:
            await slave.ended.wait()

    @property
    def gone(self) -> list[str]:
        """Why each slave that may not run on ended (marked gone by an operator)."""
        return [g for s in self.slaves if (g := s.registration.gone) is not None]

    async def heartbeat_loop(self) -> None:
        """Every interval the master asked for, one heartbeat per registered slave: a
        `Heartbeats` message at a time, spread evenly over the interval (the master reads
        a steady trickle, not every slave's heartbeat in one instant)."""
        while True:
            interval = next((s.master.interval for s in self.slaves if s.registered.is_set()), None)
            if interval is not None and interval != self.silence.interval:
                self.silence.subscribed(interval)  # (the master's: the slaves' first answer)
            interval = interval or 1.0
            chunks = range(0, len(self.slaves), HEARTBEATS_PER_MESSAGE)
            pause = interval / max(1, len(chunks))
            for start in chunks:
                chunk = self.slaves[start : start + HEARTBEATS_PER_MESSAGE]
                ids = [s.slave_id for s in chunk if s.registered.is_set()]
                if ids:
                    heartbeats = Heartbeats(slave_ids=ids, incarnation=self.bus.incarnation)
                    self.bus.post(self.to_master, heartbeats, qos=0)
                    self.heartbeats_sent += len(ids)
                await asyncio.sleep(pause)

    @property
    def owing(self) -> set[Slave]:
        """The slaves with an update to send again (that the re-send loop will look at)."""
        return set(self._due)

    def _resend_due_at(self, slave: Slave, when: float) -> None:
        """`slave` has an update to send again at `when` (told by its updates)."""
        due = self._due.get(slave)
        if due is None or when < due:
            self._due[slave] = when
            heapq.heappush(self._resends, (when, next(self._pushes), slave))

    async def resend_loop(self) -> None:
        """Owed status updates that are due again, for every slave in one loop: a loop a
        slave, each waking five times a second, kept a process of 10,000 busy with
        nothing but its timers; so did one loop looking at every slave, and then one
        looking at every slave owing an update (in a failover most of them owe one, its
        re-sends backing off to 30 s): it looks at a slave when its next is due. A slave
        not registered then is set aside until it is (its updates would be refused)."""
        while True:
            await asyncio.sleep(RESEND_CHECK)
            now = time.monotonic()
            heap = self._resends
            while heap and heap[0][0] <= now:
                when, _, slave = heapq.heappop(heap)
                if self._due.get(slave) != when:
                    continue  # (an entry it has since had an earlier one for)
                del self._due[slave]
                if slave.registered.is_set():
                    slave.updates.resend_due(now)
                    slave.updates.tell_scheduled()

    async def tell_waiting(self) -> None:
        """Say at warning that slaves are not registered while the broker is there: no
        master runs, or it runs on another cluster name, or it refuses them (its reason
        then comes as `slave.refused` or `slave.error_received`)."""
        patience = Patience()
        while True:
            await asyncio.sleep(WAIT_CHECK)
            waiting = len(self.registrations.pending)  # (not a walk of every slave)
            if not waiting or not self.bus.connected:
                patience.over()
                continue
            waited = patience.due()
            if waited is None:
                continue
            cluster = self.topics.cluster
            # (the in-process transport, which fleets run on in tests, names no broker)
            broker = getattr(getattr(self.bus, "broker", None), "bare", "the broker")
            self.log.warning(
                "slave.waiting_for_master",
                unregistered=waiting,
                waited=round(waited, 1),
                detail=f"connected to the broker at {broker}, but no master of "
                f"cluster {cluster!r} has registered it: is one running there (drfmesos "
                f"master --cluster {cluster})? (one that refuses it says why: slave.refused)",
            )

    async def _unrouted(self, message: Wire, _reply_to: str | None) -> None:
        """Something for a slave this process does not run (any more), or another
        process's under the same principal (its wildcard hears them all): no warning, as
        two fleets of one principal -- a cluster without credentials -- hear each other's."""
        self.log.debug("fleet.unrouted", type=message.TYPE)
