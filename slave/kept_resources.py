"""What a slave keeps of its total across restarts: the dynamic reservations and volumes
the master told it of (CheckpointResources), in `work_dir/resources.json`.

Its total is its --resources with those made of them again (`with_checkpointed`): a
RESERVE of cpus:1 for team-a turns one of its unreserved cpus into `cpus(team-a,alice)`.
What no longer fits the --resources (an operator gave it fewer) is dropped and logged,
where Mesos would refuse to start; so is a count of a resource named by its values (ports:
the master reserves none; a checkpoint from before it refused to has one), whose values
would not follow it, leaving a total the slave's Register may not carry.

A DESTROY is written here before its directory goes: a slave that died between the two
finds at its start a volume directory its file no longer names, and removes it then (a
volume of the same id made later would otherwise be given the destroyed one's files).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from protocol.wire.reservations import base_of, checkpointed, with_checkpointed
from protocol.wire.resources import ResourceError, Resources
from slave import volumes

FILE = "resources.json"


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
        self.kept = Resources()
        self.total = configured
        self.loaded = False

    async def load(self) -> None:
        """At start: the kept resources, made of the configured ones again."""
        await load_all([self])

    def _read(self) -> str | None:
        """What the file holds (None: nothing kept). Blocking: call in a thread."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return None

    def _take(self, raw: str | None, on_disk: list[Path]) -> list[Path]:
        """What the file holds taken; the volume directories `on_disk` it does not name
        are returned (a DESTROY's, cut short), for the caller to remove."""
        self.loaded = True
        if raw is None:
            if on_disk:  # (no file, yet volumes: left for a person to look at)
                self.log.warning("volumes.unnamed", volumes=[str(d) for d in on_disk])
            return []
        try:
            kept = Resources(json.loads(raw))
        except (ValueError, ResourceError) as e:
            self.log.error("resources.unreadable", path=str(self.path), error=str(e))
            return []
        self._apply(kept)
        # (named by the file, even those the --resources no longer fit: their data stays)
        named = {volumes.volume_dir(self.work_dir, k) for k in volumes.volumes_of(kept)}
        return [d for d in on_disk if d not in named]

    async def keep(self, resources: Resources) -> None:
        """The master's word on what to keep (whole): written, then the total follows."""
        kept = Resources.from_millis(checkpointed(resources.millis))  # (nothing static)
        await asyncio.to_thread(_write, self.path, json.dumps(kept.to_dict(), sort_keys=True))
        gone = [k for k in volumes.volumes_of(self.kept) if k not in kept]  # (DESTROYed)
        self._apply(kept)
        if gone:
            await asyncio.to_thread(volumes.remove, self.work_dir, gone)
            self.log.info("volumes.destroyed", volumes=gone)

    def _apply(self, kept: Resources) -> None:
        fits = {k: v for k, v in kept.millis.items() if base_of(k) not in self.valued}
        total, dropped = with_checkpointed(self.configured.millis, fits)
        dropped |= {k: v for k, v in kept.millis.items() if k not in fits}
        if dropped:
            self.log.error(
                "resources.dropped", dropped=str(Resources.from_millis(dropped)),
                configured=str(self.configured),
            )  # fmt: skip
        fits = {k: v for k, v in kept.millis.items() if k not in dropped}
        self.kept = Resources.from_millis(fits)
        self.total = Resources.from_millis(total)
        self.log.info("resources.kept", kept=str(self.kept), total=str(self.total))


async def load_all(kept: list[KeptResources]) -> None:
    """Load each (what it kept, made of its configured resources again) in one trip to a
    thread: a process's 4,000 logical slaves each making its own trip spent more of its
    CPU on the thread pool's hand-overs than on anything else at their start. Then the
    volume directories of DESTROYs a crash cut short are removed."""
    read = await asyncio.to_thread(lambda: [(k._read(), volumes.on_disk(k.work_dir)) for k in kept])
    orphans = [(k, k._take(raw, on_disk)) for k, (raw, on_disk) in zip(kept, read, strict=True)]
    if any(dirs for _, dirs in orphans):
        await asyncio.to_thread(volumes.remove_dirs, [d for _, dirs in orphans for d in dirs])
        for k, dirs in orphans:
            if dirs:
                k.log.warning("volumes.orphans_removed", volumes=[str(d) for d in dirs])


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
