"""The slave: registers with the master, runs tasks, and reports every status change.

Its promises:

- a slave keeps its id in its work dir, so a restarted slave re-registers as the same
  slave and reports the tasks still running (as a Mesos agent recovers);
- every status update gets a uuid, is written to the work dir before it is sent, and is
  re-sent with backoff (across reconnects and restarts) until the master acknowledges it;
- bad input (a malformed RunTask, a task for resources it does not have, a kill for a task
  it does not run) gets an `Error` back and changes nothing it runs;
- a tenant's task reaches nothing of another's, nor the slave's, where the host allows
  (slave.tenancy): it runs as its principal's user, in a PID namespace, in a clean
  environment; executors, containers, sandboxes and journals are keyed by structure, so
  no framework id names another's; and each framework's principal is checkpointed with
  its tasks and reported when the slave re-registers (`Reregister.owners`), so that a
  master that lost its registry lets only that principal claim them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import ChainMap
from collections.abc import Coroutine, Mapping
from typing import Any

from protocol import logs
from protocol.journal import Journal, JournalFile
from protocol.tooling.remembered import keep_newest
from protocol.transport.aio import cancel_and_wait
from protocol.transport.base import Transport
from protocol.transport.inbound import Dispatcher
from protocol.transport.leader import LeaderWatch
from protocol.wire.ids import shorten
from protocol.wire.messages import (
    TERMINAL_STATES,
    CheckExecutors,
    CheckpointResources,
    Error,
    FrameworkMessage,
    FrameworkShutDown,
    KillPolicy,
    KillTask,
    ReadFile,
    Reason,
    Reconcile,
    Registered,
    RunTask,
    RunTasks,
    ShutdownFramework,
    Source,
    StatusAck,
    TaskState,
    Wire,
)
from protocol.wire.reservations import base_of, is_shared, partial_volume, shared_keys
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics, check_segment
from slave.command_tasks import CommandTasks
from slave.config import SlaveConfig, TaskRecord
from slave.confine import UNCONFINED
from slave.default_executor import DefaultExecutor
from slave.disk_isolator import DiskWatch
from slave.executor_side import ExecutorSide
from slave.executor_tokens import ExecutorTokens, load_or_make_key
from slave.files import read_sandbox_file
from slave.images import find_podman
from slave.isolator import POSIX_WARNING, make_isolator
from slave.kept_resources import KeptResources, Version
from slave.kills import Kills
from slave.launch_checks import LaunchChecks
from slave.launches import RecentLaunches, run_in_turn, run_together
from slave.master_link import MasterLink
from slave.memory_limits import enforce_memory_limits
from slave.owners import Owners
from slave.pid_shares import PidShares, host_pids
from slave.port_strays import Strays
from slave.ports_isolator import enforce_ports
from slave.recovery import recover
from slave.registration import Registration
from slave.reports import TaskReports
from slave.runners import Limit, SimulatedRunner
from slave.sandbox_gc import SandboxGC, sandbox_names
from slave.task_groups import TaskGroups
from slave.tenancy import Tenancy, start_tenancy
from slave.updates import OwedUpdates
from slave.usage import report_loop

__all__ = ["Slave", "SlaveConfig", "TaskRecord"]

SHUT_DOWN_KEPT = 10_000  # frameworks shut down here remembered (their late reports dropped)

JOURNAL_FILE = "journal"  # the one file of a process's journals, in its (base) work dir
MAX_HELD_WHILE_RECOVERING = 10_000  # messages for a fleet's slave that wait for its recovery


class Slave:
    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        config: SlaveConfig,
        journals: JournalFile | None = None,
    ) -> None:
        self.bus = bus
        self.topics = topics
        self.config = config
        self.slave_id = config.slave_id
        self.principal = bus.principal or "slave"  # without authentication, a default
        self.to_master = topics.inbound("slave", self.principal)
        self.inbox = topics.slave(self.principal, self.slave_id)
        self.log = logs.get("slave", slave_id=self.slave_id)
        # its journals, in its process's one file (`journals`: a fleet's), else one of its own
        self.journals = journals or JournalFile(config.work_dir / JOURNAL_FILE)
        self.updates = OwedUpdates(
            bus, self.to_master, self._journal("updates.journal"), config.resend_after
        )
        self.task_journal = self._journal("tasks.journal")
        self.owners = Owners(self._journal("owners.journal"))  # each framework's principal
        # its total: --resources, with the reservations and volumes it was told to keep
        valued = {base_of(name) for name in config.discrete}  # (counts kept of none)
        self.resources = KeptResources(config.work_dir, config.resources, self.log, valued)
        self.tasks: dict[tuple[str, str], TaskRecord] = {}
        # frameworks shut down here, the last SHUT_DOWN_KEPT (a tenant's churn of
        # frameworks must not grow the slave for its life), oldest first
        self.shut_down_frameworks: dict[str, None] = {}
        self._launches = RecentLaunches(config.launch_memory)
        # the shared volumes of its total, and the total they were found in (_whole_shared)
        self._shared: frozenset[str] = frozenset()
        self._shared_of: Mapping[str, int] | None = None
        self.kills = Kills(self.log, self._checkpoint_soon)  # kills waiting out their grace
        self._loops: list[asyncio.Task[None]] = []
        isolation = "posix" if config.simulated_tasks else config.isolation
        self.isolator = make_isolator(
            isolation,
            self.slave_id,
            config.cgroups_root,
            config.cgroups_enable_cfs,
            None
            if isolation == "posix"
            else PidShares(host_pids(), config.resources, config.max_task_pids),
            config.resources.quantities().get("cpus"),
        )
        self.podman = None if config.simulated_tasks else find_podman(config.podman)
        # how tasks are kept apart, decided at start (until then: not at all)
        self.tenancy = Tenancy(UNCONFINED, None)
        self.reports = TaskReports(  # its tasks' states, told to the master
            self.slave_id, self.tasks, self.shut_down_frameworks, self.updates, self.log,
            forget=self._forget, ended=self._task_ended, checkpoint=self._checkpoint_soon,
            uncheckpoint=self._uncheckpoint,
        )  # fmt: skip
        self.commands = CommandTasks(  # command tasks: each its own process
            config, self.isolator, self.podman, tenancy=lambda: self.tenancy,
            reports=self.reports, checkpoint=self._checkpoint, kills=self.kills,
            shared_in_use=self.shared_in_use,
        )  # fmt: skip
        self.health = self.commands.health  # (stopped when a task ends or a kill begins)
        self.custom = ExecutorSide(  # custom executors: their processes, and their tasks
            self.slave_id, bus, self.to_master, self.isolator, self.tasks,
            self.shut_down_frameworks, sandbox=self.commands.sandbox,
            executor_sandbox=self.commands.executor_sandbox, env=self.commands.env,
            checkpoint=self._checkpoint, reports=self.reports, tenancy=lambda: self.tenancy,
            grace=lambda record: record.grace(self.config),
            registration_timeout=self.config.executor_registration_timeout,
        )  # fmt: skip
        self.executors = self.custom.executors
        self.groups = TaskGroups()  # task groups' executors, which the slave plays
        self.sandbox_gc = SandboxGC(  # ended tasks' and executors' sandboxes removed
            config.work_dir, config.gc_delay, config.disk_watch_interval,
            config.gc_disk_headroom, self.tasks,
            # (every executor, whose tasks' sandboxes stay while it runs: custom ones, and
            # the task groups' it plays)
            ChainMap[tuple[str, str], Any](self.executors, self.groups.executors), self.log,
        )  # fmt: skip
        self.registration = Registration(  # when it (re-)registers, and what it says
            bus, self.to_master, config, self.log, resources=self.resources,
            tasks=self.tasks, executors=self.executors, groups=self.groups, owners=self.owners,
            updates=self.updates, isolation_warning=lambda: self.isolation_warning,
            answered=lambda master_id, interval: self.master.registered_with(master_id, interval),
        )  # fmt: skip
        # (its registration's: set while the master has it; set once marked gone for good)
        self.registered, self.ended = self.registration.registered, self.registration.ended
        # its heartbeats, and the master's beats it watches (a fleet's: its process's)
        self.master = MasterLink(
            bus, self.to_master, self.slave_id, topics.cluster, self.registered,
            self.registration.soon, self.log,
        )  # fmt: skip
        self._checks = LaunchChecks(  # (what it checks of every task it runs)
            self.config.discrete,
            self.tasks,
            self.executors,
            self.owners,
            self.commands.image_problem,
        )
        self.default_executor = DefaultExecutor(
            self.slave_id,
            self.groups,
            self.tasks,
            self.executors,
            self.shut_down_frameworks,
            bus=bus,
            reports=self.reports,
            free=self.free,
            checks=self._checks,
            start=self._start,
            kill=self._kill_with_grace,
            tell_exited=self.custom.tell_exited,
            log=self.log,
        )
        # what reached a fleet's slave before its handlers (hold_early), for them
        self._early: list[tuple[Wire, str | None]] | None = None

    def _journal(self, name: str) -> Journal:
        """Its journal `name`, named by where it was a file of its own in its work dir."""
        # (by strings: pathlib's relative_to was most of a fleet slave's construction)
        base, own = self.journals.dir.rstrip("/"), str(self.config.work_dir)
        if own == base:
            return self.journals.journal(name)
        if not own.startswith(base + "/"):
            raise ValueError(f"{own} is not under the journal file's directory {base}")
        return self.journals.journal(f"{own[len(base) + 1 :]}/{name}")

    # -- lifecycle ---------------------------------------------------------------------------
    def hold_early(self) -> None:
        """What reaches a fleet's slave from now until its handlers are in place (`start`:
        a kill for a task it is about to recover) waits for them, instead of being
        dropped as unrouted. Its fleet calls it for every slave before it subscribes to
        their topics (by one wildcard, whose handler takes what no slave's route does)."""
        if self._early is not None:
            return
        early = self._early = []

        async def hold(message: Wire, reply_to: str | None) -> None:
            if len(early) < MAX_HELD_WHILE_RECOVERING:
                early.append((message, reply_to))
            else:
                self.log.warning("slave.dropped_while_recovering", type=message.TYPE)

        self.bus.route(self.inbox, hold)

    async def start(self) -> None:
        if self.config.in_fleet:
            self.hold_early()
        if not self.config.simulated_tasks:
            self.tenancy = await start_tenancy(self.config, self.log)
            key = await asyncio.to_thread(
                load_or_make_key, self.config.work_dir, self.config.executor_secret_key
            )
            self.custom.tokens = ExecutorTokens(key, self.slave_id)
        if not self.resources.loaded:  # (a fleet loads all its slaves' at once)
            await self.resources.load()
        await recover(self, self.reports)
        d = Dispatcher(self.bus, "slave")
        d.on(Registered, self.registration.on_registered)
        d.on(RunTasks, self._on_run_tasks)
        d.on(RunTask, self._on_run_task)
        d.on(KillTask, self._on_kill_task)
        d.on(ShutdownFramework, self._on_shutdown_framework)
        d.on(StatusAck, self._on_status_ack)
        d.on(FrameworkMessage, self.custom.on_framework_message)
        d.on(ReadFile, self._on_read_file)
        d.on(CheckpointResources, self._on_checkpoint_resources)
        d.on(Reconcile, self._on_reconcile)
        d.on(CheckExecutors, self.default_executor.on_check)
        d.on(Error, self.registration.on_error)
        if self.config.in_fleet:
            self.bus.route(self.inbox, d)  # the process's wildcard subscription brings it
            early, self._early = self._early or [], None
            for message, reply_to in early:
                await d(message, reply_to)
        else:
            await self.bus.subscribe(self.inbox, d)
        await LeaderWatch.on(
            self.bus, self.topics, self.registration.on_leader, beat=self.master.beat
        )
        self.bus.on_connect(self.registration.reconnected)
        if self.bus.connected:
            self.registration.soon()
        self._loops = []
        if self.registration.pacer is None:  # (a fleet paces its slaves' in one loop)
            self._loops.append(
                asyncio.create_task(self.registration.loop(), name=f"register-{self.slave_id}")
            )
        if not self.config.in_fleet:  # (a fleet runs these for all its slaves at once)
            self._loops += [
                asyncio.create_task(self.master.heartbeats(), name=f"heartbeat-{self.slave_id}"),
                asyncio.create_task(self.master.silence.run(), name=f"silence-{self.slave_id}"),
                asyncio.create_task(
                    self.updates.resend_loop(self.registered), name=f"resend-{self.slave_id}"
                ),
            ]
        if not self.config.simulated_tasks:
            disk = DiskWatch.of(self.config, self.tasks, self.log)
            if disk.interval > 0:
                self._loops.append(asyncio.create_task(disk.run(), name=f"disk-{self.slave_id}"))
            usage = report_loop(
                self.bus, self.to_master, self.slave_id, self.tasks, self.executors,
                self.isolator, self.registered, self.config.usage_interval, disk.used,
            )  # fmt: skip
            self._loops.append(asyncio.create_task(usage, name=f"usage-{self.slave_id}"))
            self._loops.append(asyncio.create_task(self.sandbox_gc.run(), name="sandbox-gc"))
        if not self.config.simulated_tasks and self.config.holds_ports:
            users = self.tenancy.users  # (a user a principal: strays say whose they are)
            strays = Strays(self.tasks, self.custom.executors, users) if users else None
            ports = enforce_ports(
                self.tasks,
                self.config.held_ports,
                self.config.ports_check_interval,
                self.log,
                strays,
            )
            self._loops.append(asyncio.create_task(ports, name=f"ports-{self.slave_id}"))
        if not self.config.simulated_tasks and not self.isolator.enforces_memory:
            self.log.warning("isolation.posix", what_is_not_enforced=POSIX_WARNING)
            self._loops.append(
                asyncio.create_task(
                    enforce_memory_limits(self.tasks, self.config.memory_check_interval, self.log),
                    name="memory",
                )
            )

    async def stop(self, *, kill_tasks: bool = False) -> None:
        """Stop the slave's own loops. Command tasks keep running (a restarted slave
        recovers them) unless `kill_tasks`; custom executors cannot be recovered, so they
        are always shut down."""
        for task in self._loops:
            await cancel_and_wait(task)
        self._loops = []
        if self.config.in_fleet:
            self.bus.route(self.inbox, None)
        await self.health.close()  # (before the kills: no check starts one of its own)
        if kill_tasks:
            for record in self.tasks.values():
                self.kills.start(record, record.grace(self.config))
            await self.kills.finish()
        await self.kills.cancel()
        for record in list(self.tasks.values()):
            if record.runner is not None:
                await record.runner.close()
        for executor in list(self.executors.values()):
            await executor.shutdown(self.config.kill_grace)
            await executor.close()  # (its watcher, which destroys its container, is gone)
            if executor.container is not None:
                await executor.container.destroy()
        await self.updates.close()
        await self.task_journal.close()
        await self.owners.close()
        await self.isolator.close()

    async def run(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    @property
    def isolation_warning(self) -> str:
        """What this slave does not enforce between tenants, for the master's state (its
        start's `isolation.tenants` warning says the same); "" for simulated tasks."""
        if self.config.simulated_tasks:
            return ""
        return self.tenancy.confinement.not_enforced() or ""

    # -- tasks ---------------------------------------------------------------------------------
    def used(self) -> Resources:
        total = Resources()
        for r in self.tasks.values():
            if not r.state.terminal:
                total = total + r.info.resources
        for executor in self.executors.values():
            total = total + executor.info.resources
        return total + self.groups.used()

    def free(self) -> Resources:
        return self._whole_shared(self.resources.total.subtract_clamped(self.used()))

    def _whole_shared(self, free: Resources) -> Resources:
        """`free` with each shared volume whole: in use or not, it is there for one task
        more (each task of a SHARED_RESOURCES framework on it holds a copy)."""
        total = self.resources.total.millis
        if total is not self._shared_of:  # (its total changed: a look at each key, once)
            self._shared_of, self._shared = total, shared_keys(total)
        if not self._shared:  # (most slaves: once a task, walking its keys was not free)
            return free
        shared = {k: total[k] - free.get_millis(k) for k in self._shared}
        return free + Resources.from_millis(shared)

    def shared_in_use(self, task: tuple[str, str]) -> set[str]:
        """The shared volumes live tasks of other principals than `task`'s use (their
        owner stays theirs: Mesos gives a shared volume to a task's user only while no
        other task uses it; tasks of one principal are one user)."""
        record = self.tasks.get(task)
        me = record.principal if record is not None else None
        return {
            key
            for r in self.tasks.values()
            if r.principal != me and not r.state.terminal
            for key in r.info.resources.millis
            if is_shared(key)
        }

    async def _on_checkpoint_resources(self, msg: CheckpointResources, _: str | None) -> None:
        """The master changed whose some of its resources are: kept before anything else
        is done with them (a restart announces them as they are now)."""
        if msg.slave_id != self.slave_id:
            self.log.warning("resources.not_mine", to=msg.slave_id)
            return
        await self.resources.keep(msg.resources, Version(msg.epoch, msg.version), msg.destroyed)

    async def _on_reconcile(self, msg: Reconcile, _: str | None) -> None:
        """The master asks after tasks it launched here (slave.reports.TaskReports.answer)."""
        self.reports.answer(msg)

    async def _on_run_tasks(self, msg: RunTasks, reply_to: str | None) -> None:
        if msg.launch_id and msg.launch_id in self._launches:
            self.log.warning(
                "run.redelivered", framework_id=msg.framework_id, launch_id=msg.launch_id
            )
            return  # the broker's second delivery of a launch already run
        if msg.launch_id:
            self._launches.add(msg.launch_id)
        if msg.group is not None:
            await self.default_executor.run(msg, reply_to)
            return
        # Each task is checked and booked in turn (one bad task spoils only itself), then
        # they start together: their checkpoints and updates share the journals' writes
        # (one a turn, not one a task) and their RUNNING updates leave as one list. A task
        # on an executor starts in its turn: it may start the executor the next one uses.
        free = self.free()  # (summed once a launch, not once a task: it walks every task)
        starts: list[Coroutine[Any, Any, None]] = []
        for run, task_map in zip(msg.each(), msg.task_maps(), strict=True):
            free, start = self._admit(run, reply_to, free, task_map)
            if start is not None:
                starts.append(start)
            if run.task.executor is not None:  # started before the next is looked at
                await run_together(starts)
                starts = []
                free = self.free()  # (a new executor takes its own resources too)
        # (a simulated task's start waits for nothing but its framework's owner written,
        # once: one after another, not a task each)
        await (run_in_turn if self.config.simulated_tasks else run_together)(starts)

    async def _on_run_task(self, msg: RunTask, reply_to: str | None) -> None:
        _, start = self._admit(msg, reply_to, self.free())
        if start is not None:
            await start

    def _admit(
        self,
        msg: RunTask,
        reply_to: str | None,
        free: Resources,
        task_map: dict[str, Any] | None = None,
    ) -> tuple[Resources, Coroutine[Any, Any, None] | None]:
        """Check a task and book it if `free` holds it: what is free after it, and what
        starts it (or reports it refused). `task_map`: the task as it came on the wire,
        journaled as it is (RunTasks.task_maps)."""
        task = msg.task
        key = (msg.framework_id, task.task_id)
        ids = {"framework_id": msg.framework_id, "task_id": task.task_id}
        problem = None
        if task.slave_id != self.slave_id:
            problem = f"task {task.task_id} is for slave {task.slave_id}, not {self.slave_id}"
        elif key in self.tasks:
            self.log.warning("run.duplicate", **ids)
            self.bus.reply_error(
                reply_to,
                f"task {task.task_id} is already running here",
                code="duplicate-task",
                about="RunTask",
            )
            return free, None  # the running task is left alone
        elif not free.contains(need := task.resources + self.custom.new_executor(msg)):
            problem = (
                f"task {task.task_id} needs {need} but slave {self.slave_id} has only {free} free"
            )
        elif (volume := partial_volume(need.millis, self.resources.total.millis)) is not None:
            problem = f"task {task.task_id}: a persistent volume is used whole: {volume}"
        else:
            problem = self._checks(msg)
            if problem is None and task.executor is not None:
                try:  # (it names a topic's handler too)
                    check_segment(task.executor.executor_id, "executor_id")
                except ValueError as e:
                    problem = str(e)
        if problem:
            self.log.warning("run.refused", reason=logs.clip(problem), **ids)
            self.bus.reply_error(reply_to, problem, code="invalid-task", about="RunTask")
            refused = self.reports.report(
                msg.framework_id, task, TaskState.ERROR, Reason.TASK_INVALID, problem, Source.SLAVE
            )
            self.custom.executor_not_started(msg)
            return free, refused
        self.shut_down_frameworks.pop(msg.framework_id, None)
        record = TaskRecord(msg.framework_id, task, TaskState.STAGING, principal=msg.principal)
        record.killing, record.proof = msg.killing, msg.proof
        record.info_dump = task_map
        self.tasks[key] = record
        self.log.info("run.start", resources=task.resources, **ids)
        return self._whole_shared(free - task.resources), self._start(msg, record)

    def _kill_with_grace(self, record: TaskRecord, why: str) -> None:
        """Begin a task's kill with its grace (a task group's sibling's: DefaultExecutor)."""
        self.health.stop((record.framework_id, record.info.task_id))
        limit = Limit(TaskState.KILLED, None, why, hard=False)
        self.kills.start(record, record.grace(self.config), limit)

    async def _start(self, msg: RunTask, record: TaskRecord) -> None:
        """Start a task; whatever keeps it from starting ends it TASK_FAILED, saying why."""
        try:
            await self.sandbox_gc.claimed(  # (its old sandbox renamed away)
                msg.framework_id, sandbox_names(record.info)
            )
            await self.owners.own(msg.framework_id, msg.principal)
            await self._start_runner(msg, record)
        except (OSError, ValueError) as e:
            self.log.warning(
                "task.start_failed",
                framework_id=msg.framework_id,
                task_id=record.info.task_id,
                error=shorten(str(e), 200),
            )
            await self.reports.report(
                msg.framework_id,
                record.info,
                TaskState.FAILED,
                Reason.COMMAND_EXECUTOR_FAILED,
                f"could not start the task: {e}",
            )
            self.custom.executor_not_started(msg)

    async def _start_runner(self, msg: RunTask, record: TaskRecord) -> None:
        task = record.info
        if self.config.simulated_tasks:
            # checkpointed as it reports RUNNING, at once (with its end: what a restart
            # resumes), as a command task once its process runs
            record.runner = SimulatedRunner(
                task, self.reports.reporter(record), self.config.time_scale
            )
            await record.runner.start()
        elif task.command is not None:
            await self.commands.start(msg, record)
        else:
            await self.custom.run_task(msg, record)

    async def _checkpoint(self, record: TaskRecord) -> None:
        self._checkpoint_soon(record)
        await self.task_journal.synced()

    def _checkpoint_soon(self, record: TaskRecord) -> None:
        """The task's record made, written with the file's next write (see put_soon)."""
        key = f"{record.framework_id}/{record.info.task_id}"
        if record.info_dump is None:
            record.info_dump = record.info.model_dump(mode="python")
        self.task_journal.put_soon(
            key,
            {
                "framework_id": record.framework_id,
                "task": record.info_dump,
                "state": record.state.value,
                "executor_key": record.executor_key,
                "principal": record.principal,
                "proof": record.proof,
                "runner": record.runner.checkpoint() if record.runner is not None else None,
                # what a restart resumes: its kill, and how it ends; its health's verdict
                "kill": record.kill.dump() if record.kill is not None else None,
                "kill_reason": record.kill_reason.value if record.kill_reason else None,
                "kill_gone": record.kill_gone,
                "healthy": record.healthy,
                "health": dataclasses.asdict(record.health) if record.health else None,
                # a task group's: its executor and siblings, which a restart rejoins
                "group": self.groups.checkpoint(record.framework_id, record.info.task_id),
            },
        )

    def _forget(self, key: tuple[str, str]) -> None:
        self.health.stop(key)
        record = self.tasks.pop(key, None)
        if record is not None:
            self.sandbox_gc.forgotten(key[0], record)  # (kept while its executor lives)
        if record is not None and record.executor_key in self.executors:
            self.executors[record.executor_key].tasks.discard(key[1])

    def _uncheckpoint(self, key: tuple[str, str]) -> None:
        """The task's record dropped with the file's next write (see Journal.discard):
        behind the update that ends it (TaskReports.report), whose write syncs it."""
        self.task_journal.discard(f"{key[0]}/{key[1]}")

    async def _task_ended(self, key: tuple[str, str]) -> None:
        """Out of the books, and of its executor's (its record is dropped by its end's
        update: TaskReports.report)."""
        record = self.tasks.get(key)
        self._forget(key)
        if record is not None:
            await self.custom.task_left(record.executor_key)
            await self.default_executor.task_ended(record)

    async def _forget_async(self, key: tuple[str, str]) -> None:
        """A task forgotten without an update of its end (its framework shut down): out
        of the books, and its record dropped, on disk once this returns."""
        self._uncheckpoint(key)
        await self._task_ended(key)
        await self.task_journal.synced()

    async def _on_kill_task(self, msg: KillTask, reply_to: str | None) -> None:
        key = (msg.framework_id, msg.task_id)
        ids = {"framework_id": msg.framework_id, "task_id": msg.task_id}
        record = self.tasks.get(key)
        if record is None:
            self.log.warning("kill.unknown", **ids)
            self.bus.reply_error(
                reply_to,
                f"no task {msg.task_id} of framework "
                f"{msg.framework_id} runs on slave {self.slave_id}",
                code="unknown-task",
                about="KillTask",
            )
            return
        grace = record.grace(self.config, msg.kill_policy)
        if msg.grace_cap is not None:  # a drain's bound over the task's own policy
            grace = min(grace, msg.grace_cap)
        self.log.info("kill", reason=msg.reason, grace=grace, **ids)
        self.health.stop(key)  # (no health updates once a kill begins)
        record.kill_reason = msg.reason or record.kill_reason
        record.kill_gone = msg.gone or record.kill_gone
        if record.runner is not None:
            killing = msg.killing or record.killing
            if killing and record.state not in (TaskState.KILLING, *TERMINAL_STATES):
                why = f"killing: SIGTERM, then SIGKILL after {grace:g} s"
                await self.reports.report(
                    msg.framework_id, record.info, TaskState.KILLING, msg.reason, why
                )
            self.kills.start(record, grace)
        elif record.executor_key in self.executors:
            executor = self.executors[record.executor_key]
            executor.send(msg.model_copy(update={"kill_policy": KillPolicy(grace_period=grace)}))
            if msg.reason is not None:  # the master's kill: an executor may not ignore it
                grace_then = grace + self.config.kill_grace
                self.kills.overdue(
                    record, grace_then, lambda: executor.shutdown(self.config.kill_grace)
                )

    async def _on_shutdown_framework(self, msg: ShutdownFramework, reply_to: str | None) -> None:
        """The framework is gone: kill its tasks and executors, and owe it nothing more."""
        keep_newest(self.shut_down_frameworks, msg.framework_id, SHUT_DOWN_KEPT)
        self.log.info("framework.shutdown", framework_id=msg.framework_id, cap=msg.grace_cap)
        cap = msg.grace_cap
        self.groups.forget_framework(msg.framework_id)  # (its tasks' kills are below)
        if cap is not None:  # (a drain's: those of an earlier shutdown in their grace too)
            self.kills.cut(msg.framework_id, cap)
        for key, record in list(self.tasks.items()):
            if key[0] == msg.framework_id:
                grace = record.grace(self.config)  # each with its grace, at most the cap
                self.kills.start(record, grace if cap is None else min(grace, cap))
                await self._forget_async(key)
        # an executor's SIGKILL within the cap too (its waits together): a drain leaves no
        # stubborn executor running for two kill graces (one shutting down already, from
        # an earlier teardown, is cut by a second, shorter shutdown, as `Kills.cut` cuts
        # its tasks')
        kill_grace = self.config.kill_grace
        for executor in list(self.executors.values()):  # (side by side, as the kills)
            if executor.framework_id == msg.framework_id and (
                not executor.shutting_down or cap is not None
            ):
                shutdown = executor.shutdown(kill_grace, at_most=cap)
                self.kills.shut_down(msg.framework_id, shutdown, executor.executor_id)
        await self.updates.forget_framework(msg.framework_id)
        self.owners.forget(msg.framework_id)
        # the master holds what they used until they have all ended (a kill begun before
        # this one too): then it is free
        done = FrameworkShutDown(framework_id=msg.framework_id, slave_id=self.slave_id)
        self.kills.then(
            self.kills.of(msg.framework_id), lambda: self.bus.post(self.to_master, done)
        )

    async def _on_read_file(self, msg: ReadFile, reply_to: str | None) -> None:
        """An operator reads a task's stdout or stderr through the master."""
        answer = await read_sandbox_file(self.config.work_dir / "sandboxes", self.slave_id, msg)
        self.bus.post(self.to_master, answer)

    async def _on_status_ack(self, msg: StatusAck, reply_to: str | None) -> None:
        self.updates.acknowledged(msg.uuid)
