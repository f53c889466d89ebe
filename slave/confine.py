"""How a task's (or a custom executor's) process is started apart from the slave and from
other tenants: as its principal's user, in a PID namespace of its own, in its cgroup.

The chain, each step only where the slave can take it (root; util-linux's `unshare` and
`setpriv`):

    unshare --pid --fork --mount-proc --kill-child --      a PID namespace, its own /proc
      sh -c 'f=$1; shift; (exec "$@"); echo $? > "$f"'     pid 1 there, as root: waits
        setpriv --reuid U --regid G --clear-groups --        the principal's user
          sh -c 'JOIN COMMAND'                               the task, in its cgroup

- The wrapper (pid 1) joins no cgroup, so the exit status it writes is not charged to
  the task's memory. The task's own shell joins it (JOIN, before the command), as its
  user: the cgroup's `tasks` files are delegated to that user (cgroup v1); an exec once
  in the cgroup would leave kernel memory charged there and keep it from being recycled.
  Where the kernel does not allow that (v2), the wrapper's subshell joins as root and
  execs `setpriv`. The wrapper writes the exit status where only the slave reads
  (`exit_file`), never into the sandbox, whose symlinks are the task's.
- The task is one process group with the wrapper (and `unshare`, which blocks SIGTERM):
  a kill's SIGTERM reaches the task, not pid 1 (a namespace's init takes only signals it
  handles), which records how the task ended and exits; the kernel then kills whatever
  is left in the namespace, double forks and new sessions included. SIGKILL after the
  grace ends `unshare`, and `--kill-child` the namespace with it.
- The slave's child, whose pid it checkpoints and a restarted slave watches, is `unshare`
  (or the wrapper, without a namespace).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass

from slave.task_users import TaskUser

# the wrapper: runs the rest (its subshell joins the cgroup first), then writes the exit
# status to its first argument ("$f" is the slave's, outside the sandbox)
WRAPPER = 'f=$1; shift; ({join}exec "$@"); code=$?; echo $code > "$f"; exit $code'


@dataclass(frozen=True)
class Confinement:
    """What this slave can do to keep tasks apart (`probe`), and the argv that does it."""

    users: bool  # tasks run as their principal's user
    pid_namespace: bool
    unshare: str = "unshare"
    setpriv: str = "setpriv"

    def task(
        self, command: str, user: TaskUser | None, join: str, exit_file: str, *, root_joins: bool
    ) -> list[str]:
        """A command task's argv: the wrapper that records its exit status, confined. The
        task's own shell joins its cgroup (`join`) unless it may not (`root_joins`: the
        cgroup is not delegated to its user); then the wrapper's subshell does, as root."""
        first, then = (join, "") if root_joins and self._switches(user) else ("", join)
        shell = self._as(user, ["/bin/sh", "-c", then + command])
        return self._namespaced(self.wrap(shell, exit_file, first))

    @staticmethod
    def wrap(args: list[str], exit_file: str, join: str = "") -> list[str]:
        """`args` under the wrapper that writes their exit status to `exit_file`."""
        script = WRAPPER.format(join=join)
        return ["/bin/sh", "-c", script, "drfmesos-task", exit_file, *args]

    def executor(
        self, command: str, user: TaskUser | None, join: str, *, root_joins: bool
    ) -> list[str]:
        """A custom executor's argv (its exit status is its process's own), its shell
        joining its cgroup as `task` says."""
        first, then = (join, "") if root_joins and self._switches(user) else ("", join)
        run = self._as(user, ["/bin/sh", "-c", then + "exec " + command])
        if self.pid_namespace:  # pid 1 waits for it (init would not take its SIGTERM)
            return self._namespaced(["/bin/sh", "-c", f'({first}exec "$@")', "drfmesos-exec", *run])
        if first:
            return ["/bin/sh", "-c", first + 'exec "$@"', "drfmesos-exec", *run]
        return run

    def _switches(self, user: TaskUser | None) -> bool:
        return user is not None and self.users

    def _as(self, user: TaskUser | None, args: list[str]) -> list[str]:
        if user is None or not self.users:
            return args
        groups = "--init-groups" if user.account else "--clear-groups"
        ids = ["--reuid", str(user.uid), "--regid", str(user.gid), groups]
        return [self.setpriv, *ids, "--", *args]

    def _namespaced(self, args: list[str]) -> list[str]:
        if not self.pid_namespace:
            return args
        return [self.unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "--", *args]

    def not_enforced(self) -> str | None:
        """What a tenant's task can still reach here, for the slave's start line (None:
        it runs as a user of its own, in a PID namespace of its own)."""
        gaps = []
        if not self.users:
            gaps.append(
                "tasks run as the slave's own user: a task can read every other task's "
                "sandbox and environment (/proc/PID/environ), the slave's work dir and "
                "journals, and signal every other task and the slave itself"
            )
        if not self.pid_namespace:
            gaps.append("tasks share the host's PID namespace: a task sees every process")
        return "; ".join(gaps) or None


UNCONFINED = Confinement(users=False, pid_namespace=False)  # (a slave before its start)


def probe(switch_user: bool, pid_namespace: bool) -> tuple[Confinement, list[str]]:
    """The confinement this host allows of what was asked, and why each part asked for
    is off (blocking: it runs `unshare` once; call it in a thread)."""
    why: list[str] = []
    root = os.geteuid() == 0
    unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
    users = switch_user and root and setpriv is not None
    if switch_user and not users:
        why.append("not root: tasks cannot run as other users" if not root else "no setpriv")
    pidns = pid_namespace and root and unshare is not None and _unshares(unshare)
    if pid_namespace and not pidns:
        why.append(
            "not root: no PID namespace" if not root else "unshare --pid --mount-proc failed"
        )
    confinement = Confinement(users, pidns, unshare or "unshare", setpriv or "setpriv")
    return confinement, why


def _unshares(unshare: str) -> bool:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "--", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
        return done.returncode == 0
    return False
