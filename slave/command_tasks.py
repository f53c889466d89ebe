"""The slave's side of command tasks (a shell command, or one in a container image): each
in its sandbox and its container, as its principal's user where the slave switches users
(slave.tenancy), with nothing of the slave's environment (slave.task_env).

Built by the slave with what it shares (its config, isolator, podman, how it confines
tasks) and what it does for them (status reports, checkpoints): a collaborator beside
`ExecutorSide`, as a Mesos agent's command executor is beside custom ones.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.health_checker import CheckState, HealthChecks
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.discrete import environment as ports_environment
from protocol.wire.messages import Reason, RunTask, TaskInfo, TaskState
from slave import volumes
from slave.health_checks import TaskProcess, probe_for
from slave.images import command_runner, image_problem_here
from slave.isolator import Isolator, container_name
from slave.kills import Kills
from slave.paths import executor_sandbox, run_dir_path, task_sandbox, task_sandbox_name
from slave.runners import CommandRunner, Limit, Run
from slave.task_env import task_environment
from slave.tenancy import Tenancy

if TYPE_CHECKING:
    from slave.config import SlaveConfig, TaskRecord
    from slave.reports import TaskReports


class CommandTasks:
    def __init__(
        self,
        config: SlaveConfig,
        isolator: Isolator,
        podman: str | None,
        *,
        tenancy: Callable[[], Tenancy],
        reports: TaskReports,
        checkpoint: Callable[[TaskRecord], Awaitable[None]],
        kills: Kills,
        shared_in_use: Callable[[tuple[str, str]], set[str]] = lambda _: set(),
    ) -> None:
        """`shared_in_use((framework_id, task_id))`: the shared volumes live tasks of
        other principals use (a task on one leaves it its owner's)."""
        self.config, self.isolator, self.podman = config, isolator, podman
        self.shared_in_use = shared_in_use
        self.slave_id = config.slave_id
        self._tenancy, self._reports = tenancy, reports
        self._checkpoint, self._kills = checkpoint, kills
        self.health = HealthChecks(kills.log)  # tasks' health checks, from their start

    def sandbox(self, framework_id: str, task_id: str) -> Path:
        return task_sandbox(self.config.work_dir, framework_id, task_id)

    def executor_sandbox(self, framework_id: str, executor_id: str) -> Path:
        return executor_sandbox(self.config.work_dir, framework_id, executor_id)

    def image_problem(self, framework_id: str, task: TaskInfo) -> str | None:
        if task.container is None or self.config.simulated_tasks:
            return None  # (a simulated slave runs nothing)
        sandbox = (
            f"{self.config.work_dir}/sandboxes/{framework_id}/{task_sandbox_name(task.task_id)}"
        )
        return image_problem_here(task, self.podman, sandbox)

    def env(
        self,
        msg: RunTask,
        framework: dict[str, str],
        sandbox: Path,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """A task's (or executor's) whole environment (slave.task_env): `framework`'s
        variables, the operator's, and the slave's for it (`extra`: an executor's)."""
        return self.env_of(msg.framework_id, framework, sandbox, extra, msg.task.discrete)

    def env_of(
        self,
        framework_id: str,
        framework: dict[str, str],
        sandbox: Path,
        extra: dict[str, str] | None = None,
        discrete: Discrete = EMPTY,
    ) -> dict[str, str]:
        own = {
            "DRFMESOS_CLUSTER": self.config.cluster,
            "DRFMESOS_SLAVE_ID": self.slave_id,
            "DRFMESOS_FRAMEWORK_ID": framework_id,
            **ports_environment(discrete),  # PORT0, ..., PORTS (Marathon's)
            **(extra or {}),
        }
        # Mesos executors' adapter runs in this Python: the slave's own, unless the
        # operator names one that tasks' users may run (--task-env DRFMESOS_PYTHON=...)
        operator = {"DRFMESOS_PYTHON": sys.executable, **self.config.task_env}
        return task_environment(operator, framework, own, sandbox)

    async def start(self, msg: RunTask, record: TaskRecord) -> None:
        """Start a command task's process; checkpointed once it runs."""
        task = record.info
        assert task.command is not None
        sandbox = self.sandbox(msg.framework_id, task.task_id)
        tenancy = self._tenancy()
        user = await tenancy.user_for(msg.principal)
        run_dir = run_dir_path(self.config.work_dir, msg.framework_id, task.task_id)
        try:  # (its persistent volumes: made, its user's, their places in the sandbox)
            # bound by its first shell (confine.mounts_script), an image's by podman;
            # linked where the slave has no namespace to bind them in
            bound = task.container is None
            link = bound and not tenancy.confinement.pid_namespace
            busy = self.shared_in_use((msg.framework_id, task.task_id))
            binds = await asyncio.to_thread(
                volumes.prepare,
                self.config.work_dir, sandbox, task.resources, user, link, busy, bound,
            )  # fmt: skip
        except OSError as e:
            await self._reports.report(
                msg.framework_id, task, TaskState.FAILED, Reason.COMMAND_EXECUTOR_FAILED,
                f"could not make its volumes ready: {e}",
            )  # fmt: skip
            return
        run = Run(sandbox, run_dir, user, tenancy.confinement, binds)
        try:
            name = container_name(msg.framework_id, task.task_id)
            container = await self.isolator.prepare(name, task.resources, msg.principal)
        except OSError as e:
            await self._reports.report(
                msg.framework_id,
                task,
                TaskState.FAILED,
                Reason.COMMAND_EXECUTOR_FAILED,
                f"could not make its container: {e}",
            )
            return
        env = self.env(msg, task.command.environment, sandbox)
        record.runner = runner = command_runner(
            task,
            run,
            self._reports.reporter(record),
            env,
            container,
            self.podman,
            self.slave_id,
            msg.framework_id,
        )
        await runner.start()
        if task.health_check is not None:  # (its checks start now: checkpointed so)
            record.health = CheckState()
        await self._checkpoint(record)
        if task.health_check is not None and runner.pid is not None:
            self._check_health(record, TaskProcess(runner, sandbox, env, run, container))

    async def resume_health(self, record: TaskRecord, sandbox: Path, run_dir: Path) -> None:
        """A task this slave recovered after a restart is checked again, as it was before
        (as its user, confined as it is, with its environment), from where its checks
        were (its verdict, its failures in a row, its delay and grace from its start)."""
        runner, task = record.runner, record.info
        if task.health_check is None or task.command is None or runner is None:
            return
        assert isinstance(runner, CommandRunner)
        tenancy = self._tenancy()
        try:
            user = await tenancy.user_for(record.principal)
        except Exception as e:  # (its user gone: the task runs on, unchecked, and says so)
            ids = {"framework_id": record.framework_id, "task_id": task.task_id}
            self._kills.log.warning("health.not_resumed", error=repr(e), **ids)
            return
        run = Run(sandbox, run_dir, user, tenancy.confinement)
        env = self.env_of(
            record.framework_id, task.command.environment, sandbox, discrete=task.discrete
        )
        self._check_health(record, TaskProcess(runner, sandbox, env, run, runner.container))

    def _check_health(self, record: TaskRecord, process: TaskProcess) -> None:
        """Check a task's health (slave.health_checks) until it ends or is killed: its
        verdict to its framework as it changes, a kill with its grace when it fails."""
        check, runner = record.info.health_check, record.runner
        assert check is not None
        assert runner is not None
        key = (record.framework_id, record.info.task_id)

        async def said(healthy: bool, why: str) -> None:
            if record.state == TaskState.RUNNING:
                record.healthy = healthy
                update = self._reports.report(
                    key[0], record.info, TaskState.RUNNING,
                    Reason.TASK_HEALTH_CHECK_STATUS_UPDATED, why,
                )  # fmt: skip
                await asyncio.shield(update)  # (a kill's cancel does not cut it in two)

        async def failed(why: str) -> None:
            self.health.stop(key)
            if record.killing:  # (its framework asked to hear it)
                await self._reports.report(
                    key[0], record.info, TaskState.KILLING, None, f"killing: {why}"
                )
            limit = Limit(TaskState.KILLED, None, f"killed: {why}", hard=False)
            self._kills.start(record, record.grace(self.config), limit)

        async def kept(_: CheckState) -> None:
            if not record.state.terminal:  # (an ended task's record is not made again)
                await self._checkpoint(record)  # (its failures in a row: a restart goes on)

        record.health = record.health or CheckState()
        probe = probe_for(check, process)
        self.health.start(key, check, probe, said, failed, record.health, kept)
