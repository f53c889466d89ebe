"""How a task's (or a custom executor's) process is started apart from the slave and from
other tenants: as its principal's user, in a PID namespace of its own, in its cgroup.

The chain, each step only where the slave can take it (root; util-linux's `unshare`):

    unshare --pid --fork --mount-proc --kill-child       a PID namespace, its own /proc,
            --setgid G --setuid U --                     as the principal's user
      sh -c '(exec "$@"); echo $? > "$f"' ...            pid 1 there: waits, records
        sh -c 'JOIN COMMAND'                             the task, in its cgroup

- One exec more than a task ran with before (`unshare`): the wrapper and the task's own
  shell (`sh -c`, its `$$` its own) are as they were.
- The task's shell joins its cgroup itself (JOIN, as its user: the cgroup's `tasks`
  files are delegated to that user, cgroup v1) before it runs anything, and execs
  nothing once in it for a shell builtin (an exec in a v1 memory cgroup leaves kernel
  memory charged to it, which keeps it from being recycled). The wrapper stays out, so
  the exit status it writes is not charged to the task. Where the kernel does not let
  the user join (v2), root joins first and the whole chain runs in the cgroup.
- A task's kill: SIGTERM to the process group reaches the task, not pid 1 (a
  namespace's init takes only the signals it handles) nor `unshare` (it blocks it); pid
  1 records how the task ended and exits, and the kernel kills whatever is left in the
  namespace, new sessions included. SIGKILL after the grace ends `unshare`, and
  `--kill-child` the namespace with it.
- The slave's child, whose pid it checkpoints and a restarted slave watches, is
  `unshare` (or the wrapper, without a namespace or a user to switch to).
- An account the operator named (`--task-users`) runs with its supplementary groups:
  `setpriv --init-groups` drops to it, in place of unshare's `--setuid`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass

from slave.task_users import TaskUser

# the wrapper: runs the rest in a subshell (a fork), then writes its exit status to "$1".
# It outlives the SIGTERM of a kill (a trap: the subshell, and so the task, still takes
# SIGTERM's default), so that the slave waits the task's grace on it, not on nothing.
WRAPPER = 'trap : TERM; (shift; exec "$@"); code=$?; echo $code > "$1"; exit $code'


@dataclass(frozen=True)
class Confinement:
    """What this slave can do to keep tasks apart (`probe`), and the argv that does it."""

    users: bool  # tasks run as their principal's user
    pid_namespace: bool
    unshare: str = "unshare"
    setpriv: str = "setpriv"

    def switches(self, user: TaskUser | None) -> bool:
        """Whether a process for `user` runs as that user (the wrapper too)."""
        return user is not None and self.users

    def task(
        self, command: str, user: TaskUser | None, join: str, exit_file: str, *, root_joins: bool
    ) -> list[str]:
        """A command task's argv: the wrapper that records its exit status (`exit_file`,
        the task's user's to write where it switches), confined. The task's subshell
        joins its cgroup (`join`) unless it may not (`root_joins`)."""
        first, then = (join, "") if root_joins and self.switches(user) else ("", join)
        shell = ["/bin/sh", "-c", then + command]
        return self._root_first(first, self._confined(user, self.wrap(shell, exit_file)))

    def executor(
        self, command: str, user: TaskUser | None, join: str, *, root_joins: bool
    ) -> list[str]:
        """A custom executor's argv (its exit status is its process's own), joining its
        cgroup as `task` does. In a namespace a shell waits for it as pid 1 (init would
        not take the SIGTERM that shuts it down)."""
        first, then = (join, "") if root_joins and self.switches(user) else ("", join)
        script = then + "exec " + command
        if self.pid_namespace:
            script = f"({script})"
        return self._root_first(first, self._confined(user, ["/bin/sh", "-c", script]))

    @staticmethod
    def wrap(args: list[str], exit_file: str) -> list[str]:
        """`args` under the wrapper that writes their exit status to `exit_file` (not
        confined: an image task's podman, root's, wraps so, confining the container)."""
        return ["/bin/sh", "-c", WRAPPER, "drfmesos-task", exit_file, *args]

    def _confined(self, user: TaskUser | None, args: list[str]) -> list[str]:
        prefix: list[str] = []
        if self.pid_namespace:
            prefix = [self.unshare, "--pid", "--fork", "--mount-proc", "--kill-child"]
        if self.switches(user):
            assert user is not None
            if user.account is not None:  # (its groups: setpriv drops to it)
                ids = ["--reuid", str(user.uid), "--regid", str(user.gid), "--init-groups"]
                args = [self.setpriv, *ids, "--", *args]
            else:
                prefix = prefix or [self.unshare]
                prefix += ["--setgid", str(user.gid), "--setuid", str(user.uid)]
        return [*prefix, "--", *args] if prefix else args

    @staticmethod
    def _root_first(join: str, args: list[str]) -> list[str]:
        """Root joins the cgroup, then the rest runs in it (cgroup v2's way)."""
        return ["/bin/sh", "-c", join + 'exec "$@"', "drfmesos-join", *args] if join else args

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
    users = switch_user and root and unshare is not None and setpriv is not None
    if switch_user and not users:
        why.append(
            "not root: tasks cannot run as other users" if not root else "no unshare or setpriv"
        )
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
