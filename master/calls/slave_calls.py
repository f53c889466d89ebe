"""What the master does with messages from slaves (and the broker's Last Wills)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller
from master.books import Books, Framework, Slave, Task
from master.calls.executors_back import ExecutorsBack
from master.calls.executors_shown import (
    Unshown,
    executor_key,
    executors_of,
    holding_executor,
    unshown_executors,
)
from master.calls.partitions import Partitions
from master.calls.status_updates import StatusUpdates
from master.config import MasterInfo
from master.counters import MessageCounts, SlaveChurn
from master.framework_ids import FrameworkIds
from master.ha.recorder import Recorder
from master.heartbeats import take_heartbeats
from master.listeners import Listeners
from master.orphans import UNPROVEN, Orphan
from master.outbox import Outbox
from master.removals import Removals
from master.task_usage import summed, used_between
from master.updates import TaskUpdates
from protocol import logs
from protocol.transport.aio import loop_time
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.messages import (
    MAX_RECONCILE_TASKS,
    Error,
    ExecutorExited,
    Failure,
    FrameworkMessage,
    FrameworkShutDown,
    Gone,
    Heartbeat,
    Heartbeats,
    KillTask,
    Reason,
    Reconcile,
    ReconcileTask,
    Register,
    Registered,
    Reregister,
    RunningExecutor,
    RunningGroupExecutor,
    RunningTask,
    ShutdownFramework,
    StatusUpdate,
    TaskState,
    UsageReport,
)
from protocol.wire.reservations import (
    checkpointed,
    configured_of,
    partial_copy,
    shared_once,
    with_checkpointed,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import check_segment


class SlaveCalls:
    """A slave's messages, and the broker's Last Wills."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        outbox: Outbox,
        updates: TaskUpdates,
        removals: Removals,
        recorder: Recorder,
        *,
        partitions: Partitions,
        status_updates: StatusUpdates,
        churn: SlaveChurn,
        messages: MessageCounts,
        info: MasterInfo,
        listeners: Listeners,
        ids: FrameworkIds,
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        """`ids`: the cluster's proofs of the tasks it launched, asked of each task a slave
        brings back that this master did not know;
        `partitions`: what a slave that comes back (or may not) is handed to;
        `listeners`: told of each slave admitted;
        `status_updates`: a slave's updates; `churn`, `messages`: what is counted of slaves
        and their heartbeats; `info`: what a slave is told of this master as it registers."""
        self.books, self.allocator, self.outbox = books, allocator, outbox
        self.updates, self.removals, self.recorder = updates, removals, recorder
        self.partitions, self.status_updates = partitions, status_updates
        self.churn, self.messages, self.info = churn, messages, info
        self.listeners, self.request_round, self.log = listeners, request_round, log
        self.ids = ids
        # what it does with the executors a slave back names, or does not
        self.executors_back = ExecutorsBack(books, allocator, outbox)
        # slaves whose record is being written: what their Register said (a retry that
        # says the same waits for the first's answer)
        self._writing: dict[str, tuple[object, ...]] = {}

    def _slave_of(self, slave_id: str, caller: Caller, about: str) -> Slave | None:
        """The registered slave a call names, if it is the caller's own (else refused)."""
        slave = self.books.slaves.get(slave_id)
        if slave is not None and slave.principal == caller.principal:
            return slave
        owner = self.books.slave_owners.get(slave_id)
        if owner is not None and owner != caller.principal:
            self.outbox.refuse(
                caller,
                f"{about} refused: slave {slave_id} belongs to another principal",
                "forbidden",
                about,
                slave_id=slave_id,
                owner=owner,
            )
        else:
            self.outbox.refuse(
                caller,
                f"unknown slave {slave_id}: register first",
                "unknown-slave",
                about,
                slave_id=slave_id,
            )
        return None

    async def on_register(self, msg: Register, caller: Caller) -> None:
        await self._admit_slave(
            msg.slave_id, msg.hostname, msg.resources, msg.attributes, msg.incarnation, [], caller,
            warning=msg.isolation_warning, discrete=msg.discrete, version=msg.resource_version,
        )  # fmt: skip

    async def on_reregister(self, msg: Reregister, caller: Caller) -> None:
        await self._admit_slave(
            msg.slave_id,
            msg.hostname,
            msg.resources,
            msg.attributes,
            msg.incarnation,
            msg.tasks,
            caller,
            {(t.framework_id, t.task_id) for t in msg.ending[:10_000]},
            msg.owners,
            warning=msg.isolation_warning,
            discrete=msg.discrete,
            executors=msg.executors,
            group_executors=msg.group_executors,
            version=msg.resource_version,
        )

    async def _admit_slave(
        self,
        slave_id: str,
        hostname: str,
        total: Resources,
        attributes: dict[str, str],
        incarnation: str,
        running: list[RunningTask],
        caller: Caller,
        ending: set[tuple[str, str]] | None = None,
        owners: dict[str, str] | None = None,
        *,
        warning: str = "",
        discrete: Discrete = EMPTY,
        executors: list[RunningExecutor] | None = None,
        group_executors: list[RunningGroupExecutor] | None = None,
        version: int = 0,
    ) -> None:
        """`ending`: (framework, task) that ended there, their last update on its way;
        `owners`: each framework's principal, as the slave checkpointed it; `warning`:
        what it says it does not enforce between tenants; `discrete`: its ranges' and
        sets' values (ports); `executors`: the custom executors it runs, idle ones too;
        `group_executors`: the task groups' executors it plays; `version`: of the last
        CheckpointResources it applied."""
        try:
            check_segment(slave_id, "slave_id")
        except ValueError as e:
            self.outbox.refuse(caller, str(e), "invalid", "Register")
            return
        owner = self.books.slave_owners.setdefault(slave_id, caller.principal)
        if owner != caller.principal:
            self.outbox.refuse(
                caller,
                f"slave id {slave_id} belongs to another principal",
                "forbidden",
                "Register",
                slave_id=slave_id,
                owner=owner,
            )
            return
        if slave_id in self.books.gone_slaves:
            self.partitions.refuse_gone_slave(slave_id, running, caller)
            return
        self.outbox.resource_version_reported(slave_id, version)
        known = self.books.slaves.get(slave_id)
        if (
            known is not None
            and known.incarnation == incarnation
            and known.tasks
            and not known.tasks
            <= {(r.framework_id, r.task.task_id) for r in running} | (ending or set())
        ):
            # a (Re)Register this master admitted already, delivered again (the broker's
            # redelivery after its restart, a retry in flight): it does not name tasks
            # launched there since, and would reconcile them away -- a work item the chaos
            # soak then saw run twice at once. Told it is registered; nothing changes.
            # Also once its connection's Last Will came (the broker restarted from its
            # save announces them, then redelivers): a slave back is on a connection of
            # a new incarnation, so one of this incarnation is the old connection's,
            # stale -- the soak saw 57 launches refused by a slave whose tasks a stale
            # Reregister (its ending tasks, none running) had reconciled away
            self.log.info("slave.register_again", slave_id=slave_id, tasks=len(known.tasks))
            self._tell_registered(slave_id)
            return
        idle = unshown_executors(running, executors or [], group_executors or [])
        users = [r.task.resources for r in running] + list(executors_of(running).values())
        users += [e.resources for e in idle]
        used = sum(users, Resources())
        if not total.contains(Resources.from_millis(shared_once(used.millis, total.millis))):
            self.outbox.refuse(
                caller,
                f"slave {slave_id} reports tasks using {used}, more than its total {total}",
                "invalid",
                "Reregister",
                slave_id=slave_id,
            )
            return
        if key := next(filter(None, (partial_copy(u.millis, total.millis) for u in users)), None):
            self.outbox.refuse(  # (checked before anything is recorded)
                caller,
                f"slave {slave_id} reports a task using part of shared volume {key}, or "
                "more: a task uses one copy, the whole volume",
                "invalid",
                "Reregister",
                slave_id=slave_id,
            )
            return
        if (twice := discrete.given_twice()) is not None:
            self.outbox.refuse(
                caller, f"slave {slave_id}: {twice}", "invalid", "Register", slave_id=slave_id
            )
            return
        held = Discrete.union(r.task.discrete for r in running)
        if not discrete.contains(held):
            self.outbox.refuse(
                caller,
                f"slave {slave_id} reports tasks holding {held}, not all in its {discrete}",
                "invalid",
                "Reregister",
                slave_id=slave_id,
            )
            return
        admitted = (slave_id, hostname, total, attributes, incarnation, running, caller)
        later = (ending, owners or {}, warning, discrete, idle)
        if self.recorder.slave_known(slave_id, caller.principal, hostname):
            self._admitted(*admitted, *later)  # (a re-registration: nothing to write)
            return
        # A slave's retry of the very registration whose record is being written: the
        # first's answer answers it (a storm that outran the registry's writes read a
        # quarter more Registers than slaves, each another write of its bucket)
        same = (caller.principal, hostname, incarnation, total, attributes, discrete, warning,
                ending, owners)  # fmt: skip
        if not running and not idle and self._writing.get(slave_id) == same:
            self.churn.retries_absorbed += 1
            return
        # A new slave is written to the registry before it is told Registered; the calls
        # after it are read meanwhile, so the registrations of a storm share the store's
        # writes (one ZooKeeper transaction, one journal sync) rather than queue on them.
        write = self.recorder.slave(slave_id, caller.principal, hostname, caller)
        self._writing[slave_id] = same

        async def admit() -> None:
            try:
                written = await write
            finally:
                if self._writing.get(slave_id) == same:
                    del self._writing[slave_id]
            if written:
                self._admitted(*admitted, *later)

        self.recorder.in_background(admit(), "Register", slave_id=slave_id)

    def _admitted(
        self,
        slave_id: str,
        hostname: str,
        total: Resources,
        attributes: dict[str, str],
        incarnation: str,
        running: list[RunningTask],
        caller: Caller,
        ending: set[tuple[str, str]] | None,
        owners: dict[str, str],
        warning: str,
        discrete: Discrete,
        idle: list[Unshown],
    ) -> None:
        """The slave's record is durable: into the books, and told it is registered."""
        if slave_id in self.books.gone_slaves:  # marked gone while its record was written
            self.partitions.refuse_gone_slave(slave_id, running, caller)
            return
        now = loop_time()
        slave = self.books.slaves.get(slave_id)  # (it may have come meanwhile)
        returning = slave is not None  # (back to this master, not new to it)
        self.books.removed_slaves.discard(slave_id)
        if self.books.recovering.pop(slave_id, None) is not None:
            self.churn.recovery_back += 1
            self.churn.recovered_one(len(self.books.recovering))
            self.log.info("slave.recovered", slave_id=slave_id, tasks=len(running))
        if ending is None:  # as Mesos counts: by the message, Register or Reregister
            self.churn.registrations += 1
        else:
            self.churn.reregistrations += 1
        if slave is None:
            slave = Slave(slave_id, caller.principal, hostname, total, attributes, incarnation, now)
            slave.discrete = discrete
            self.books.slaves[slave_id] = slave
            self.allocator.add_slave(slave_id, total)
            self.log.info(
                "slave.registered",
                slave_id=slave_id,
                principal=caller.principal,
                hostname=hostname,
                resources=str(total),
                tasks=len(running),
            )
            self.outbox.emit("slave-added", slave_id=slave_id, resources=total)
        else:
            resized = total != slave.total or discrete != slave.discrete
            # a task it names that this master did not know (a deposed leader launched
            # it before the slave saw this one's epoch): its resources may be on offer
            known = slave.tasks
            more = any((r.framework_id, r.task.task_id) not in known for r in running)
            if (slave.incarnation != incarnation or resized or more) and slave.offers:
                self.removals.rescind_offers(slave)
            slave.incarnation, slave.last_seen = incarnation, now
            if attributes != slave.attributes:  # (declined, maybe, for the old ones)
                self.allocator.remove_filters(slave_id)
            slave.hostname, slave.attributes = hostname, attributes
            if not slave.connected:
                slave.connected = True
                self.allocator.activate_slave(slave_id)
            self.log.info("slave.reregistered", slave_id=slave_id, tasks=len(running))
        if warning and warning != slave.isolation_warning:
            self.log.warning("slave.isolation", slave_id=slave_id, what_is_not_enforced=warning)
        slave.isolation_warning = warning
        if ending is not None:  # (a re-registration's: all it says ended, now)
            self.books.slave_ending(slave_id, ending)
        if self.books.orphans.on(slave_id):
            self._orphans_not_named(slave_id, running)
        if self.books.orphans.executors_on(slave_id):
            self.executors_back.not_named(slave_id, idle)
        if running or slave.tasks:
            self._reconcile_slave(slave, running, ending or set(), owners)
        if idle:
            self.executors_back.booked(slave, idle, owners)
        if returning:  # (back to this master: what it books there may be stale)
            self.executors_back.check_unnamed(slave_id, idle, running)
        if slave.total != total or slave.discrete != discrete:
            self._total_from(slave, total, discrete)
        back = {(r.framework_id, r.task.task_id) for r in running} | (ending or set())
        self.partitions.unreachable_not_back(slave_id, back)
        self._tell_registered(slave_id)
        self.listeners.tell_slave_admitted(slave)  # (a drain's kills follow Registered)
        self.request_round()

    def _tell_registered(self, slave_id: str) -> None:
        self.outbox.send_slave(
            slave_id,
            Registered(
                slave_id=slave_id,
                master_id=self.info.master_id,
                heartbeat_interval_seconds=self.info.heartbeat_interval,
                epoch=self.info.epoch,
            ),
        )

    def _total_from(self, slave: Slave, told: Resources, discrete: Discrete) -> None:
        """A known slave back with another total. Its --resources are its word, as Mesos's
        master takes a reconfigured agent's; what it keeps across restarts (dynamic
        reservations, volumes) is the master's, applied on them and sent again if the
        slave missed some (as Mesos's master re-sends checkpointed resources). What its
        tasks hold stays theirs: a total that does not hold it is not taken."""
        sid = slave.slave_id
        merged, dropped = with_checkpointed(
            configured_of(told.millis), checkpointed(slave.total.millis)
        )
        total = Resources.from_millis(merged)
        if total != slave.total or discrete != slave.discrete:
            try:
                self.allocator.update_slave(sid, total)
            except AllocatorError as e:
                self.log.warning("slave.total_kept", slave_id=sid, told=str(told), error=str(e))
                return
            self.log.info("slave.total_changed", slave_id=sid, was=str(slave.total), now=str(total))
            slave.total, slave.discrete = total, discrete
            self.outbox.emit("slave-changed", slave_id=sid, resources=total)
        if dropped:  # (its new --resources no longer hold them: Mesos's agent drops them too)
            gone = Resources.from_millis(dropped)
            self.log.warning("slave.kept_dropped", slave_id=sid, dropped=str(gone))
        if checkpointed(told.millis) != checkpointed(merged):
            again = Resources.from_millis(checkpointed(merged))
            self.outbox.checkpoint_resources(sid, again)

    def _reconcile_slave(
        self,
        slave: Slave,
        running: list[RunningTask],
        ending: set[tuple[str, str]],
        owners: dict[str, str],
    ) -> None:
        """Match what a (re-)registering slave runs against what the master believes. A
        task the slave says is another principal's than its framework's is not given to
        that framework (nor is a framework id it names to anyone but that principal)."""
        reported = {(r.framework_id, r.task.task_id): r for r in running}
        asked: dict[str, list[ReconcileTask]] = {}
        for key in list(slave.tasks):
            if key in reported or key in ending:
                continue  # running, or ended with its update on the way
            task = self.books.task(*key)
            if task is None:
                slave.tasks.discard(key)
            elif task.state == TaskState.STAGING:
                # Launched, and not a word of it from the slave since: what it sent may
                # predate the launch's arrival there (read behind a backlog, or a retry
                # sent before the launch and read after it), so only the slave can say.
                # Asked, as Mesos's master asks an agent (ReconcileTasksMessage): behind
                # the launch on its topic, the slave answers TASK_DROPPED if it never got
                # the task, and its resources stay booked until then. (Dropped here
                # after a grace of 10 s, a task a slave ran was freed for another: that
                # slave refused the next launch the master believed fit.)
                asked.setdefault(key[0], []).append(
                    ReconcileTask(task_id=task.task_id, slave_id=slave.slave_id)
                )
            else:
                # started (the slave said so before this message) and vanished: as a
                # Mesos slave answers reconciliation of a task it does not have, GONE
                # (TASK_LOST if not partition-aware)
                self.updates.from_master(
                    self.books.frameworks[key[0]],
                    task.task_id,
                    slave.slave_id,
                    TaskState.GONE,
                    Reason.RECONCILIATION,
                    "the slave no longer runs it",
                )
        for framework_id, tasks in asked.items():
            for start in range(0, len(tasks), MAX_RECONCILE_TASKS):
                some = tasks[start : start + MAX_RECONCILE_TASKS]
                ask = Reconcile(framework_id=framework_id, tasks=some)
                self.outbox.send_slave(slave.slave_id, ask)
        removed: dict[str, list[RunningTask]] = {}  # frameworks removed while it was away
        for (framework_id, task_id), r in reported.items():
            if (framework_id, task_id) in slave.tasks:
                self._known_task_back(slave, r)
                continue
            owner = self.books.frameworks.get(framework_id)
            if owner is None and framework_id in self.books.removed:
                removed.setdefault(framework_id, []).append(r)  # (shut down there, below)
                continue
            if not self.ids.launched(r.proof, framework_id, task_id, slave.slave_id):
                # not launched on this slave by this cluster: not booked as its framework's
                # (the slave that runs it may not be back yet: after a failover the first
                # to name a task had it), but what it uses here is held, by nobody
                self._claim_refused("slave.unproven_task", slave, framework_id, task_id)
                self._orphan(slave.slave_id, r, UNPROVEN)
                continue
            if owner is not None and task_id in owner.unreachable:
                self.partitions.task_back(owner, slave, r)  # partition-aware: it carries on
                continue
            if owner is not None and task_id in owner.completed:
                # its framework was told it ended (lost with a removed slave, say) and may
                # have launched it again: it must not come back to life here
                self.log.warning(
                    "slave.task_already_ended",
                    slave_id=slave.slave_id,
                    framework_id=framework_id,
                    task_id=task_id,
                )
                self.outbox.send_slave(
                    slave.slave_id, KillTask(framework_id=framework_id, task_id=task_id)
                )
                continue
            elsewhere = owner.tasks.get(task_id) if owner is not None else None
            if elsewhere is not None or r.task.slave_id != slave.slave_id:
                # a task the master knows on another slave: this slave cannot claim it
                self._claim_refused("slave.claimed_foreign_task", slave, framework_id, task_id)
                continue
            said = owners.get(framework_id)  # whose the slave says it is
            if owner is not None and said not in (None, owner.principal):
                self.outbox.count_refused("forbidden")
                self.log.warning(
                    "slave.other_owner",
                    slave_id=slave.slave_id,
                    framework_id=framework_id,
                    task_id=task_id,
                    owner=owner.principal,
                    reported=said,
                )
            if owner is not None and said in (None, owner.principal):
                task = Task(r.task, framework_id, slave.slave_id, r.state)
                task.health_said(r.healthy)
                owner.tasks[task_id] = task
                slave.add_task(framework_id, task.info)
                self.outbox.task_changed(task, added=True)
                role = owner.role_of(r.task)
                sid = slave.slave_id
                self.allocator.allocate_existing(framework_id, sid, r.task.resources, role)
                executor = r.task.executor  # counted once, as at its first task's launch
                found = executor_key(r.task, slave.slave_id)
                if (
                    executor is not None
                    and found is not None
                    and owner.keeps_executor(found, executor.resources, role)
                ):
                    self.allocator.allocate_existing(framework_id, sid, executor.resources, role)
            else:  # nobody's here until its framework's principal comes for it
                self._orphan(slave.slave_id, r, said)
        for framework_id, theirs in removed.items():
            # It missed the ShutdownFramework (away, or unreachable and removed, when its
            # framework was torn down or timed out): as Mesos's master does for a completed
            # framework's tasks, it is told again. What they use is held by nobody while
            # they die, as at the removal (`master.dying`), from now: never as an orphan,
            # whose framework cannot come back.
            self.log.info(
                "slave.removed_framework_tasks",
                slave_id=slave.slave_id,
                framework_id=framework_id,
                tasks=len(theirs),
            )
            self.removals.hold_dying_again(slave.slave_id, framework_id, theirs)
            self.outbox.send_slave(slave.slave_id, ShutdownFramework(framework_id=framework_id))

    def _known_task_back(self, slave: Slave, r: RunningTask) -> None:
        """A task booked on the slave that the slave names again: its health verdict as
        the slave says it, and its framework's kill goes again (as Mesos's
        `reconcileKnownSlave` re-sends `killedTasks`): one sent while the slave was away
        (restarting) never reached it."""
        task = self.books.task(r.framework_id, r.task.task_id)
        if task is None or task.terminal:
            return
        if task.health_said(r.healthy):
            self.outbox.task_changed(task)
        if task.kill is not None:
            self.log.info(
                "slave.kill_again",
                slave_id=slave.slave_id,
                framework_id=r.framework_id,
                task_id=task.task_id,
            )
            self.outbox.send_slave(slave.slave_id, task.kill)

    def _claim_refused(self, event: str, slave: Slave, framework_id: str, task_id: str) -> None:
        """A task a re-registering slave names is not booked as its framework's: counted
        as refused, and logged as `event`."""
        self.outbox.count_refused("forbidden")
        self.log.warning(
            event,
            slave_id=slave.slave_id,
            principal=slave.principal,
            framework_id=framework_id,
            task_id=task_id,
        )

    def _orphans_not_named(self, slave_id: str, running: list[RunningTask]) -> None:
        """Orphans on the slave that it no longer names (they ended while their framework
        was away): what they held is free again. An executor's hold passes to an orphan
        still running in it."""
        named = {(r.framework_id, r.task.task_id) for r in running}
        orphans = self.books.orphans
        gone = [o for o in orphans.on(slave_id) if (o.framework_id, o.task.task_id) not in named]
        for orphan in gone:  # (all first: an heir is one still running, not one gone too)
            orphans.remove(orphan)
        for orphan in gone:
            released = orphan.held
            if orphan.holds_executor and orphan.executor is not None:
                heirs = orphans.in_executor(orphan.framework_id, orphan.executor)
                if heirs:
                    orphans.replace(heirs[0], holding_executor(heirs[0]))
                    released = orphan.task.resources
            self.allocator.release_unowned(slave_id, released)
        if gone:
            self.log.info("slave.orphans_gone", slave_id=slave_id, tasks=len(gone))

    def _orphan(self, slave_id: str, r: RunningTask, principal: str | None) -> None:
        """A task kept for a framework not here (or not the one the slave names): its
        resources held, by nobody, until that framework's principal subscribes."""
        orphans = self.books.orphans
        if orphans.has(r.framework_id, slave_id, r.task.task_id):
            return
        orphan = Orphan(
            r.task, r.framework_id, slave_id, r.state, r.task.resources, principal, r.healthy
        )
        executor = orphan.executor
        if executor is not None and not any(
            o.holds_executor for o in orphans.in_executor(r.framework_id, executor)
        ):
            orphan = holding_executor(orphan)  # (adopted with the task)
        orphans.add(orphan, loop_time())
        self.allocator.hold_unowned(slave_id, orphan.held)

    async def on_heartbeat(self, msg: Heartbeat, caller: Caller) -> None:
        if self._heard([msg.source], caller, msg.incarnation):
            self.messages.refused("Heartbeat", "unknown-slave")

    async def on_heartbeats(self, msg: Heartbeats, caller: Caller) -> None:
        unknown = self._heard(msg.slave_ids, caller, msg.incarnation)
        # each id counted as a Heartbeat, as a list's items are (/metrics reads the same)
        counts, n = self.messages, len(msg.slave_ids)
        counts.received["Heartbeat"] += n
        counts.outcomes[("Heartbeat", "handled", "")] += n - len(unknown)
        if unknown:
            counts.outcomes[("Heartbeat", "refused", "unknown-slave")] += len(unknown)

    def _heard(self, slave_ids: list[str], caller: Caller, incarnation: str) -> list[str]:
        """Take these heartbeats; tell the slaves the master does not know (of the
        caller's) to register again, and return their ids."""
        now = loop_time()
        unknown = take_heartbeats(self.books.slaves, slave_ids, caller.principal, now, incarnation)
        for slave_id in unknown:
            # A slave we removed (or a master that restarted): it must register again.
            owner = self.books.slave_owners.get(slave_id, caller.principal)
            if slave_id and owner == caller.principal:
                with contextlib.suppress(ValueError):
                    self.outbox.send_slave_as(
                        caller.principal,
                        check_segment(slave_id),
                        Error(
                            message=f"unknown slave {slave_id}: re-register",
                            code="unknown-slave",
                            about="Heartbeat",
                        ),
                    )
        return unknown

    async def on_status_update(self, msg: StatusUpdate, caller: Caller) -> None:
        if self._slave_of(msg.slave_id, caller, "StatusUpdate") is not None:
            await self.status_updates.take(msg, caller)

    def _framework_on_slave(
        self, framework_id: str, slave_id: str, caller: Caller, about: str
    ) -> Framework | None:
        """The framework an executor message names, if it ran on the caller's slave."""
        if self._slave_of(slave_id, caller, about) is None:
            return None
        fw = self.books.frameworks.get(framework_id)
        if fw is None or slave_id not in fw.slaves_used:
            self.outbox.refuse(
                caller,
                f"framework {framework_id} has no executor on slave {slave_id}",
                "forbidden",
                about,
                slave_id=slave_id,
                framework_id=framework_id,
            )
            return None
        return fw

    async def on_framework_shut_down(self, msg: FrameworkShutDown, caller: Caller) -> None:
        """The slave's tasks of a removed framework have ended: what they used is free."""
        if self._slave_of(msg.slave_id, caller, "FrameworkShutDown") is not None:
            self.removals.release_dying(msg.slave_id, msg.framework_id)

    async def on_executor_message(self, msg: FrameworkMessage, caller: Caller) -> None:
        fw = self._framework_on_slave(msg.framework_id, msg.slave_id, caller, "FrameworkMessage")
        if fw is not None and fw.connected:
            self.outbox.send_framework(fw, msg)

    async def on_usage_report(self, msg: UsageReport, caller: Caller) -> None:
        """A slave's look at what its command tasks and custom executors use: kept on
        each task, and on the slave for each executor, that it names and that runs there
        (a slave speaks for its own alone; others are left out, logged)."""
        slave = self._slave_of(msg.slave_id, caller, "UsageReport")
        if slave is None:
            return
        strangers = 0
        used = []
        for usage in msg.tasks:
            fw = self.books.frameworks.get(usage.framework_id)
            task = fw.tasks.get(usage.task_id) if fw is not None else None
            if task is None or task.slave_id != msg.slave_id:
                strangers += 1  # (ended meanwhile, or not this slave's to report)
                continue
            task.used = used_between(task.usage, usage)
            task.usage = usage
            used.append(task.used)
        before, slave.executor_usage = slave.executor_usage, {}
        for e in msg.executors:
            fw = self.books.frameworks.get(e.framework_id)
            if fw is None or (msg.slave_id, e.executor_id) not in fw.executors:
                strangers += 1  # (exited meanwhile, or not this slave's to report)
                continue
            key = (e.framework_id, e.executor_id)
            slave.executor_usage[key] = e
            used.append(used_between(before.get(key), e))
        slave.used = summed(used)
        if strangers:
            self.log.info("usage.unknown_tasks", slave_id=msg.slave_id, count=strangers)

    async def on_executor_exited(self, msg: ExecutorExited, caller: Caller) -> None:
        key = (msg.slave_id, msg.executor_id)
        if msg.checked:  # (CheckExecutors' answer: heard while still asked, and only then)
            asker = self._framework_on_slave(
                msg.framework_id, msg.slave_id, caller, "ExecutorExited"
            )
            if asker is None or asker.executor_checks.get(key) != msg.ask:
                return  # it ended, or was launched on, since that ask (asked again or not)
        orphan = self.books.orphans.executor(msg.framework_id, key)
        mine = orphan is not None and self._slave_of(msg.slave_id, caller, "ExecutorExited")
        if orphan is not None and mine is not None:
            self.books.orphans.remove_executor(orphan)  # (held for a framework not here)
            self.allocator.release_unowned(msg.slave_id, orphan.resources)
            self.request_round()
            return
        fw = self._framework_on_slave(msg.framework_id, msg.slave_id, caller, "ExecutorExited")
        self.log.info(
            "executor.exited",
            framework_id=msg.framework_id,
            slave_id=msg.slave_id,
            executor_id=msg.executor_id,
            status=msg.status,
        )
        if fw is None:
            return
        held, role = fw.forget_executor(key)
        if held is not None:  # what it held goes back to the pool
            self.allocator.recover(fw.framework_id, msg.slave_id, held, role=role)
            self.request_round()
        if fw.connected:
            self.outbox.send_framework(
                fw, Failure(slave_id=msg.slave_id, executor_id=msg.executor_id, status=msg.status)
            )

    async def on_error(self, msg: Error, caller: Caller) -> None:
        sampled = self.outbox.sampled(caller.principal, "error-received")
        if sampled is not None:  # another party's text: cut, and sampled as refusals are
            self.log.warning(
                "master.error_received",
                message=logs.clip(msg.message),
                code=logs.clip(msg.code, 60),
                about=logs.clip(msg.about or "", 200),
                kind=caller.kind,
                principal=caller.principal,
                **sampled,
            )

    async def on_gone(self, msg: Gone, caller: Caller) -> None:
        """A Last Will: the connection of `caller` (named by the will's topic) is gone."""
        if msg.kind != caller.kind:
            return
        if msg.kind == "slave":  # every slave that spoke on that connection
            for slave in list(self.books.slaves.values()):
                if slave.principal == caller.principal and slave.incarnation == msg.incarnation:
                    self.removals.disconnect_slave(slave, "its connection was lost (last will)")
        elif msg.kind == "framework":
            framework_id = self.books.inboxes.get((caller.principal, msg.id))
            fw = self.books.frameworks.get(framework_id or "")
            if fw is not None and fw.incarnation == msg.incarnation:
                self.removals.disconnect_framework(fw, "its connection was lost (last will)")
