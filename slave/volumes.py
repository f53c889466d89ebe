"""Persistent volumes on a slave: a directory per volume that outlives its tasks and the
slave's restarts, made available in the sandbox of each task launched with it.

A volume `disk(team-a,alice)[db-1:data]` lives in `WORK_DIR/volumes/roles/team-a/db-1`
(Mesos's layout). At a launch it is given to the task's user, closed to every other
(0700), and bind-mounted at `SANDBOX/data` in the task's own mount namespace, so the
mount goes with the task; where the slave has no namespaces to offer it is linked
there instead (the directories above it let others pass, not list; it is still its
user's alone). DESTROY removes its directory, once no task holds it.

A shared volume (`<SHARED>`) is the same one directory in the sandbox of every task that
uses it at once. As in Mesos, it is given to a task's user only while no task of another
user uses it: tasks of one principal share it freely; a task of another principal
launched beside them finds it their user's (0700), until they end.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Collection, Iterable
from pathlib import Path
from urllib.parse import quote

from protocol.wire.reservations import parse_key
from slave.sandbox import PASSABLE, PRIVATE, make_dir
from slave.task_users import TaskUser

Mount = tuple[str, str]  # (the volume's directory, where it goes in the sandbox)


def volume_dir(work_dir: Path, key: str) -> Path:
    """Where the volume a resource names lives (its role quoted: `eng/web` is one name)."""
    rid = parse_key(key)
    assert rid.volume is not None
    role = quote(rid.role or "*", safe="")
    return work_dir / "volumes" / "roles" / role / rid.volume.id


def volumes_of(keys: Iterable[str]) -> list[str]:
    """The resources among `keys` that are volumes."""
    return [k for k in keys if "[" in k and parse_key(k).volume is not None]


def prepare(
    work_dir: Path,
    sandbox: Path,
    keys: Iterable[str],
    owner: TaskUser | None,
    link: bool,
    busy: Collection[str] = (),
) -> list[Mount]:
    """Each volume among `keys` made (if new) and given to `owner` (unless a shared one
    other tasks use, `busy`), and its place in the sandbox made: the mounts for the
    task's namespace to make, or (`link`) none, a symlink in the sandbox instead.
    (Blocking: in a thread.)"""
    mounts: list[Mount] = []
    wanted = volumes_of(keys)
    if wanted:
        make_dir(sandbox, owner)
    for key in wanted:
        rid = parse_key(key)
        assert rid.volume is not None
        source = volume_dir(work_dir, key)
        for parent in reversed(source.parents[:4]):  # volumes/roles/ROLE: passable
            if not parent.exists():
                try:
                    parent.mkdir(mode=PASSABLE)
                except FileExistsError:  # (a launch beside this one, in another thread)
                    continue
                os.chmod(parent, PASSABLE)
        if owner is not None and key not in busy:
            make_dir(source, owner, PRIVATE)
        else:
            source.mkdir(exist_ok=True)
        target = sandbox / rid.volume.container_path
        for part in [*reversed(target.relative_to(sandbox).parents[:-1]), target]:
            _plain_dir_or_nothing(sandbox / part)  # (a sandbox used again: the task's)
        for parent in reversed(target.relative_to(sandbox).parents[:-1]):
            make_dir(sandbox / parent, owner)  # (within the task's own sandbox)
        if link:
            if not target.is_symlink():
                target.symlink_to(source)
        else:
            make_dir(target, owner)
            # (its real path: the task's first shell refuses a place reached by a symlink)
            real = Path(os.path.realpath(sandbox)) / target.relative_to(sandbox)
            mounts.append((str(source), str(real)))
    return mounts


def _plain_dir_or_nothing(path: Path) -> None:
    """A volume's place in a sandbox, refused (OSError) if a task left something there
    that is not a directory: a symlink the slave, root, would follow out of the sandbox
    (to chmod, or to mount over, what its target names)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path.name} in the sandbox is not a directory: a volume goes there")


def remove(work_dir: Path, keys: Iterable[str]) -> None:
    """DESTROY: the volumes' directories gone. (Blocking: in a thread.)"""
    remove_dirs(volume_dir(work_dir, key) for key in volumes_of(keys))


def remove_dirs(dirs: Iterable[Path]) -> None:
    """(Blocking: in a thread.)"""
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def on_disk(work_dir: Path) -> list[Path]:
    """Every volume directory under `work_dir` (`volumes/roles/ROLE/ID`). (Blocking.)"""
    try:
        roles = list((work_dir / "volumes" / "roles").iterdir())
    except FileNotFoundError:
        return []
    return [d for role in roles if role.is_dir() for d in role.iterdir()]
