"""What a slave keeps of its total across restarts: the dynamic reservations and volumes
the master told it of (CheckpointResources), in `work_dir/resources.json`.

Its total is its --resources with those made of them again (`with_checkpointed`): a
RESERVE of cpus:1 for team-a turns one of its unreserved cpus into `cpus(team-a,alice)`.
What no longer fits the --resources (an operator gave it fewer) is dropped and logged,
where Mesos would refuse to start; so is a count of a resource named by its values (ports:
the master reserves none; a checkpoint from before it refused to has one), whose values
would not follow it, leaving a total the slave's Register may not carry.

Only a DESTROY removes a volume's data. A volume dropped so, or one the master's word no
longer names though no DESTROY took it (a master that dropped it as the slave came back
smaller), is kept in the file (`dropped`), its directory as it was: at each start it is
tried against the --resources again, and comes back when they fit it (put the resources
back, restart, and the volume is there). A volume the master names anew whose directory a
dropped one holds (a CREATE of the same role and id) has that directory set aside first
(`volumes/set-aside`, root's alone), so that it starts empty; so has a volume directory
the file names nowhere (left by a slave from before the file said as much).

The master's word is versioned (the master's epoch, then its number: see
`CheckpointResources`), and the version of the last one applied is kept in the file: an
older one, delivered again by the broker after a newer one (from its last save, after a
restart), or a deposed master's, is dropped and logged (`resources.stale`), as Mesos's
agent refuses an operation made on a stale resource version.

A DESTROY is written here (`destroyed`) before its directory goes: a slave that died
between the two removes the directory at its next start.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from protocol.wire.reservations import base_of, checkpointed, with_checkpointed
from protocol.wire.resources import ResourceError, Resources
from slave import volumes

FILE = "resources.json"
Millis = Mapping[str, int]


class Version(NamedTuple):
    """Of a CheckpointResources: the sending master's epoch, then its number."""

    epoch: int
    number: int


@dataclass
class Saved:
    """What the file holds: the master's last word applied (`told`), with its version;
    the volumes whose data is kept that it does not name (`dropped`); and those the
    last DESTROY took (`destroyed`), whose directories may still be there."""

    told: Millis = field(default_factory=dict)
    version: Version = field(default_factory=lambda: Version(0, 0))
    dropped: Millis = field(default_factory=dict)
    destroyed: Millis = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: str) -> Saved:
        """ValueError, TypeError or ResourceError if it is not one."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        if not isinstance(data.get("kept"), dict):  # (a file from before: the word alone)
            return cls(told=Resources(data).millis)
        epoch, number = data.get("version", (0, 0))
        return cls(
            told=Resources(data["kept"]).millis,
            version=Version(int(epoch), int(number)),
            dropped=Resources(data.get("dropped", {})).millis,
            destroyed=Resources(data.get("destroyed", {})).millis,
        )

    def text(self) -> str:
        return json.dumps(
            {
                "version": list(self.version),
                "kept": _dict(self.told),
                "dropped": _dict(self.dropped),
                "destroyed": _dict(self.destroyed),
            },
            sort_keys=True,
        )


class KeptResources:
    def __init__(
        self, work_dir: Path, configured: Resources, log: Any, valued: Collection[str] = ()
    ) -> None:
        """`valued`: the base names of the resources named by their values (`ports`)."""
        self.work_dir = work_dir
        self.valued = frozenset(valued)
        self.path = work_dir / FILE
        self.configured = configured
        self.log = log
        self.saved = Saved()
        self.kept = Resources()  # what of the kept resources its total holds
        self.dropped = Resources()  # the volumes it keeps the data of, not in its total
        self.total = configured
        self.loaded = False

    @property
    def version(self) -> Version:
        """Of the last CheckpointResources applied."""
        return self.saved.version

    async def load(self) -> None:
        """At start: the kept resources, made of the configured ones again."""
        await load_all([self])

    def _read(self) -> str | None:
        """What the file holds (None: nothing kept). Blocking: call in a thread."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return None

    def _take(self, raw: str | None, on_disk: list[Path]) -> tuple[list[Path], list[Path]]:
        """What the file holds taken; of the volume directories `on_disk`, those of a
        DESTROY cut short (to remove), and those it names nowhere (to set aside)."""
        self.loaded = True
        if raw is not None:
            try:
                self.saved = Saved.parse(raw)
            except (ValueError, TypeError, ResourceError) as e:
                self.log.error("resources.unreadable", path=str(self.path), error=str(e))
                return [], []  # (nothing touched: for a person to look at)
        saved = self.saved
        self._apply({**saved.dropped, **saved.told})  # (the dropped tried again)
        named = _dirs(self.work_dir, saved.told.keys() | saved.dropped.keys())
        destroyed = _dirs(self.work_dir, saved.destroyed) - named
        return (
            [d for d in on_disk if d in destroyed],
            [d for d in on_disk if d not in named and d not in destroyed],
        )

    async def keep(
        self, resources: Resources, version: Version, destroyed: Resources | None = None
    ) -> bool:
        """The master's word on what to keep (whole), of `version`, and the volumes a
        DESTROY took: written, then the total follows and their directories go. False
        (nothing done) if it is not newer than the last applied."""
        if version <= self.version:
            self.log.warning(
                "resources.stale", epoch=version.epoch, version=version.number,
                applied_epoch=self.version.epoch, applied_version=self.version.number,
            )  # fmt: skip
            return False
        told = checkpointed(resources.millis)  # (nothing static)
        gone = {k: v for k, v in (destroyed or Resources()).millis.items() if k not in told}
        was = self.saved
        had = {k: v for k, v in {**was.told, **self.kept.millis}.items() if _volume(k)}
        unnamed = {k: v for k, v in had.items() if k not in told and k not in gone}
        dropped = {k: v for k, v in {**was.dropped, **unnamed}.items() if k not in gone}
        # a volume named anew (a CREATE) whose directory a dropped one holds: set aside
        fresh = _dirs(self.work_dir, (k for k in told if k not in had))
        aside = [k for k in dropped if volumes.volume_dir(self.work_dir, k) in fresh]
        dropped = {k: v for k, v in dropped.items() if k not in told and k not in aside}
        saved = Saved(told, version, dropped, gone)
        moved = await asyncio.to_thread(self._save, saved, aside)
        self.saved = saved
        if unnamed:
            self.log.warning("volumes.dropped", volumes=sorted(unnamed), why="no DESTROY")
        self._log_set_aside(moved, "a volume of its role and id made anew")
        self._apply(told, dropped)
        if gone:
            await asyncio.to_thread(volumes.remove, self.work_dir, gone)
            self.log.info("volumes.destroyed", volumes=sorted(gone))
        return True

    def _save(self, saved: Saved, aside: list[str]) -> list[tuple[Path, Path]]:
        """The dropped volumes' directories `aside` set aside, then `saved` written.
        (Blocking: in a thread.)"""
        dirs = [volumes.volume_dir(self.work_dir, k) for k in aside]
        moved = volumes.set_aside(self.work_dir, dirs)
        _write(self.path, saved.text())
        return moved

    def _log_set_aside(self, moved: list[tuple[Path, Path]], why: str) -> None:
        if moved:
            self.log.warning("volumes.set_aside", why=why, moved={str(a): str(b) for a, b in moved})

    def _apply(self, kept: Mapping[str, int], dropped: Mapping[str, int] | None = None) -> None:
        """`kept` made of the configured resources (what does not fit is dropped and
        logged: the volumes among it kept, with `dropped`, their data untouched)."""
        fits = {k: v for k, v in kept.items() if base_of(k) not in self.valued}
        total, unfit = with_checkpointed(self.configured.millis, fits)
        unfit |= {k: v for k, v in kept.items() if k not in fits}
        if unfit:
            self.log.error(
                "resources.dropped", dropped=str(Resources.from_millis(unfit)),
                configured=str(self.configured),
            )  # fmt: skip
        self.kept = Resources.from_millis({k: v for k, v in kept.items() if k not in unfit})
        held = {k: v for k, v in unfit.items() if _volume(k)}
        self.dropped = Resources.from_millis({**(dropped or {}), **held})
        self.total = Resources.from_millis(total)
        self.log.info("resources.kept", kept=str(self.kept), total=str(self.total))


async def load_all(kept: list[KeptResources]) -> None:
    """Load each (what it kept, made of its configured resources again) in one trip to a
    thread: a process's 4,000 logical slaves each making its own trip spent more of its
    CPU on the thread pool's hand-overs than on anything else at their start. Then the
    volume directories of DESTROYs a crash cut short are removed, and those named by
    nothing set aside."""
    read = await asyncio.to_thread(lambda: [(k._read(), volumes.on_disk(k.work_dir)) for k in kept])
    found = [(k, *k._take(raw, on_disk)) for k, (raw, on_disk) in zip(kept, read, strict=True)]
    if not any(gone or strays for _, gone, strays in found):
        return

    def tidy() -> list[list[tuple[Path, Path]]]:
        volumes.remove_dirs(d for _, gone, _ in found for d in gone)
        return [volumes.set_aside(k.work_dir, strays) for k, _, strays in found]

    moved = await asyncio.to_thread(tidy)
    for (k, gone, _), aside in zip(found, moved, strict=True):
        if gone:
            k.log.warning("volumes.destroy_finished", volumes=[str(d) for d in gone])
        k._log_set_aside(aside, "named by nothing in resources.json")


def _volume(key: str) -> bool:
    return bool(volumes.volumes_of([key]))


def _dirs(work_dir: Path, keys: Iterable[str]) -> set[Path]:
    return {volumes.volume_dir(work_dir, k) for k in volumes.volumes_of(keys)}


def _dict(millis: Mapping[str, int]) -> dict[str, float]:
    return Resources.from_millis(millis).to_dict()


def _write(path: Path, text: str) -> None:
    """Whole or not at all, synced: a restart must not find half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
