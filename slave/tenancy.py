"""How a slave keeps its tenants apart, decided once at its start: what the host allows of
what the operator asked (slave.confine), the user each principal's tasks run as
(slave.task_users), and a work dir that tasks may pass through but not read.

A slave that cannot confine its tasks (not root, no `unshare`) says so at its start, in
one line at the default level, as it says what posix isolation does not enforce.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slave.confine import Confinement, probe
from slave.sandbox import PASSABLE, PRIVATE
from slave.task_accounts import ACCOUNTS_DIR, with_accounts, with_name
from slave.task_users import TaskUser, TaskUsers, UidMap

WORK_DIR_FILES = 0o600  # its journals, its id, its executor key: the slave's alone
UNREACHABLE = {  # what fails when tasks' users cannot reach these, and what to do
    "python": {
        "fails": "Mesos executors (the adapter runs in $DRFMESOS_PYTHON) and Python "
        "executors started with it, as task users",
        "fix": "--task-env DRFMESOS_PYTHON=<a python all users may run, with drfmesos>",
    },
    "work_dir": {
        "fails": "a task reaching its sandbox by its path ($MESOS_SANDBOX; its working "
        "directory still works)",
        "fix": "a --work-dir whose parents all may pass (chmod o+x), as /var/lib",
    },
}


class Tenancy:
    def __init__(self, confinement: Confinement, users: TaskUsers | None) -> None:
        self.confinement = confinement
        self.users = users if confinement.users else None

    async def user_for(self, principal: str) -> TaskUser | None:
        """The user a principal's tasks run as (None: the slave's own). The first look
        at a principal may write the machine's uid map: off the loop."""
        if self.users is None:
            return None
        return self.users.known(principal) or await asyncio.to_thread(self.users.look_up, principal)


@functools.cache
def _probed(
    switch_user: bool, pid_namespace: bool, work_dir: Path, setuid_programs: bool
) -> tuple[Confinement, tuple[str, ...]]:
    confinement, why = probe(switch_user, pid_namespace, work_dir, setuid_programs)
    return confinement, tuple(why)  # (once a process: a fleet's slaves share the answer)


async def start_tenancy(config: Any, log: Any) -> Tenancy:
    """Decide how tasks are confined and say at the default level what is not enforced;
    close the work dir to tasks (`config`: the slave's SlaveConfig)."""
    confinement, off = await asyncio.to_thread(
        _probed,
        config.switch_user,
        config.pid_namespace,
        Path(config.work_dir),
        config.setuid_programs,
    )
    users = None
    if confinement.users:
        uid_map = UidMap.at(config.task_uid_map, config.task_uids)
        # a user no account has is named in its tasks' own /etc/passwd, which needs their
        # mount namespace (the PID namespace's) to be bound in; without one, in $USER and
        # $LOGNAME alone
        accounts: Callable[[str, TaskUser], TaskUser] = with_name
        if confinement.pid_namespace:
            accounts = functools.partial(with_accounts, Path(config.work_dir) / ACCOUNTS_DIR)
        users = TaskUsers(uid_map, config.task_users, config.cluster, accounts)
        await asyncio.to_thread(close_work_dir, config.work_dir)
        python = config.task_env.get("DRFMESOS_PYTHON", sys.executable)
        problems = await asyncio.to_thread(_reach_problems, python, config.work_dir)
        for what, (path, blocked) in problems.items():
            log.warning(
                f"isolation.{what}_unreachable", path=path, why=blocked, **UNREACHABLE[what]
            )
        if off_links := await asyncio.to_thread(unprotected_links):
            log.warning(
                "isolation.links_unprotected",
                sysctls=off_links,
                why="a tenant's task may plant a link in /tmp or /dev/shm (shared by every "
                "task) that another tenant's task, or a root process, then follows",
                fix="sysctl " + " ".join(f"{name}=1" for name in off_links),
            )
    gaps = confinement.not_enforced()
    if gaps is not None and not config.simulated_tasks:
        log.warning(
            "isolation.tenants",
            what_is_not_enforced=gaps,
            why="; ".join(off) or "turned off (--no-switch-user, --no-pid-namespace)",
        )
    elif gaps is None:
        log.info("isolation.tenants", enforced="a user and a PID namespace a task")
    return Tenancy(confinement, users)


PROTECTED_LINKS = ("fs.protected_symlinks", "fs.protected_hardlinks")


def unprotected_links(proc: Path = Path("/proc/sys")) -> list[str]:
    """The kernel's link protections that are off on this host (blocking: it reads
    /proc/sys)."""
    off = []
    for name in PROTECTED_LINKS:
        with contextlib.suppress(OSError, ValueError):
            if int((proc / name.replace(".", "/")).read_text()) == 0:
                off.append(name)
    return off


def unreachable_by_others(path: Path) -> str | None:
    """Why a user other than its owner cannot reach `path` (a directory above it they may
    not pass), or None. (Blocking: it stats each directory.)"""
    for parent in [*reversed(path.parents)]:
        with contextlib.suppress(OSError):
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                return f"{parent} is mode {mode & 0o777:o}"
    return None


def python_problem(python: str) -> str | None:
    """Why tasks running as other users cannot run the Python the slave names for them
    (`DRFMESOS_PYTHON`: the Mesos executor adapter's), or None."""
    real = Path(os.path.realpath(python))
    for path in (Path(python), real, Path(sys.prefix)):
        if (why := unreachable_by_others(path / "x")) is not None:
            if path == real and real != Path(python):  # (a venv's link: say where it leads)
                return f"{why}, on the way to {real}, where {python} leads"
            if path != Path(python) and path != real:
                return f"{why}, on the way to its prefix {path}"
            return why
    return None


def close_work_dir(work_dir: Path) -> None:
    """Tasks pass through the work dir to their sandboxes (0711: no listing) and read
    nothing the slave keeps there (its files 0600). Sandboxes a slave before #45 left
    (0755, readable by all: their tasks ran as the slave) are closed once (0700, their
    owner kept: a task it recovers still writes there); the sandboxes dir's mode says
    it was done. (Blocking: in a thread.)"""
    work_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(work_dir, PASSABLE)
    for entry in os.scandir(work_dir):
        if entry.is_file(follow_symlinks=False):
            os.chmod(entry.path, WORK_DIR_FILES)
        elif entry.is_dir(follow_symlinks=False) and entry.name not in ("sandboxes",):
            os.chmod(entry.path, PRIVATE)  # (runs/, ...: the slave's)
    sandboxes = work_dir / "sandboxes"
    if not sandboxes.is_dir() or (sandboxes.stat().st_mode & 0o7777) == PASSABLE:
        return
    for framework in os.scandir(sandboxes):
        if framework.is_dir(follow_symlinks=False):
            os.chmod(framework.path, PASSABLE)
            for sandbox in os.scandir(framework.path):
                if sandbox.is_dir(follow_symlinks=False):
                    os.chmod(sandbox.path, PRIVATE)
    os.chmod(sandboxes, PASSABLE)


def _reach_problems(python: str, work_dir: Path) -> dict[str, tuple[str, str]]:
    """What of the slave's tasks' users cannot reach: {what: (its path, why)}."""
    found = {"python": (python, python_problem(python))}
    found["work_dir"] = (str(work_dir), unreachable_by_others(work_dir / "x"))
    return {what: (path, why) for what, (path, why) in found.items() if why is not None}
