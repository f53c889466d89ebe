"""A slave's registration with the master: when it (re-)registers, what it says then, and
what the master's answers to it do.

It registers at its start and again after every connect, when a new master leads (a
newer epoch), when the master says it does not know it (`unknown-slave`), and when its
link hears another master beat (`slave.master_link`): each time after a random wait and
then with backoff until the master answers (`slave.backoff`, Mesos's
`--registration_backoff_factor`), paced by its own loop or, in a fleet, by the fleet's
(`slave.registrations`). What it says is a `Register`, or a `Reregister` with what it
runs and owes: its live tasks, the updates of ended ones, its executors (idle ones too)
and the task groups' executors it plays, and each of their frameworks' principals, so
that a new leader learns from it what its room holds and whose it is. A master that
marks it gone (an operator's `SLAVE_GONE`) ends it: it may not run on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from protocol import logs
from protocol.transport.aio import within
from protocol.transport.base import Transport
from protocol.wire.messages import (
    Error,
    Leader,
    Register,
    Registered,
    Reregister,
    RunningExecutor,
    RunningGroupExecutor,
    RunningTask,
)
from protocol.wire.slave import SLAVE_GONE
from slave.backoff import RegistrationBackoff
from slave.config import SlaveConfig, TaskRecord
from slave.executors import ExecutorProcess
from slave.kept_resources import KeptResources
from slave.owners import Owners
from slave.registrations import Registrations
from slave.task_groups import TaskGroups
from slave.updates import OwedUpdates


class Registration:
    def __init__(
        self,
        bus: Transport,
        to_master: str,
        config: SlaveConfig,
        log: Any,
        *,
        resources: KeptResources,
        tasks: Mapping[tuple[str, str], TaskRecord],
        executors: Mapping[tuple[str, str], ExecutorProcess],
        groups: TaskGroups,
        owners: Owners,
        updates: OwedUpdates,
        isolation_warning: Callable[[], str],
        answered: Callable[[str, float], None],
    ) -> None:
        self._bus, self._to_master, self._config, self._log = bus, to_master, config, log
        self._resources, self._tasks, self._executors = resources, tasks, executors
        self._groups, self._owners, self._updates = groups, owners, updates
        self._isolation_warning = isolation_warning
        self._answered = answered  # told the master's id and heartbeat interval (MasterLink)
        self.registered = asyncio.Event()
        self.ended = asyncio.Event()  # it may not run on (marked gone): `gone` says why
        self.gone: str | None = None
        self.master_epoch = 0  # the epoch of the master we registered with
        self._wanted = asyncio.Event()  # (re-)registration is due (see loop)
        # a fleet's pacer of its slaves' (re-)registrations (else the loop here)
        self.pacer: Registrations | None = None

    async def reconnected(self) -> None:
        self.soon()

    def soon(self) -> None:
        """(Re-)register, paced (slave.backoff): after every connect, a new leader, or a
        master that does not know us; then again until the master answers."""
        self.registered.clear()
        if self.pacer is not None:
            self.pacer.wanted(self)
        else:
            self._wanted.set()

    async def announce(self) -> None:
        """Send a (re-)registration now: a Reregister with its tasks, or a Register."""
        running = [
            RunningTask(
                framework_id=r.framework_id,
                task=r.info,
                state=r.state,
                proof=r.proof,
                healthy=r.healthy,
            )
            for r in self._tasks.values()
            if not r.state.terminal
        ]
        common = dict(
            slave_id=self._config.slave_id,
            hostname=self._config.hostname,
            resources=self._resources.total,
            discrete=self._config.discrete,
            attributes=self._config.attributes,
            incarnation=self._bus.incarnation,
            isolation_warning=self._isolation_warning(),
            resource_version=self._resources.version.number,
        )
        ending = self._updates.ending()
        # every executor, idle ones too: a new leader learns their room is used
        executors = [
            RunningExecutor(framework_id=e.framework_id, executor=e.info)
            for e in self._executors.values()
        ]
        # and the task groups' executors it plays: their tasks name none, so a new leader
        # learns their room from here alone
        group_executors = [
            RunningGroupExecutor(
                framework_id=g.framework_id, executor_id=g.executor_id, resources=g.resources
            )
            for g in self._groups.executors.values()
        ]
        message = (
            Reregister(
                **common,
                tasks=running,
                ending=ending,
                executors=executors,
                group_executors=group_executors,
                owners=self._owners.report(
                    [t.framework_id for t in running]
                    + [t.framework_id for t in ending]
                    + [e.framework_id for e in self._executors.values()]
                    + [g.framework_id for g in group_executors]
                ),
            )
            if running or ending or executors or group_executors
            else Register(**common)
        )
        self._bus.post(self._to_master, message)
        self._updates.send_all_soon()  # owed updates go again once registered

    async def loop(self) -> None:
        """When (re-)registration is due: wait a random delay, then announce, and again
        with backoff until the master answers (a slave not in a fleet)."""
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            backoff = RegistrationBackoff(self._config.registration_backoff_factor)
            if delay := backoff.first():
                await asyncio.sleep(delay)
            while not self.registered.is_set() and not self.ended.is_set():
                if self._bus.connected:
                    await self.announce()
                    self._wanted.clear()  # (what asked again meanwhile is this attempt)
                with contextlib.suppress(TimeoutError):
                    await within(self.registered.wait(), backoff.retry())

    async def on_leader(self, leader: Leader) -> None:
        """A new master leads: re-register with it, with the tasks we run (as Mesos)."""
        if self.registered.is_set() and leader.epoch > self.master_epoch:
            self._log.info("slave.new_leader", master_id=leader.master_id, epoch=leader.epoch)
            self.soon()

    async def on_registered(self, msg: Registered, reply_to: str | None) -> None:
        self.master_epoch = max(self.master_epoch, msg.epoch)
        self._answered(msg.master_id, msg.heartbeat_interval_seconds)
        first = not self.registered.is_set()
        self.registered.set()
        if self.pacer is not None:
            self.pacer.answered(self)
        if first:
            self._log.info("slave.registered", master_id=msg.master_id, tasks=len(self._tasks))
            self._updates.tell_scheduled()  # (a fleet sets aside what is owed meanwhile)

    async def on_error(self, msg: Error, reply_to: str | None) -> None:
        if msg.code == SLAVE_GONE:  # an operator marked it gone: it never comes back
            self._log.error("slave.marked_gone", message=logs.clip(msg.message))
            self.gone = msg.message
            self.ended.set()
        elif msg.code == "unknown-slave":
            self._log.warning("slave.unknown_to_master", message=logs.clip(msg.message))
            if self.registered.is_set():  # (not again while it is re-registering anyway)
                self.soon()
        else:
            self._log.warning(
                "slave.error_received", message=logs.clip(msg.message), code=logs.clip(msg.code, 60)
            )
