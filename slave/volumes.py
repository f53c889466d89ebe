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
import time
from collections.abc import Collection, Iterable
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from protocol.wire.reservations import parse_key
from slave.confine import Binds, Mount
from slave.sandbox import PASSABLE, PRIVATE, make_dir, open_dir_beneath
from slave.task_users import TaskUser


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
    bound: bool = True,
) -> Binds:
    """Each volume among `keys` made (if new) and given to `owner` (unless a shared one
    other tasks use, `busy`), and its place in the sandbox made: what the task's
    namespace is to bind, or (`link`) nothing, a symlink in the sandbox instead. Unless
    `bound` (a task whose first shell binds nothing: an image's), the way is not held.

    A place is reached and made from the sandbox's descriptor down, never by path
    (sandbox.open_dir_beneath): a task of the same user inside a sandbox its id used
    before may swap a part of the way for a symlink at any moment, and root, the slave,
    never follows it. (Blocking: in a thread.)"""
    wanted = volumes_of(keys)
    if not wanted:
        return Binds()
    make_dir(sandbox, owner)
    real = Path(os.path.realpath(sandbox))  # (the task's first shell checks real paths)
    mounts: list[Mount] = []
    way: set[PurePosixPath] = set()
    places = [_place(key) for key in wanted]
    if len(set(places)) < len(places) or any(set(p.parents) & set(places) for p in places):
        raise OSError("two of its volumes' places are one, or one lies in another's")
    for key, place in zip(wanted, places, strict=True):
        source = _made(work_dir, key, owner, busy)
        if link:
            parent = open_dir_beneath(sandbox, place.parts[:-1], owner)
            try:
                _link(source, place.name, parent)
            finally:
                os.close(parent)
        else:
            os.close(open_dir_beneath(sandbox, place.parts, owner, hold_way=bound))
            mounts.append((str(source), str(real / place)))
            way.update(place.parents[:-1])
    if owner is None or not bound:  # (nothing was held: the slave's own user, or no bind)
        way.clear()
    deepest_first = sorted(way, key=lambda p: len(p.parts), reverse=True)
    return Binds(tuple(mounts), tuple(str(real / p) for p in deepest_first))


def _place(key: str) -> PurePosixPath:
    rid = parse_key(key)
    assert rid.volume is not None
    return PurePosixPath(rid.volume.container_path)


def _made(work_dir: Path, key: str, owner: TaskUser | None, busy: Collection[str]) -> Path:
    """The volume's directory, made if new: its owner's unless a shared one in use."""
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
    return source


def _link(source: Path, name: str, parent: int) -> None:
    """The volume linked at `name` in the directory `parent` (no namespace to bind it
    in); a symlink there already is the task's own, left as it is."""
    try:
        os.symlink(source, name, dir_fd=parent)
    except FileExistsError:
        if not stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise OSError(f"{name} in the sandbox is not a symlink: a volume goes there") from None


def remove(work_dir: Path, keys: Iterable[str]) -> None:
    """DESTROY: the volumes' directories gone. (Blocking: in a thread.)"""
    remove_dirs(volume_dir(work_dir, key) for key in volumes_of(keys))


def remove_dirs(dirs: Iterable[Path]) -> None:
    """(Blocking: in a thread.)"""
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def set_aside(work_dir: Path, dirs: Iterable[Path]) -> list[tuple[Path, Path]]:
    """Volume directories no volume of the slave's holds, moved out of the way of a later
    volume of the same role and id (which starts empty), not removed: to
    `volumes/set-aside/ROLE/ID.NANOSECONDS`, root's alone, for a person to look at or
    remove. (from, to) of each moved. (Blocking: in a thread.)"""
    moved: list[tuple[Path, Path]] = []
    for path in dirs:
        if not path.exists():
            continue
        aside = work_dir / "volumes" / "set-aside"
        aside.mkdir(mode=PRIVATE, exist_ok=True)
        role = aside / path.parent.name
        role.mkdir(mode=PRIVATE, exist_ok=True)
        to = role / f"{path.name}.{time.time_ns()}"
        os.rename(path, to)
        moved.append((path, to))
    return moved


def on_disk(work_dir: Path) -> list[Path]:
    """Every volume directory under `work_dir` (`volumes/roles/ROLE/ID`). (Blocking.)"""
    try:
        roles = list((work_dir / "volumes" / "roles").iterdir())
    except FileNotFoundError:
        return []
    return [d for role in roles if role.is_dir() for d in role.iterdir()]
