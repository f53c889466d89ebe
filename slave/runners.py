"""How a slave runs one task: a shell command in a sandbox, or a simulated sleep.

A runner reports its task's life through `report(state, reason, message)` and nothing
else; the slave decides what that means for the books and the master. A runner can also
be *recovered*: after the slave itself was killed and restarted, a command task whose
process survived is watched again, and its exit status is read from its sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import signal
import stat
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from protocol.wire.messages import Reason, TaskInfo, TaskState
from slave.cgroups import MB
from slave.confine import NO_BINDS, UNCONFINED, Binds, Confinement, Start
from slave.isolator import Container, groups_usage
from slave.sandbox import spawn_in_sandbox
from slave.task_users import TaskUser


class Report(Protocol):
    """How a runner tells the slave its task changed state (`exit_code`: a command's)."""

    def __call__(
        self, state: TaskState, reason: Reason | None, message: str, *, exit_code: int | None = None
    ) -> Awaitable[None]: ...


# Where a task's wrapper writes its exit status: a shell task's, running as the task's
# user, in the sandbox (the slave reads it without following a link); an image task's,
# podman's (root), in the task's run dir, `runs/<framework>/<task>/`, the slave's alone.
SANDBOX_EXIT_FILE = ".exit_status"
ENDED_WITHIN = 10.0  # seconds a kill waits, after its SIGKILL, for the task's end to land
EXIT_FILE = "exit_status"


class Runner(Protocol):
    """What the slave holds of a task it runs, whatever runs it: the slave's loops (usage,
    memory limits, OOM kills) ask it for its process and container, never for its type."""

    task: TaskInfo
    pid: int | None  # the task's process while it runs (None: none the slave watches)
    container: Container | None  # its container (a cgroup), if it has one

    @property
    def memory_limit_mb(self) -> float | None: ...

    @property
    def outside_group(self) -> Path | None:
        """A file holding the pid of a process of the task's outside its process group
        (an image's container): its PID namespace is the task's too (ports isolator)."""
        ...

    async def start(self) -> None: ...

    async def kill(
        self, grace: float, limit: Limit | None = None, *, signalled: bool = False
    ) -> None:
        """Stop the task: KILLED, or, given a `limit`, the state and reason it says.
        `signalled`: a kill a restarted slave resumes, its SIGTERM sent before the
        restart: only its SIGKILL is left, after `grace`."""

    async def close(self) -> None:
        """Let go of the task without reporting (the slave is stopping)."""

    def checkpoint(self) -> dict[str, Any]: ...


@dataclass
class Limit:
    """Why a runner was stopped from outside (so its exit can be reported truthfully)."""

    state: TaskState
    reason: Reason | None
    message: str
    hard: bool = True  # SIGKILL at once (a limit's); False: SIGTERM and the task's grace


class Launch(Protocol):
    """How a command task's process is made and ended: a shell in the sandbox
    (`ShellLaunch`), or a container image run by podman (slave.images.ImageLaunch). The
    runner keeps the process, its kill and its exit status; this says what differs."""

    @property
    def memory_limit_mb(self) -> float | None:
        """What the slave's memory loop holds the process to (None: the kernel does)."""

    @property
    def exit_file(self) -> Path:
        """Where the wrapper writes the task's exit status."""

    @property
    def outside_group(self) -> Path | None:
        """A file holding the pid of the task's process outside its process group (an
        image's container, in a PID namespace of its own), or None: it has none."""

    def process(self) -> Start:
        """The task's process: its arguments, its environment and its start script."""

    async def prepare(self) -> None:
        """Before the process starts, with its run dir made (a file podman reads)."""

    async def stop(self, grace: float, hard: bool) -> None:
        """Before the process group is signalled (`hard`: a limit's kill, no grace)."""

    async def ended(self, code: int | None, stopped: bool) -> Limit | None:
        """After the process ended (its exit status, None if lost): what ended it, if
        this launch knows better than the status (an image podman could not run); not
        asked (`stopped`) when the runner stopped it for a reason of its own."""


@dataclass(frozen=True)
class Run:
    """Where and as whom a command task runs: its sandbox (its user's), its run dir (the
    slave's: an image task's exit status), its user (None: the slave's own) and how it
    is confined."""

    sandbox: Path
    run_dir: Path
    user: TaskUser | None = None
    confinement: Confinement = UNCONFINED
    # persistent volumes bound into the sandbox in its mount namespace (slave.volumes)
    binds: Binds = NO_BINDS


class ShellLaunch:
    """The task's command in a shell, in its container (the isolator's cgroup) if any,
    as its user, in a PID namespace of its own where the slave can (slave.confine)."""

    def __init__(
        self, task: TaskInfo, env: dict[str, str], container: Container | None, run: Run
    ) -> None:
        assert task.command is not None
        self.command, self.env, self.container, self.run = task.command, env, container, run
        self.mem: float | None = task.resources.quantities().get("mem")

    @property
    def memory_limit_mb(self) -> float | None:
        return self.mem

    @property
    def exit_file(self) -> Path:
        return self.run.sandbox / SANDBOX_EXIT_FILE

    @property
    def outside_group(self) -> Path | None:
        return None  # (its processes are its group, and its PID namespace's if any)

    def process(self) -> Start:
        # the task's own shell joins its container, not the wrapper around it: the exit
        # status the wrapper writes is not charged to the task's memory, and a task that
        # wrote nothing leaves its memory cgroup empty, removed at once (cgroup_upkeep)
        join, join_env = "", dict[str, str]()
        run = self.run
        if self.container is not None:
            join, join_env = self.container.join()
        return run.confinement.task(
            # (by the wrapper's working directory, its sandbox: where the sandbox's path
            # is out of the user's reach, the exit status still lands)
            self.command.value,
            run.user,
            self.env,
            (join, join_env),
            SANDBOX_EXIT_FILE,
            binds=run.binds,
        )

    async def prepare(self) -> None:
        pass

    async def stop(self, grace: float, hard: bool) -> None:
        pass  # (the process group's signals are all it takes)

    async def ended(self, code: int | None, stopped: bool) -> Limit | None:
        return None


class CommandRunner:
    """A task's shell command as a child process in its own sandbox and process group."""

    def __init__(
        self,
        task: TaskInfo,
        run: Run,
        report: Report,
        env: dict[str, str],
        container: Container | None = None,
        launch: Launch | None = None,
    ):
        assert task.command is not None
        self.task = task
        self.run = run
        self.sandbox = run.sandbox
        self.report = report
        self.container = container  # its cgroup (isolator), destroyed when it ends
        self.launch = launch or ShellLaunch(task, env, container, run)
        self.exit_file = self.launch.exit_file
        self.pid: int | None = None
        self.started_at: str | None = None  # /proc start time, to tell a reused pid apart
        self._stop: Limit | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._deadline: float | None = None  # its SIGKILL's (loop time), once killed
        self._sooner: asyncio.Future[None] | None = None  # a later kill's shorter grace

    @property
    def memory_limit_mb(self) -> float | None:
        return self.launch.memory_limit_mb

    @property
    def outside_group(self) -> Path | None:
        return self.launch.outside_group

    def checkpoint(self) -> dict[str, Any]:
        return {
            "kind": "command",
            "pid": self.pid,
            "started_at": self.started_at,
            "sandbox": str(self.sandbox),
            "exit_file": str(self.exit_file),
            "container": self.container.name if self.container is not None else None,
            # (a slave before the principals' groups named none: its cgroup is flat)
            "cgroup": self.container.cgroup if self.container is not None else None,
        }

    async def start(self) -> None:
        assert self.task.command is not None
        await self.report(TaskState.STARTING, None, "")
        try:
            await self.launch.prepare()
            start = self.launch.process()
            proc = await spawn_in_sandbox(
                start.args,
                self.sandbox,
                start.env,
                owner=self.run.user,
                first=functools.partial(_forget_exit, self.exit_file),
                script=start.script,
                private_tmp=start.private_tmp,
            )
        except (OSError, ValueError) as e:  # (ValueError: NUL in an argument or the env)
            if self.container is not None:
                await self.container.destroy()
            await self.report(
                TaskState.FAILED,
                Reason.COMMAND_EXECUTOR_FAILED,
                f"could not start the command: {e}",
            )
            return
        self.pid = proc.pid
        self.started_at = _start_time(proc.pid)
        await self.report(TaskState.RUNNING, None, f"pid {proc.pid}")
        self._watcher = asyncio.create_task(self._watch(proc))

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        await self._ended(code)

    async def _ended(self, code: int | None) -> None:
        said = await self.launch.ended(code, stopped=self._stop is not None)
        if self._stop is None and said is not None:
            self._stop = said
        if self.container is not None:
            # the kernel's OOM kill is the container's limit, whoever it hit; then all it
            # left (double forks included) dies with its cgroup
            if self._stop is None and (why := await self.container.limitation()):
                self._stop = Limit(TaskState.FAILED, Reason.MEMORY_LIMIT, why)
            await self.container.destroy([self.sandbox])
        if self._stop is not None:
            await self.report(self._stop.state, self._stop.reason, self._stop.message)
        elif code == 0:
            await self.report(TaskState.FINISHED, None, "exited with code 0", exit_code=0)
        elif code is None:
            await self.report(
                TaskState.FAILED,
                Reason.COMMAND_EXECUTOR_FAILED,
                "the task ended while the slave was down; its exit status is lost",
            )
        elif code < 0:
            await self.report(TaskState.FAILED, None, f"killed by signal {-code}")
        else:
            exited = f"exited with code {code}"
            if code > 128 and (name := _signal_name(code - 128)):  # (a shell's code for it)
                exited += f" (128 + {name}: a signal ended its command, or it exited so)"
            await self.report(TaskState.FAILED, None, exited, exit_code=code)

    async def kill(
        self, grace: float, limit: Limit | None = None, *, signalled: bool = False
    ) -> None:
        """SIGTERM to the whole process group, SIGKILL after `grace` seconds. A kill of a
        task already in its grace sends nothing again (its SIGTERM trap would run twice):
        it only brings the SIGKILL forward, if its grace ends sooner (Mesos's executor).
        So does one in its grace when the slave restarted (`signalled`, slave.recovery)."""
        if self._stop is None:
            self._stop = limit or Limit(TaskState.KILLED, Reason.KILLED_BY_FRAMEWORK, "killed")
        pid = self.pid
        if pid is None:
            return
        hard = limit is not None and limit.hard
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (0.0 if hard else grace)
        if self._deadline is not None:  # (in its grace: the first kill's wait ends it)
            if deadline < self._deadline:
                self._deadline = deadline
                if self._sooner is not None and not self._sooner.done():
                    self._sooner.set_result(None)
            return
        self._deadline = deadline
        if not signalled:
            await self.launch.stop(grace, hard=hard)
            _signal_group(pid, signal.SIGKILL if hard else signal.SIGTERM)
        while self._watcher is not None and (left := self._deadline - loop.time()) > 0:
            self._sooner = loop.create_future()
            ended = {self._watcher, self._sooner}
            await asyncio.wait(ended, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if self._watcher.done():
                break
        _signal_group(pid, signal.SIGKILL)  # whatever of the group is left: no orphans
        if self._watcher is not None:  # (its end reported, its container gone, then back)
            await asyncio.wait({self._watcher}, timeout=ENDED_WITHIN)

    async def recover(self, pid: int, started_at: str | None) -> None:
        """Watch a task whose process outlived a slave restart (we are not its parent)."""
        self.pid, self.started_at = pid, started_at
        if still_running(pid, started_at):
            await wait_pid_exit(pid)
        await self._ended(await asyncio.to_thread(read_exit, self.exit_file))

    def recover_in_background(self, pid: int, started_at: str | None) -> None:
        self._watcher = asyncio.create_task(self.recover(pid, started_at))

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher


class SimulatedRunner:
    """A stand-in for an executor: RUNNING at once, FINISHED after the task's duration.

    The duration comes from the task's data (`{"duration": seconds}` as JSON), else from
    a command of the form `sleep N`, else 0. Lets one process hold hundreds of slaves.
    """

    def __init__(self, task: TaskInfo, report: Report, time_scale: float = 1.0) -> None:
        self.task = task
        self.report = report
        self.duration = task_duration(task) * time_scale
        self.ends_at: float | None = None
        self.pid: int | None = None  # (no process: nothing for the slave to watch)
        self.container: Container | None = None
        self._timer: asyncio.Task[None] | None = None
        self._killed = False

    @property
    def memory_limit_mb(self) -> float | None:
        return None  # (nothing runs that could use memory)

    @property
    def outside_group(self) -> Path | None:
        return None

    def checkpoint(self) -> dict[str, Any]:
        return {"kind": "simulated", "ends_at": self.ends_at}

    async def start(self, ends_at: float | None = None) -> None:
        self.ends_at = ends_at if ends_at is not None else time.time() + self.duration
        if ends_at is None:
            await self.report(TaskState.RUNNING, None, "simulated")
        self._timer = asyncio.create_task(self._run())

    async def _run(self) -> None:
        assert self.ends_at is not None
        if (left := self.ends_at - time.time()) > 0:  # (its task runs after `start` anyway)
            await asyncio.sleep(left)
        if not self._killed:
            await self.report(TaskState.FINISHED, None, "simulated task done")

    async def kill(
        self, grace: float, limit: Limit | None = None, *, signalled: bool = False
    ) -> None:
        if self._killed:
            return
        self._killed = True
        if self._timer is not None:
            self._timer.cancel()
        limit = limit or Limit(TaskState.KILLED, Reason.KILLED_BY_FRAMEWORK, "killed")
        await self.report(limit.state, limit.reason, limit.message)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer


_SLEEP = re.compile(r"^\s*sleep\s+([0-9.]+)\s*$")


def task_duration(task: TaskInfo) -> float:
    """A simulated task's seconds: its data's `duration`, else its `sleep N`, else 0.
    The data is a tenant's: what cannot be read so (not JSON, nested past the parser's
    depth, no `duration`) is no duration, never an error out of the slave's launch."""
    if task.data:
        with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError, RecursionError):
            d = json.loads(task.data)
            return max(0.0, float(d["duration"]))
    if task.command is not None and (m := _SLEEP.match(task.command.value)):
        return float(m.group(1))
    return 0.0


# -- process helpers ------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat: with the pid, names one process for good."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def still_running(pid: int, started_at: str | None) -> bool:
    """Whether `pid` is still the process that started at `started_at` (not one that
    reuses its pid)."""
    return started_at is not None and _start_time(pid) == started_at


async def wait_pid_exit(pid: int) -> None:
    """Wait for a process that is not our child to exit (pidfd: no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()

    def exited() -> None:
        if not gone.done():
            gone.set_result(None)

    loop.add_reader(fd, exited)
    try:
        await gone
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_rss_mb(pgids: list[int]) -> dict[int, float]:
    """Resident memory of each process group, in MB (one pass over /proc for all)."""
    return {g: u.memory_bytes / MB for g, u in groups_usage(set(pgids)).items()}


def _forget_exit(path: Path) -> None:
    """A previous run's exit status (of a task id used again) goes before this one."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def new_run_dir(run_dir: Path) -> None:
    """The task's run dir, `runs/<framework>/<task>` in the work dir: the slave's alone
    (its parents too), without a previous run's exit status."""
    for path in (run_dir.parent.parent, run_dir.parent, run_dir):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(run_dir / EXIT_FILE)


def read_exit(path: Path) -> int | None:
    """The exit status a task's wrapper wrote. (An older slave's wrapper wrote it in the
    sandbox, where the task may have put a symlink or a FIFO in its place: such a thing
    is not read.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return int(os.read(fd, 32).decode().strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _signal_name(number: int) -> str | None:
    """SIGKILL for 9, and so on (None: no such signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
