"""The slave's side of its command tasks' health checks (run by protocol.health_checker,
as Mesos's command executor runs them): each task's check in an asyncio task of its own,
from the task's start until it ends or a kill begins.

A COMMAND check runs as the task runs, never as root: as its user, in its PID and mount
namespaces (`nsenter` to the namespace's init), in its cgroup (what it uses is the
task's), in its sandbox, with the task's environment, which only the user's shell sees
(root's steps run with a clean one). HTTP and TCP checks connect from the slave to
127.0.0.1:PORT (a task in a PID namespace of its own still shares the slave's network).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from protocol import health_checker
from protocol.health_checker import Probe, command_probe
from protocol.wire.health import CommandCheck, HealthCheck
from slave.confine import Join, Start
from slave.isolator import Container
from slave.keyrings import own_session_keyring
from slave.runners import CommandRunner, Run, still_running

NOT_YET = "the task has not started yet"
GONE = "the task is not running"


@dataclass(frozen=True)
class TaskProcess:
    """What a COMMAND check needs of its task: who and where it runs."""

    runner: CommandRunner  # its `pid`: the slave's child (unshare, or the wrapper)
    sandbox: Path
    env: dict[str, str]  # the task's whole environment
    run: Run  # its user and how it is confined
    container: Container | None


class CommandProbe:
    """A COMMAND check, confined as its task is (see the module's docstring)."""

    def __init__(self, check: CommandCheck, task: TaskProcess, timeout: float) -> None:
        self.check, self.task, self.timeout = check, task, timeout

    def start(self) -> Start | str:
        """How the check starts (slave.confine), or why it cannot (its task is gone)."""
        task, run = self.task, self.task.run
        join: Join = ("", {})
        if task.container is not None:
            join = task.container.join()
        init = None
        if run.confinement.pid_namespace:
            pid, started_at = task.runner.pid, task.runner.started_at
            # (its pid, once reaped, may be another's: then nothing is entered)
            alive = bool(pid) and still_running(pid or 0, started_at)
            init = namespace_init(pid) if alive else None
            if init is None:
                # (a check with no delay may come before the task's first process: said
                # as such, not as a task that is gone)
                return NOT_YET if alive or pid is None else GONE
        env = {**task.env, **self.check.environment}
        return run.confinement.check(
            self.check.value, run.user, env, join,
            namespace=init, sandbox=str(task.sandbox),
        )  # fmt: skip

    async def __call__(self) -> str | None:
        start = self.start()
        if isinstance(start, str):
            return start
        try:
            return await command_probe(
                start.args,
                cwd=self.task.sandbox,
                env=start.env,  # (root's: the task's variables are in the script, on stdin)
                timeout=self.timeout,
                script=start.script or b"",
                first=own_session_keyring if self.task.run.user is not None else None,
            )
        except subprocess.SubprocessError as e:  # (own_session_keyring failed)
            return f"the check could not start: no session keyring of its own ({e})"


def namespace_init(pid: int | None) -> int | None:
    """The init of the PID namespace `unshare --fork` (pid) made: its one child."""
    if pid is None:
        return None
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def probe_for(check: HealthCheck, task: TaskProcess) -> Probe:
    """A command task's probe: a COMMAND check confined as `task` runs."""
    return health_checker.probe_for(
        check, lambda command, timeout: CommandProbe(command, task, timeout)
    )
