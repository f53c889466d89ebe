"""A restarted slave picks up what its previous run left in its work dir: the tasks its
journal holds (a simulated task resumes, a command task's process is adopted again with
its container, an executor's task ends TASK_FAILED, its executor having died with the
slave) and the status updates still owed to the master. A task that cannot be restored is
reported TASK_LOST, never dropped in silence.

A task in a kill's grace at the restart is killed when its grace ends, as that kill
would have (`resume_kill`); a task's health checks go on where they were (its verdict,
its failures in a row, its grace period's start).

A command task keeps what it was started with: the user, the PID namespace (its
checkpointed pid is `unshare`'s, the namespace's parent, or the wrapper's), the
container and the exit status file its checkpoint names (read without following a
link). One started by a slave before #45 names no container: it has the name that slave
gave it (`legacy_container_name`), and its exit status is in its sandbox. Its sandbox is
closed to other users at the slave's start (slave.tenancy), and it runs on as the user
it started as (the slave's).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from protocol.health_checker import CheckState
from protocol.journal import Journal
from protocol.wire.messages import (
    Reason,
    Source,
    StatusUpdate,
    TaskInfo,
    TaskState,
    TaskStatus,
    new_id,
)
from slave.command_tasks import CommandTasks
from slave.config import KillBegun, SlaveConfig, TaskRecord, journal_executor_id
from slave.default_executor import DefaultExecutor
from slave.images import command_runner
from slave.isolator import Isolator, legacy_container_name
from slave.kills import Kills
from slave.reports import TaskReports
from slave.runners import SANDBOX_EXIT_FILE, Limit, Run, SimulatedRunner
from slave.task_groups import TaskGroups
from slave.updates import OwedUpdates


class Slave(Protocol):
    """What recovery reads of the slave (slave.slave.Slave): its books and the
    collaborators it hands tasks to. (What becomes of a task is told through the
    slave's `TaskReports`, passed beside it.)"""

    config: SlaveConfig
    slave_id: str
    log: Any
    tasks: dict[tuple[str, str], TaskRecord]
    updates: OwedUpdates
    task_journal: Journal
    isolator: Isolator
    podman: str | None
    shut_down_frameworks: dict[str, None]
    groups: TaskGroups  # (a recovered group's task rejoins its group and executor)
    default_executor: DefaultExecutor  # (which ends a group's task, and kills siblings)
    commands: CommandTasks  # (a recovered task's health check starts again there)
    kills: Kills  # (and a kill in its grace goes on there)


async def recover(slave: Slave, reports: TaskReports) -> None:
    """Pick up the tasks and owed updates a previous run of this slave left behind; what
    becomes of them told through `reports`.

    A task that cannot be restored is reported TASK_LOST (and logged), never dropped
    in silence: its framework would otherwise wait for it for ever."""
    slave.updates.send_all_soon()
    recovered = 0
    containers: set[str] = set()  # the cgroups of recovered command tasks: kept, not cleaned
    rejoined: dict[str, str] = {}  # a group's tasks, by journal key: their executor's id
    for key, raw in slave.task_journal.items():  # (every group whole before any task ends)
        kept = raw.get("group") if isinstance(raw, dict) else None
        if kept:
            try:
                framework_id, task_id = key.partition("/")[::2]
                rejoined[key] = slave.groups.rejoin(framework_id, task_id, kept)
            except (KeyError, TypeError, ValueError) as e:  # (lost below, if its task is)
                slave.log.error("slave.group_not_rejoined", key=key, error=repr(e))
    for key, raw in slave.task_journal.items():
        try:
            await recover_task(slave, reports, raw, containers, rejoined.get(key))
            recovered += 1
        except Exception as e:
            await lost_at_recovery(slave, key, raw, e)
    # a task of a group that ended FAILED or KILLED while the rest were being restored
    # killed those restored then: the rest are killed now (as `DefaultExecutor.run` does
    # once a group's tasks run)
    for key in rejoined:
        framework_id, task_id = key.partition("/")[::2]
        if why := slave.groups.killed(framework_id, task_id):
            slave.default_executor.kill_sibling(framework_id, task_id, why)
    await slave.isolator.recover(containers)
    if recovered or len(slave.updates):
        slave.log.info("slave.recovered", tasks=recovered, owed_updates=len(slave.updates))


async def recover_task(
    slave: Slave,
    reports: TaskReports,
    raw: Any,
    containers: set[str],
    group_executor: str | None = None,
) -> None:
    """Restore one task from its journal record (`containers`: the cgroups of the
    command tasks restored, which the isolator keeps; `group_executor`: the executor of
    the task group it is of, if it is)."""
    info = TaskInfo.model_validate(raw["task"])
    principal = raw.get("principal") or ""
    record = TaskRecord(raw["framework_id"], info, TaskState(raw["state"]), principal=principal)
    record.proof = raw.get("proof") or ""
    record.healthy = raw.get("healthy")
    if (health := raw.get("health")) is not None:
        record.health = CheckState(
            float(health["since"]), health.get("healthy"), int(health.get("failures") or 0)
        )
    record.kill = KillBegun.load(raw.get("kill"))
    record.kill_reason = Reason(raw["kill_reason"]) if raw.get("kill_reason") else None
    record.kill_gone = bool(raw.get("kill_gone"))
    if group_executor is not None:  # (its statuses name its group's executor)
        record.executor_key = (record.framework_id, group_executor)
    runner = raw.get("runner") or {}
    slave.tasks[(record.framework_id, info.task_id)] = record
    if runner.get("kind") == "simulated":
        sim = SimulatedRunner(info, reports.reporter(record), slave.config.time_scale)
        record.runner = sim
        await sim.start(ends_at=runner.get("ends_at") or time.time())
        if record.kill is not None or record.state == TaskState.KILLING:
            resume_kill(slave, record)
    elif runner.get("kind") == "command" and runner.get("pid"):
        name = runner.get("container") or legacy_container_name(record.framework_id, info.task_id)
        # in its principal's group, counted there, where its checkpoint names a cgroup
        # (a slave before the groups, or a posix one, named none)
        grouped = record.principal if runner.get("cgroup") else None
        container = slave.isolator.adopt(name, grouped, info.resources)
        if container.cgroup is not None:
            containers.add(container.cgroup)
        sandbox = Path(runner["sandbox"])
        exit_file = Path(runner.get("exit_file") or sandbox / SANDBOX_EXIT_FILE)
        cmd = command_runner(
            info,
            Run(sandbox, exit_file.parent),
            reports.reporter(record),
            {},
            container,
            slave.podman,
            slave.slave_id,
            record.framework_id,
        )
        cmd.exit_file = exit_file
        record.runner = cmd
        cmd.recover_in_background(runner["pid"], runner.get("started_at"))
        if record.kill is not None or record.state == TaskState.KILLING:
            resume_kill(slave, record)  # (no health check: a kill had begun)
        elif record.state == TaskState.RUNNING:  # its health check, again
            await slave.commands.resume_health(record, sandbox, exit_file.parent)
    else:  # an executor's task: its executor died with the slave
        await reports.report(
            record.framework_id,
            info,
            TaskState.FAILED,
            Reason.EXECUTOR_TERMINATED,
            "the executor ended while the slave was down",
            Source.SLAVE,
        )


def resume_kill(slave: Slave, record: TaskRecord) -> None:
    """A kill the previous run began, in its grace at the restart, goes on: the task's
    SIGKILL when its grace ends (no second SIGTERM), and its end said as that kill's
    (a health check's, a framework's, the master's), as Mesos's command executor, which
    outlives its agent, finishes it. One in TASK_KILLING with no kill kept (a slave
    from before kills were kept) has its whole grace again."""
    kill = record.kill
    limit = None
    if kill is None:
        left = record.grace(slave.config)
    else:
        left = max(0.0, kill.until - time.time())
        if kill.state is not None:
            limit = Limit(kill.state, kill.reason, kill.message, kill.hard)
    ids = {"framework_id": record.framework_id, "task_id": record.info.task_id}
    slave.log.info("kill.resumed", grace_left=round(left, 3), **ids)
    slave.kills.start(record, left, limit, signalled=True)


async def lost_at_recovery(slave: Slave, key: str, raw: Any, error: Exception) -> None:
    """The journal's record of a task could not be restored: tell its framework the
    task is lost (its ids are in the record's key, `FRAMEWORK/TASK`)."""
    framework_id, _, task_id = key.partition("/")
    slave.log.error(
        "slave.recover_failed", framework_id=framework_id, task_id=task_id, error=repr(error)
    )
    task = raw.get("task") if isinstance(raw, dict) else None
    slave.tasks.pop((framework_id, task_id), None)
    if framework_id and task_id and framework_id not in slave.shut_down_frameworks:
        status = TaskStatus(
            task_id=task_id,
            state=TaskState.LOST,
            slave_id=slave.slave_id,
            reason=Reason.TASK_UNKNOWN,
            source=Source.SLAVE,
            message=f"the slave could not restore it after a restart: {error!r}",
            uuid=new_id(),
            executor_id=journal_executor_id(task)
            or slave.groups.executor_of(framework_id, task_id),  # (a group's, rejoined)
        )
        await slave.updates.send(
            StatusUpdate(framework_id=framework_id, slave_id=slave.slave_id, status=status)
        )
    await slave.task_journal.drop(key)
    # a group's task (rejoined before): out of its group, and its executor ended with it
    # if it was the last (else the executor's resources were held, and re-registered
    # with, for ever)
    await slave.default_executor.ended(framework_id, task_id, TaskState.LOST)
