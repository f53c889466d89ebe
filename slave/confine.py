"""How a task's (or a custom executor's) process is started apart from the slave and from
other tenants: as its principal's user, in PID and IPC namespaces of its own, in its
cgroup, with its environment set only once it runs as its user.

The chain, each step only where the slave can take it (root; util-linux's `unshare`):

    sh -c 'JOIN exec "$@"'                                   root joins its cgroup
    unshare --pid --fork --mount-proc --ipc --kill-child    PID, IPC and mount
      sh -c 'mount tmpfs /dev/shm; mount --bind              namespaces, its own /proc,
             SANDBOX/tmp /tmp (and /var/tmp) && exec "$@"'    /dev/shm and /tmp (root's)
      setpriv --reuid U --regid G --clear-groups --          its user
      sh -s EXIT sh -c COMMAND   < script                    pid 1 there: its umask and
                                                             environment, then waits
        sh -c COMMAND                                        the task

  (without a PID namespace: `unshare --setgid G --setuid U -- sh -s ...`; without a
  user to switch to, the task's shell joins: `sh -c 'JOIN COMMAND'`)

The slave's child (spawn_in_sandbox) joins a session keyring of its own and takes a
tenant's open-file limit before its exec (slave.sandbox._as_tenant).

- Nothing of the task's environment reaches a process that runs as root: `unshare` (and
  `setpriv`, and root's `sh` where root joins the cgroup) start with a fixed minimal
  environment (task_env.ROOT_ENV), so the loader never runs a tenant's `LD_PRELOAD` or
  `LD_AUDIT` library as root. The first shell, already the task's user, reads its script
  on its stdin (`task_env.start_script`: `umask 077`, the task's variables exported, then
  the wrapper), from a memory file: no value shows on a command line, no exec is added.
- Three execs more than a task ran with before #45 (`unshare`, root's `sh`, `setpriv`)
  and a `mount`: the wrapper and the task's own shell (`sh -c`, its `$$` its own) are as
  they were.
- Where the task runs as a user of its own, root joins its cgroup first (JOIN, before
  `unshare`), and the whole chain runs in it, the wrapper (pid 1 of the task's PID
  namespace) included: the wrapper is the task's user's, so the task may ptrace it (no
  Yama on every host) and have it start what it likes; outside the cgroup, that ran
  outside every bound (review 79). Its exit status file is charged to the task, and
  the chain's execs leave kernel memory charged to a v1 memory cgroup, which keeps it
  from being recycled. Without a user switch (the task is the slave's user) the task's
  shell joins itself (JOIN, its first step), and the wrapper stays out.
- A task's kill: SIGTERM to the process group reaches the task, not pid 1 (a
  namespace's init takes only the signals it handles) nor `unshare` (it blocks it); pid
  1 records how the task's shell ended, waits for the rest of the task (a program under
  that shell may trap SIGTERM: its grace), and exits; the kernel kills whatever is left
  in the namespace, new sessions included. SIGKILL after the grace ends `unshare`, and
  `--kill-child` the namespace with it.
- The slave's child, whose pid it checkpoints and a restarted slave watches, is
  `unshare` (or the wrapper, without a namespace or a user to switch to).
- An account the operator named (`--task-users`) runs with its supplementary groups
  (`setpriv --init-groups`); a user the slave made, with none (`--clear-groups`).
- A custom executor's command runs as Mesos runs it, `sh -c COMMAND` (so `echo ...;
  exec python ...` is one command), after the same first shell.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from slave.keyrings import KEYCTL
from slave.task_env import ROOT_ENV, start_script
from slave.task_users import TaskUser

# the wrapper: runs the rest in a subshell (a fork), then writes its exit status to "$1".
# It outlives the SIGTERM of a kill (a trap: the subshell, and so the task, still takes
# SIGTERM's default), so that the slave waits the task's grace on it, not on nothing.
# Its own stderr is /dev/null (the task's is fd 3 until its exec): a shell says
# "Terminated" of a child a signal ended, and that is the wrapper's noise, not the task's.
_WRAP = (
    'exec 3>&2 2>/dev/null; k=; trap k=1 TERM; (shift; exec "$@" </dev/null 2>&3 3>&-);'
    ' code=$?; echo "$code" > "$1";'
)
# ... and, killed, it waits for the rest of the task (then the slave's SIGKILL at the
# end of the grace), not only for its shell: dash does not replace itself by its last
# command, so a task's shell stays between the wrapper and a program (or a nested `sh
# -c`) that traps SIGTERM, and dies of the SIGTERM that starts the program's grace. The
# rest: each live process of its group (`[ "$3" = $$ ]`: it leads the group), or, pid 1
# of the task's PID namespace (whose end kills all in it), each but itself there. Read
# from /proc with builtins only, ten times a second, in the grace alone; /bin/sleep by
# its path, never the task's PATH (a `sleep` of the task's would run as the wrapper).
_REST = (
    ' [ -z "$k" ] || while r=; for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] ||'
    ' { read -r s < "$p/stat" && s=${s##*) } && set -- $s && [ "$1" != Z ] && OURS'
    ' && r=1 && break; }; done; [ -n "$r" ]; do /bin/sleep 0.1; done;'
)
_EXIT = ' exit "$code"\n'
WRAPPER = _WRAP + _EXIT  # (an image's: podman, root's, stops its container itself)
TASK_WRAPPER = _WRAP + _REST.replace("OURS", '[ "$3" = $$ ]') + _EXIT
TASK_WRAPPER_IN_NAMESPACE = _WRAP + _REST.replace("OURS", ":") + _EXIT
# an executor's first shell: in a PID namespace, pid 1, it waits for the executor (init
# would not take the SIGTERM that shuts it down); else it becomes the executor
EXECUTOR_IN_NAMESPACE = '(exec "$@" </dev/null); exit "$?"\n'
EXECUTOR = 'exec "$@" </dev/null\n'
# root's first steps in the task's namespaces, before it drops to the task's user: a
# /dev/shm of its own (POSIX shared memory and semaphores are files there; the host's is
# every tenant's), 64 MiB as Docker gives a container, in memory charged to its cgroup;
# and a /tmp and /var/tmp of its own, its sandbox's `tmp` and `var-tmp` bound there (as
# Mesos's filesystem/linux isolator and systemd's PrivateTmp do), so that no tenant reads
# or plants a file in another's /tmp or the slave's (nor in /run/lock, below). The mounts
# stay in the task's mount namespace (unshare makes mounts private): the slave's /tmp is
# untouched. They are locked to the task: a user namespace it makes cannot unmount them
# to see the host's beneath (the kernel locks the mounts a less privileged namespace
# inherits). Not where the slave's work dir is under /tmp or /var/tmp: the task's own
# /tmp would hide its sandbox from it (`probe` says so). It runs in the sandbox, which
# the slave keeps root's until then (sandbox.hold_for_private_tmp): no process of the
# task's user can swap `tmp` for a symlink between the slave's check and the bind (root
# would bind what the user may not reach by path); it hands the sandbox to its user
# ($DRFMESOS_SANDBOX_OWNER, uid:gid) once bound.
PRIVATE_SHM = "mount -n -t tmpfs -o nosuid,nodev,noexec,mode=1777,size=64m drfmesos-shm /dev/shm"
# /run/lock too, the host's other directory every user may write (1777): a tmpfs of its
# own (lock files are small), where the host has one
PRIVATE_LOCK = (
    "{ [ ! -d /run/lock ] || "
    "mount -n -t tmpfs -o nosuid,nodev,noexec,mode=1777,size=1m drfmesos-lock /run/lock; }"
)
PRIVATE_TMP = ("tmp", "var-tmp")  # in its sandbox: its /tmp and /var/tmp
HOST_TMP = (Path("/tmp"), Path("/var/tmp"))
_TMP_BINDS = (
    "mount -n --bind -o nosuid,nodev tmp /tmp && mount -n --bind -o nosuid,nodev var-tmp /var/tmp"
)
# ... and, where a task has persistent volumes, each bound at its place in the sandbox
# (slave.volumes), their paths as arguments (SOURCE TARGET ... -- WAY ... --), never in
# the script. Only in a held sandbox, with the directories on the way root's too
# (Binds): no process of the user can swap a place, or a directory on its way, for a
# symlink between this check and the bind, which would have root mount the volume over
# /etc or a directory on its PATH in the task's namespace. A place whose real path is
# not itself (a symlink on its way since the slave made it) is refused. Then the way is
# handed back to the task's user, deepest first.
_VOLUME_BINDS = (
    # the way first: each a directory of root's, no link (it was made so; what is not was
    # swapped in by the task's user before the sandbox was held, and nothing of the user's
    # can change a directory of root's in a held sandbox): then the places cannot move
    'w=0; for a in "$@"; do if [ "$a" = -- ]; then w=$((w + 1)); [ "$w" = 2 ] && break;'
    ' elif [ "$w" = 1 ]; then { [ -d "$a" ] && [ ! -L "$a" ] &&'
    ' [ "$(stat -c %u -- "$a")" = 0 ]; } || exit 125; fi; done &&'
    ' while [ "$1" != -- ]; do { [ -d "$2" ] && [ "$(realpath -e -- "$2")" = "$2" ]; } || exit 125;'
    ' mount -n --bind -o nosuid,nodev -- "$1" "$2" || exit 125; shift 2; done && shift &&'
    ' while [ "$1" != -- ]; do chown -h -- "$DRFMESOS_SANDBOX_OWNER" "$1" || exit 125; shift;'
    " done && shift"
)
Mount = tuple[str, str]  # (a volume's directory, where it goes in the sandbox)


@dataclass(frozen=True)
class Binds:
    """What a task's first shell, root's, binds in its mount namespace, and the
    directories on the way to the places, root's until it hands them back to the task's
    user (deepest first: one handed back before one below it would let the user swap
    that one's way before root's chown)."""

    mounts: tuple[Mount, ...] = ()  # real paths
    way: tuple[str, ...] = ()

    def args(self) -> list[str]:
        """The first shell's arguments before the task's: SOURCE TARGET ... -- WAY ... --."""
        if not self.mounts:
            return []
        return [*(path for mount in self.mounts for path in mount), "--", *self.way, "--"]


_HAND_BACK = (
    '{ [ -z "$DRFMESOS_SANDBOX_OWNER" ] || chown -- "$DRFMESOS_SANDBOX_OWNER" .; }'
    " && unset DRFMESOS_SANDBOX_OWNER"
)


# ... and, for a user no account has, its copies of /etc/passwd and /etc/group, each with
# its line (slave.task_accounts), the first two arguments: its tasks are told who they are
_ACCOUNT_BINDS = (
    'mount -n --bind -- "$1" /etc/passwd && mount -n --bind -- "$2" /etc/group && shift 2'
)


def mounts_script(private_tmp: bool, volumes: bool, accounts: bool = False) -> str:
    """Root's script in the task's namespaces: its /dev/shm (and, if `accounts`, its
    user's account files, the first two arguments; if `private_tmp`, its /run/lock, /tmp
    and /var/tmp, and its volumes if `volumes`: their paths the next arguments, up to
    `--`; the sandbox then handed to its user), then the task's command (the rest of its
    arguments)."""
    steps = [PRIVATE_SHM]
    if accounts:
        steps.append(_ACCOUNT_BINDS)
    if private_tmp:
        steps += [PRIVATE_LOCK, _TMP_BINDS]
    if volumes:
        steps.append(_VOLUME_BINDS)
    if private_tmp or volumes:
        steps.append(_HAND_BACK)
    return " && ".join(steps) + ' && exec "$@"'


PRIVATE_MOUNTS = mounts_script(private_tmp=True, volumes=False)
NO_BINDS = Binds()
NAMESPACES = ["--pid", "--fork", "--mount-proc", "--ipc", "--kill-child"]
Join = tuple[str, dict[str, str]]  # a cgroup's join: a script, and its environment


@dataclass(frozen=True)
class Start:
    """A process the slave starts: its arguments, the environment its first process gets
    (fixed where that process may be root's), and what its first shell of the task's
    user reads on its stdin (its umask, its environment, then what it runs; None: it
    reads nothing)."""

    args: list[str]
    env: dict[str, str]
    script: bytes | None = None
    # its sandbox held root's until its first shell has made its mounts (its /tmp and
    # /var/tmp its sandbox's, PRIVATE_MOUNTS; its volumes bound: mounts_script)
    private_tmp: bool = False


@dataclass(frozen=True)
class Confinement:
    """What this slave can do to keep tasks apart (`probe`), and the argv that does it."""

    users: bool  # tasks run as their principal's user
    pid_namespace: bool
    private_tmp: bool = False  # (in the PID namespace's mount namespace) PRIVATE_MOUNTS
    unshare: str = "unshare"
    setpriv: str = "setpriv"
    nsenter: str = "nsenter"
    # where it switches users: no process of a task gains privileges by exec (the
    # kernel's no_new_privs: a setuid program, sudo or su or one with a local root hole,
    # runs with the task's own; file capabilities are not raised), off by
    # `--setuid-programs`
    no_new_privs: bool = False

    def switches(self, user: TaskUser | None) -> bool:
        """Whether a process for `user` runs as that user (the wrapper too)."""
        return user is not None and self.users

    def task(
        self,
        command: str,
        user: TaskUser | None,
        env: dict[str, str],
        join: Join,
        exit_file: str,
        *,
        binds: Binds = NO_BINDS,
    ) -> Start:
        """A command task's start, in `env`: the wrapper that records its exit status
        (`exit_file`, the task's user's to write where it switches), confined, in its
        cgroup (`join`: `_joins`).
        `binds`: its volumes, bound in its mount namespace (a PID namespace's)."""
        first, then = self._joins(user, join[0])
        shell = ["/bin/sh", "-c", then + command]
        args = self._confined(user, ["/bin/sh", "-s", exit_file, *shell], binds)
        body = TASK_WRAPPER_IN_NAMESPACE if self.pid_namespace else TASK_WRAPPER
        held = self.private_tmp or bool(binds.mounts)
        return self._start(first, join[1], args, self._named(user, env), body, held)

    def executor(
        self,
        command: str,
        user: TaskUser | None,
        env: dict[str, str],
        join: Join,
    ) -> Start:
        """A custom executor's start (its exit status is its process's own): `sh -c
        COMMAND` as Mesos runs it, joining its cgroup as `task` does."""
        first, then = self._joins(user, join[0])
        args = self._confined(user, ["/bin/sh", "-s", "/bin/sh", "-c", then + command])
        body = EXECUTOR_IN_NAMESPACE if self.pid_namespace else EXECUTOR
        return self._start(first, join[1], args, self._named(user, env), body, self.private_tmp)

    def check(
        self,
        command: str,
        user: TaskUser | None,
        env: dict[str, str],
        join: Join,
        *,
        namespace: int | None,
        sandbox: str,
    ) -> Start:
        """A task's COMMAND health check's start: as the task runs, in `env` (its), its
        cgroup joined as `task` joins it, as its user, and with a PID namespace in the
        task's namespaces (`nsenter` to `namespace`, their init's pid), in `sandbox`."""
        first, then = self._joins(user, join[0])
        args = ["/bin/sh", "-s", "/bin/sh", "-c", then + command]
        if self.pid_namespace:
            assert namespace is not None
            # Root runs nothing of the task's mount namespace: the task may have remade
            # it (its first process is its user's to ptrace into a user and mount
            # namespace of its own, /usr/bin its), so nsenter itself goes to the sandbox
            # there (--wdns) and becomes the task's user (-G, -S: no supplementary
            # groups) before it runs the check's shell.
            enter = ["--target", str(namespace), "--pid", "--mount", "--ipc", f"--wdns={sandbox}"]
            if self.switches(user):
                assert user is not None
                enter += ["--setgid", str(user.gid), "--setuid", str(user.uid)]
            args = [*self._no_new_privs(), self.nsenter, *enter, "--", *args]
        elif self.switches(user):
            assert user is not None
            args = [self.setpriv, *self._drop_to(user), "--", *args]
        return self._start(first, join[1], args, self._named(user, env), EXECUTOR)

    def _named(self, user: TaskUser | None, env: dict[str, str]) -> dict[str, str]:
        """`env` with its user's name as $USER and $LOGNAME where it runs as a user of its
        own (what its framework set wins): as `id -un` tells it (slave.task_accounts)."""
        name = user.name or user.account if user is not None and self.switches(user) else None
        return {"USER": name, "LOGNAME": name, **env} if name else env

    def _joins(self, user: TaskUser | None, join: str) -> tuple[str, str]:
        """(What root runs first to join the cgroup, what the task's shell runs). Root
        joins before it drops to the task's user, and the whole chain (the wrapper, pid
        1 of the task's PID namespace) runs in the cgroup: a wrapper of the user's left
        outside would be the task's to ptrace, and start processes outside every bound
        (review 79); the cgroup's files are never the user's (cgroup v2 would ask it to
        own the common ancestor's too). Where it does not switch, the task's shell joins:
        the wrapper's exit status is not charged to the task's memory."""
        return (join, "") if self.switches(user) else ("", join)

    @staticmethod
    def _start(
        first: str,
        join_env: dict[str, str],
        args: list[str],
        env: dict[str, str],
        body: str,
        private_tmp: bool = False,
    ) -> Start:
        """`args` after root's join (`first`, cgroup v2's way: the rest runs in it); the
        first process's environment fixed (root's), the task's in the script. The join's
        variables (the slave's paths) are in both, last: a framework's cannot move them."""
        if first:
            args = ["/bin/sh", "-c", first + 'exec "$@"', "drfmesos-join", *args]
        root_env = {**ROOT_ENV, **join_env} if first else dict(ROOT_ENV)
        return Start(args, root_env, start_script({**env, **join_env}, body), private_tmp)

    @staticmethod
    def wrap(args: list[str], exit_file: str) -> list[str]:
        """`args` under the wrapper that writes their exit status to `exit_file` (not
        confined: an image task's podman, root's, wraps so, confining the container)."""
        return ["/bin/sh", "-c", WRAPPER, "drfmesos-task", exit_file, *args]

    def _confined(
        self, user: TaskUser | None, args: list[str], binds: Binds = NO_BINDS
    ) -> list[str]:
        if self.pid_namespace:  # (System V IPC, POSIX queues, /dev/shm and /tmp its own too)
            if self.switches(user):
                assert user is not None
                args = [self.setpriv, *self._drop_to(user), "--", *args]
            # (its user's account files: only one it switches to has them, and binds them)
            accounts = list(user.accounts) if user is not None and user.accounts else []
            script = mounts_script(self.private_tmp, bool(binds.mounts), bool(accounts))
            bound = binds.args()
            return [self.unshare, *NAMESPACES, "--", "/bin/sh", "-c", script, "drfmesos-mounts",
                    *accounts, *bound, *args]  # fmt: skip
        if not self.switches(user):
            return args
        assert user is not None
        if user.account is not None:  # (its groups: setpriv drops to it)
            return [self.setpriv, *self._drop_to(user), "--", *args]
        ids = ["--setgid", str(user.gid), "--setuid", str(user.uid)]
        return [*self._no_new_privs(), self.unshare, *ids, "--", *args]

    def _drop_to(self, user: TaskUser) -> list[str]:
        """setpriv's arguments to become `user`: an operator's account with its groups, a
        slave-made user with none; gaining no privilege by exec where that is on."""
        groups = "--init-groups" if user.account is not None else "--clear-groups"
        nnp = ["--no-new-privs"] if self.no_new_privs else []
        return ["--reuid", str(user.uid), "--regid", str(user.gid), groups, *nnp]

    def _no_new_privs(self) -> list[str]:
        """What root runs first so that nothing after it gains privileges by exec (it is
        inherited, and a root nsenter or unshare still drops to the task's user under it)."""
        return [self.setpriv, "--no-new-privs", "--"] if self.no_new_privs else []

    def not_enforced(self) -> str | None:
        """What a tenant's task can still reach here, for the slave's start line (None:
        it runs as a user of its own, in a PID namespace of its own)."""
        gaps = []
        if not self.users and os.geteuid() == 0:
            gaps.append(
                "tasks run as ROOT, the slave's own user: a task can do anything on this "
                "host, read every other task's sandbox and environment, the slave's "
                "secrets, work dir and journals, and signal every process"
            )
        elif not self.users:
            gaps.append(
                "tasks run as the slave's own user: a task can read every other task's "
                "sandbox and environment (/proc/PID/environ), the slave's work dir and "
                "journals, and signal every other task and the slave itself"
            )
        if self.users and KEYCTL is None:
            gaps.append(
                "no keyctl(2) number is known for this machine: tasks share the slave's "
                "session keyring, and read and clear the keys another tenant's task keeps there"
            )
        if not self.pid_namespace:
            gaps.append(
                "tasks share the host's PID namespace, /tmp and /dev/shm: a task sees every "
                "process, and every other task's files in /tmp it may read"
            )
        elif not self.private_tmp:
            gaps.append(
                "tasks share the host's /tmp and /var/tmp: a task reads what another leaves "
                "there readable, and plants files for it"
            )
        return "; ".join(gaps) or None


UNCONFINED = Confinement(users=False, pid_namespace=False)  # (a slave before its start)


def probe(
    switch_user: bool,
    pid_namespace: bool,
    work_dir: Path | None = None,
    setuid_programs: bool = False,
) -> tuple[Confinement, list[str]]:
    """The confinement this host allows of what was asked, and why each part asked for
    is off (blocking: it runs `unshare` once; call it in a thread). A private /tmp comes
    with the PID namespace, unless `work_dir` is under the host's /tmp or /var/tmp; tasks
    that switch users gain no privileges by exec unless `setuid_programs`."""
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
            "not root: no PID namespace"
            if not root
            else "unshare --pid --mount-proc --ipc (and its /dev/shm and /tmp there) failed"
        )
    under_tmp = work_dir is not None and any(
        work_dir.resolve().is_relative_to(tmp) for tmp in HOST_TMP
    )
    if pidns and under_tmp:
        why.append(
            f"the work dir {work_dir} is under the host's /tmp or /var/tmp, which a task's "
            "own /tmp would hide its sandbox in: tasks get no /tmp of their own (a "
            "--work-dir elsewhere, as /var/lib/drfmesos)"
        )
    nsenter = shutil.which("nsenter") or "nsenter"  # (util-linux's, as unshare)
    confinement = Confinement(
        users,
        pidns,
        pidns and not under_tmp,
        unshare or "unshare",
        setpriv or "setpriv",
        nsenter,
        no_new_privs=users and not setuid_programs,
    )
    return confinement, why


def _unshares(unshare: str) -> bool:
    failed = (OSError, subprocess.SubprocessError)
    with contextlib.suppress(*failed), tempfile.TemporaryDirectory() as d:
        for name in PRIVATE_TMP:
            os.mkdir(os.path.join(d, name))
        done = subprocess.run(
            [unshare, *NAMESPACES, "--", "/bin/sh", "-c", PRIVATE_MOUNTS, "probe", "true"],
            stdin=subprocess.DEVNULL,
            env=ROOT_ENV,
            cwd=d,
            capture_output=True,
            timeout=10,
        )
        return done.returncode == 0
    return False
