"""Sandboxes: a directory a task's process runs in, its stdout and stderr there.

On a slave that switches users a sandbox is its task's user's and closed to everyone
else (0700); the directories above it (the work dir, `sandboxes/`, the framework's) let
others pass (0711) but not list, and what the slave keeps there (journals, keys) is its
own (0600). What lies inside a sandbox is the task's to make: a symlink or a FIFO
planted where its stdout goes is never followed or opened by the slave (running as
root, it would write where the task may not), nor is a file of another user's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import stat
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from slave.confine import PRIVATE_TMP
from slave.keyrings import own_session_keyring
from slave.task_users import TaskUser

PASSABLE = 0o711  # the directories above sandboxes: others pass, do not list
PRIVATE = 0o700  # a task's sandbox, its user's alone
OUTPUT_FILES = ("stdout", "stderr")
TASK_OPEN_FILES = 1024  # a tenant's process's soft limit, as systemd's default


def make_dir(path: Path, owner: TaskUser | None, mode: int = PRIVATE) -> None:
    """`path` made (its parents PASSABLE where the slave makes them) and, with an
    `owner`, given to it with `mode`. (Blocking: in a thread.)"""
    if owner is None:
        path.mkdir(parents=True, exist_ok=True)
        return
    try:
        path.mkdir(mode=mode)
    except FileExistsError:
        pass
    except FileNotFoundError:  # (a framework's first sandbox here: its parents first)
        for parent in reversed(path.parents):
            if not parent.exists():
                try:
                    parent.mkdir(mode=PASSABLE)
                except FileExistsError:  # (a launch beside this one, in another thread)
                    continue
                os.chmod(parent, PASSABLE)  # (mkdir's mode passes the umask)
        path.mkdir(mode=mode)
    # (the parents are the slave's: nothing but it puts a symlink there)
    os.chown(path, owner.uid, owner.gid, follow_symlinks=False)
    os.chmod(path, mode)


# a directory of a sandbox opened by the slave: never through a symlink, never a
# non-directory, closed in any process the slave starts unless passed on by name
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir_beneath(
    base: Path,
    parts: Sequence[str],
    owner: TaskUser | None,
    mode: int = PRIVATE,
    *,
    hold_way: bool = False,
) -> int:
    """The directory `base/parts[0]/parts[1]/...`, each part made where missing and (with
    an `owner`) given to it with `mode`, opened: its descriptor, the caller's to close.
    With `hold_way`, the parts before the last are root's instead (0700), so that no
    process of the owner's can rename what is in them until root hands them back.

    Each part is reached from its parent's descriptor, never by path: a task of the same
    user that swaps a part for a symlink meanwhile (from inside a sandbox its task id
    used before) makes this fail (OSError), and never has root, the slave, make, take or
    open anything outside. `base` is the slave's to name (its parents are its own).
    (Blocking: in a thread.)"""
    fd = os.open(base, _DIR_FLAGS)
    try:
        for i, part in enumerate(parts):
            if part in ("", ".", "..") or "/" in part:
                raise OSError(f"{part!r} is not a name in a sandbox")
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, mode, dir_fd=fd)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # (ELOOP: a symlink; ENOTDIR: a file)
                raise OSError(f"{part} in the sandbox is not a directory") from None
            os.close(fd)
            fd = child
            if owner is not None:
                held = hold_way and i < len(parts) - 1
                os.fchown(fd, *((0, 0) if held else (owner.uid, owner.gid)))
                os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_output(path: Path, owner: TaskUser | None) -> int:
    """A task's output file, opened for appending by the slave: created if need be (its
    owner's), never through a symlink, never a FIFO or device, never another user's
    file (a hard link to the slave's journal, say). Such a thing is removed and a new
    file made in its place. (Blocking: in a thread.)"""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        fd = None
    except OSError:  # a symlink (ELOOP), a FIFO without a reader (ENXIO), ...
        fd = None
        os.unlink(path)
    if fd is not None:
        st = os.fstat(fd)
        uid = owner.uid if owner is not None else os.geteuid()
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid and st.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
        os.unlink(path)
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600 if owner else 0o644)
    if owner is not None:
        os.fchown(fd, owner.uid, owner.gid)
    os.set_blocking(fd, True)
    return fd


def _make_task_sandbox(sandbox: Path, owner: TaskUser | None) -> Path:
    make_dir(sandbox, owner)
    for name in OUTPUT_FILES:
        os.close(open_output(sandbox / name, owner))
    return sandbox


async def make_task_sandbox(sandbox: Path, owner: TaskUser | None = None) -> Path:
    """Make a custom executor's task its sandbox with empty stdout and stderr, so that its
    files read as its own (empty until its executor writes there), never the executor's;
    its executor's user's."""
    return await asyncio.to_thread(_make_task_sandbox, sandbox, owner)


def make_tmp(sandbox: Path, owner: TaskUser | None) -> None:
    """The sandbox's `tmp` (the task's TMPDIR), its owner's, if the task has left none
    there: what it put in its place (a task id used again) is the task's own business,
    never followed."""
    try:
        os.mkdir(sandbox / "tmp", PRIVATE)
    except FileExistsError:
        return
    if owner is not None:
        os.chown(sandbox / "tmp", owner.uid, owner.gid, follow_symlinks=False)


def hold_for_private_tmp(sandbox: Path, owner: TaskUser) -> dict[str, str]:
    """Keep `sandbox` root's until the task's first (root's) shell has bound its `tmp`
    and `var-tmp` over /tmp and /var/tmp (slave.confine.PRIVATE_MOUNTS), each made here
    its owner's if missing: root's variables that have that shell hand it back. OSError
    if either is anything but a directory of its owner's (what a task left in a sandbox
    its id used before: never followed). Checked while no process of the user can
    change the sandbox's names (it is root's, 0700), so what root binds is what was
    checked."""
    os.chown(sandbox, 0, 0, follow_symlinks=False)
    os.chmod(sandbox, PRIVATE)
    try:
        for name in PRIVATE_TMP:
            path = sandbox / name
            try:
                os.mkdir(path, PRIVATE)
                os.chown(path, owner.uid, owner.gid, follow_symlinks=False)
            except FileExistsError:
                st = os.lstat(path)
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != owner.uid:
                    raise OSError(
                        f"the sandbox's {name} is not a directory of the task's user"
                    ) from None
    except OSError:  # (the launch fails: the sandbox goes back to its user, else a
        # root's sandbox would vouch for root's files in it, read as the task's: slave.files)
        os.chown(sandbox, owner.uid, owner.gid, follow_symlinks=False)
        raise
    return {"DRFMESOS_SANDBOX_OWNER": f"{owner.uid}:{owner.gid}"}


def _open_sandbox(
    sandbox: Path, owner: TaskUser | None, first: Callable[[], None] | None, private_tmp: bool
) -> tuple[int, int, dict[str, str]]:
    if first is not None:
        first()
    make_dir(sandbox, owner)
    make_tmp(sandbox, owner)
    held: dict[str, str] = {}
    if private_tmp:
        if owner is None:  # (the slave's own: nobody else's process may touch it)
            for name in PRIVATE_TMP:
                (sandbox / name).mkdir(exist_ok=True)
        else:
            held = hold_for_private_tmp(sandbox, owner)
    out = open_output(sandbox / "stdout", owner)
    try:
        return out, open_output(sandbox / "stderr", owner), held
    except BaseException:
        os.close(out)
        raise


async def spawn_in_sandbox(
    args: list[str],
    sandbox: Path,
    env: dict[str, str],
    pass_fds: tuple[int, ...] = (),
    owner: TaskUser | None = None,
    first: Callable[[], None] | None = None,
    script: bytes | None = None,
    private_tmp: bool = False,
) -> asyncio.subprocess.Process:
    """Start `args` in `sandbox` (created if need be, with its `tmp`), stdout and stderr
    to files there, with `env` and nothing of the slave's own environment; `script` on
    its stdin (a task's first shell reads it: slave.confine), else nothing; with
    `private_tmp`, its `tmp` and `var-tmp` ready for its /tmp and /var/tmp. With an
    `owner` (it runs as a tenant's user) it starts as a tenant's process should
    (`_as_tenant`), not with what the slave holds.

    The process leads a new session, so killing its process group kills everything it
    started. File system work runs in a thread (`first` too: what else must be on disk
    before it starts): the event loop never waits on the disk.
    """
    out, err, held = await asyncio.to_thread(_open_sandbox, sandbox, owner, first, private_tmp)
    env = {**env, **held}
    stdin = asyncio.subprocess.DEVNULL if script is None else _memory_file(script)
    try:
        return await asyncio.create_subprocess_exec(
            *args,
            cwd=sandbox,
            stdout=out,
            stderr=err,
            stdin=stdin,
            env=env,
            start_new_session=True,
            pass_fds=pass_fds,
            preexec_fn=_as_tenant if owner is not None else None,
        )
    except subprocess.SubprocessError as e:  # (_as_tenant failed)
        raise OSError(f"no session keyring of its own: {e}") from e
    finally:
        for fd in (out, err) if script is None else (out, err, stdin):
            os.close(fd)


def _as_tenant() -> None:
    """(In the child, before its exec: subprocess's `preexec_fn`.) A tenant's process
    gets a session keyring of its own (slave.keyrings), and starts with TASK_OPEN_FILES
    open files (its soft limit; the hard one stays, for what needs more), not the
    slave's (`slave.cli.raise_fd_limit` lifts the slave's to its hard limit): each
    socket bound holds a port, and the kernel's ephemeral ports are every tenant's
    (the ports isolator kills a task that holds too many: slave.ports_isolator)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft = TASK_OPEN_FILES if hard == resource.RLIM_INFINITY else min(TASK_OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    own_session_keyring()


def _memory_file(data: bytes) -> int:
    """A file in memory holding `data`, read from its start: no disk, no path, readable
    through the descriptor alone (a pipe could hold only 64 KiB before its reader runs)."""
    fd = os.memfd_create("drfmesos-start", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
