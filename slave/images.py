"""Command tasks that run in a container image (`TaskInfo.container.image`), with podman.

The task's process is `podman run` in the foreground, as a command task's shell is, so
its status, its exit status file and a restarted slave's recovery are the command
task's. What differs:

- the container (and podman's conmon) goes under the task's own cgroup
  (`--cgroup-parent`), so the isolator's limits and accounting hold it as they hold a
  command task; the podman client itself (some 36 MB) stays outside, so it is not
  charged to the task. Under posix isolation podman limits the container itself
  (`--memory`, `--cpus`);
- the sandbox is mounted at /mnt/mesos/sandbox, the working directory and
  `$MESOS_SANDBOX` inside; the container's stdout and stderr are the sandbox's files
  (podman's passthrough log driver: they reach the files even if podman dies);
- a kill is `podman stop` (SIGTERM, SIGKILL after the grace), and the container is
  removed when its task ends;
- the container runs as the task's user (`--user`) on a slave that switches users, in
  podman's own PID namespace; podman itself (root) runs with the slave's environment, and
  the task's variables reach the container through a file only the slave reads
  (`--env-file`): none of them (`LD_PRELOAD`, `CONTAINERS_CONF`) reaches podman;
- its persistent volumes are bound at their places in the sandbox by podman (`-v`),
  not by the task's first shell;
- nothing is pulled: the image must be on the slave already.

Podman is a soft dependency: a slave without it refuses image tasks (TASK_ERROR).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
from pathlib import Path

from protocol import logs
from protocol.transport.aio import within
from protocol.wire.messages import Reason, TaskInfo, TaskState
from slave.confine import Start
from slave.isolator import Container, podman_name
from slave.runners import EXIT_FILE, CommandRunner, Limit, Report, Run, new_run_dir

SANDBOX = "/mnt/mesos/sandbox"  # where the sandbox is inside the container, as in Mesos
PODMAN_FAILED = 125  # podman's own exit status when it could not run the container
KILLED = 128 + 9  # podman's exit status for a container killed by SIGKILL
# podman's status when the container ended and it could not learn how ("Cannot get exit
# code"): seen when the kernel killed the container at its limit beside a busy host
EXIT_LOST = 127
PODMAN_CALL_TIMEOUT = 30.0  # seconds a `podman stop` or `rm` may take beyond the grace


def find_podman(name: str) -> str | None:
    """podman's path, or None when this slave cannot run images."""
    return shutil.which(name)


def image_problem_here(task: TaskInfo, podman: str | None, sandbox: str) -> str | None:
    """Why this slave cannot run `task`'s image in `sandbox`, or None (a task without
    one: None)."""
    if task.container is None:
        return None
    if podman is None:
        return (
            f"this slave cannot run container images (podman is not installed): "
            f"task {task.task_id} names image {task.container.image}"
        )
    if ":" in sandbox or "," in sandbox:  # podman's volume syntax splits on them
        return f"a task with an image may not have ':' or ',' in its sandbox's path: {sandbox}"
    assert task.command is not None
    for name, value in task.command.environment.items():
        if "\n" in name or "\n" in value:  # (one variable a line in podman's --env-file)
            return f"an image task's environment may not hold a newline ({name})"
    return None


class ImageLaunch:
    """A command task's launch in its container image: `podman run` in the foreground."""

    def __init__(
        self,
        task: TaskInfo,
        run: Run,
        env: dict[str, str],
        container: Container | None,
        podman: str,
        slave_id: str,
        framework_id: str,
    ) -> None:
        assert task.command is not None
        assert task.container is not None
        self.task, self.run, self.env, self.container = task, run, env, container
        self.sandbox = run.sandbox
        self.image = task.container.image
        self.podman = podman
        # podman's names: [a-zA-Z0-9][a-zA-Z0-9_.-]*; podman_name keeps to that
        self.name = podman_name(slave_id, framework_id, task.task_id)
        self.framework_id = framework_id
        self.env_file = run.run_dir / "env"
        self.exit_file = run.run_dir / EXIT_FILE  # (podman's wrapper is root's)
        # the container's pid, as podman writes it (the slave's run dir: no task's)
        self.outside_group: Path | None = run.run_dir / "container.pid"

    @property
    def memory_limit_mb(self) -> None:
        return None  # the kernel holds the container to it (its cgroup, or podman's)

    async def prepare(self) -> None:
        """The container's environment, in a file of the slave's: the values never
        travel on a command line that `ps` shows, nor in podman's own environment."""
        own = self.task.command.environment if self.task.command is not None else {}
        env = {**self.env, "MESOS_SANDBOX": SANDBOX}
        if "HOME" not in own:
            env["HOME"] = SANDBOX
        if "PATH" not in own:
            env.pop("PATH", None)  # (the image's own)
        if "TMPDIR" not in own:
            env.pop("TMPDIR", None)  # (the container's /tmp is its own)
        lines = "".join(f"{name}={value}\n" for name, value in sorted(env.items()))
        await asyncio.to_thread(_write_private, self.run.run_dir, self.env_file, lines)

    def process(self) -> Start:
        assert self.task.command is not None
        global_options, limits = self.limits()
        user = self.run.user if self.run.confinement.users else None
        run = [
            self.podman,
            *global_options,
            "run",
            *limits,
            "--rm",
            "--pull=never",
            "--name",
            self.name,
            "--network=host",  # the slave's network, as a command task has
            "--log-driver=passthrough",
            f"--pidfile={self.outside_group}",  # (its PID namespace: the ports isolator's)
            "-v",
            f"{self.sandbox}:{SANDBOX}",
            *self.volumes(),
            "-w",
            SANDBOX,
            "--umask=0077",  # (as a command task's)
            "--env-file",
            str(self.env_file),
            *(["--user", f"{user.uid}:{user.gid}"] if user is not None else []),
            # (as a command task: nothing in the container gains privileges by exec)
            *(["--security-opt=no-new-privileges"] if self.run.confinement.no_new_privs else []),
            "--entrypoint",
            '["/bin/sh", "-c"]',
            "--",  # what follows is never an option (the image was checked besides)
            self.image,
            self.task.command.value,
        ]
        # the same wrapper as a command task's (its exit status lands in its run dir);
        # podman runs as the slave, in the slave's environment (the operator's: its
        # storage and its configuration), the task's in the container alone
        wrapped = self.run.confinement.wrap(run, str(self.exit_file))
        return Start(wrapped, dict(os.environ))

    def volumes(self) -> list[str]:
        """Its persistent volumes, bound by podman at their places under the sandbox's
        mount (slave.volumes made them, and the places, its user's). The runtime
        resolves a place inside the container's root: a symlink a task of the same user
        swapped in on the way sends the bind elsewhere in the container, never out of it."""
        real = os.path.realpath(self.sandbox)
        options = []
        for source, target in self.run.binds.mounts:
            options += ["-v", f"{source}:{SANDBOX}/{os.path.relpath(target, real)}"]
        return options

    def limits(self) -> tuple[list[str], list[str]]:
        """podman's global and `run` options that hold the container to the task's
        resources: the task's cgroup as its parent, or podman's own limits."""
        if self.container is not None and self.container.cgroup is not None:
            return ["--cgroup-manager=cgroupfs"], [f"--cgroup-parent=/{self.container.cgroup}"]
        options = []
        amounts = self.task.resources.quantities()
        if (cpus := amounts.get("cpus")) is not None:
            options.append(f"--cpus={cpus:g}")
        if (mem := amounts.get("mem")) is not None:
            options += [f"--memory={int(mem)}m", f"--memory-swap={int(mem)}m"]
        return [], options

    async def stop(self, grace: float, hard: bool) -> None:
        """`podman stop`: SIGTERM, SIGKILL after the grace (at once for a limit's kill);
        the runner then signals podman itself, if it is still there."""
        seconds = 0 if hard else math.ceil(grace)
        await self._podman("stop", "--ignore", "-t", str(seconds), self.name, wait=grace)

    async def ended(self, code: int | None, stopped: bool) -> Limit | None:
        # gone with --rm unless podman itself was killed: then it is removed here
        await self._podman("rm", "--force", "--ignore", self.name)
        if stopped:
            return None
        if code in (KILLED, EXIT_LOST) and (why := self._out_of_memory()):
            return Limit(TaskState.FAILED, Reason.MEMORY_LIMIT, why)
        if code == PODMAN_FAILED:
            why = await asyncio.to_thread(_last_line, self.sandbox / "stderr")
            return Limit(
                TaskState.FAILED,
                Reason.CONTAINER_LAUNCH_FAILED,
                f"podman could not run image {self.image}: {why}",
            )
        return None

    def _out_of_memory(self) -> str | None:
        """Why the kernel killed the container, if it was at its memory limit. (The
        kernel counts an OOM kill in the victim's cgroup, the container's, which runc
        removes as the container exits: the task's cgroup above it only shows its peak
        at its limit. A container SIGKILLed at its limit is taken as OOM-killed.)"""
        return self.container.peaked_at_limit() if self.container is not None else None

    async def _podman(self, *args: str, wait: float = 0.0) -> str:
        """Run `podman ARGS`: its stdout (its errors go to the log). It may take `wait`
        + 30 s."""
        proc = await asyncio.create_subprocess_exec(
            self.podman,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await within(proc.communicate(), wait + PODMAN_CALL_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            out, err = b"", b"timed out"
        if proc.returncode != 0:
            logs.get("slave").warning(
                "image.podman_failed",
                framework_id=self.framework_id,
                task_id=self.task.task_id,
                command=args[0],
                error=err.decode(errors="replace")[-400:],
            )
        return out.decode(errors="replace")


def command_runner(
    task: TaskInfo,
    run: Run,
    report: Report,
    env: dict[str, str],
    container: Container | None,
    podman: str | None,
    slave_id: str,
    framework_id: str,
) -> CommandRunner:
    """The runner of a command task: in its image when it names one."""
    if task.container is None:
        return CommandRunner(task, run, report, env, container)
    assert podman is not None  # (refused at admission otherwise)
    launch = ImageLaunch(task, run, env, container, podman, slave_id, framework_id)
    return CommandRunner(task, run, report, env, container, launch)


def _write_private(run_dir: Path, path: Path, text: str) -> None:
    new_run_dir(run_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return "(no stderr)"
    return lines[-1][:400] if lines else "(no stderr)"
