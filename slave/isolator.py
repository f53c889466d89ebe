"""How a slave holds a container (a command task, or a custom executor with its tasks)
to the resources DRF gave it.

`cgroups`: a cgroup per container under drfmesos/<slave-id>/~p.<principal>/ (its
principal's group, which holds its tasks together: slave.principal_groups), with a CPU
weight (and with `cfs`, a hard cap), a memory limit the kernel enforces (an OOM kill ends
the task TASK_FAILED), a pids limit, and the kernel's accounting for usage. A process
joins its cgroup before it execs the task (`Container.join`), so all it starts stays in
it.

`posix`: today's behaviour. Nothing is limited by the kernel; the slave polls the task's
process group's RSS (slave.memory_limits) and reads usage from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from protocol import logs
from protocol.wire.resources import Resources
from slave.cgroup_upkeep import Upkeep, hold, is_spare, sweep
from slave.cgroups import MB, Cgroups, Limits, Usage
from slave.pid_shares import PidShares
from slave.principal_groups import GROUP, PrincipalGroups, is_group

PARENT = "drfmesos"

# The start of the shell that runs the task (a command task's own, inside the wrapper that
# writes its exit status): it writes 0 (itself) into each file named in
# DRFMESOS_CGROUP_PROCS (Cgroups.procs_files) before it runs anything, so nothing the task
# starts runs outside the cgroup (and no exec is spent on it).
JOIN = (
    'for f in $DRFMESOS_CGROUP_PROCS; do echo 0 > "$f" || '
    '{ echo "drfmesos: could not join cgroup $f" >&2; exit 125; }; done; '
)

POSIX_WARNING = (
    "isolation is posix: CPU use is not limited (a task can burn every core), memory is "
    "checked by polling RSS (a fast allocation overshoots between polls), the number of "
    "processes is not limited, and a process that leaves its process group escapes a kill"
)


class Container(Protocol):
    name: str

    @property
    def cgroup(self) -> str | None:
        """The cgroup it is (a container runtime's parent), if it is one."""
        ...

    def join(self) -> tuple[str, dict[str, str]]:
        """What to put before a `sh -c` script, and into its environment, so that the
        shell joins the container before it runs anything."""
        ...

    async def limitation(self) -> str | None:
        """Why the kernel stopped it (an OOM kill), as a message for the user, if so."""
        ...

    def peaked_at_limit(self) -> str | None:
        """Why its memory reached its limit, as a message for the user, if it did (what
        shows an OOM kill in a container of its own inside it, removed since)."""
        ...

    async def destroy(self, written: Iterable[Path] = ()) -> None:
        """Kill what is left in it; it is removed a moment later (`written`: where its
        task wrote, its sandbox: the page cache of the files there is charged to it)."""
        ...


class Isolator(Protocol):
    kind: str
    enforces_memory: bool  # else the slave polls RSS itself

    async def prepare(self, name: str, resources: Resources, principal: str = "") -> Container:
        """Its container, held to `resources`, for a task of `principal`'s (root
        joins it before it drops to the task's user: slave.confine). A container there
        already (an executor's) is resized, in the group it is in."""
        ...

    def adopt(
        self, name: str, principal: str | None = None, resources: Resources | None = None
    ) -> Container:
        """A container a previous run of this slave made (its task is recovered), in
        `principal`'s group (None: where a slave before the groups made it, right under
        its parent), counted there with `resources`."""
        ...

    async def recover(self, keep: set[str]) -> list[str]:
        """Destroy the containers a previous run left that no recovered task owns (`keep`:
        the recovered ones' cgroups), and bound the groups of those recovered."""
        ...

    async def usage(self, running: list[tuple[Container, int]]) -> list[Usage]:
        """What each (container, process group) uses, in one look for all of them."""
        ...

    async def close(self) -> None:
        """The slave stops: remove its parent cgroup if no container is left in it."""
        ...


_KEPT = re.compile(r"[A-Za-z0-9-]")
MAX_NAME = 200  # characters of a container's name (a cgroup's is at most 255, NAME_MAX)


def _escape(part: str) -> str:
    """`part` with every character but letters, digits and '-' written as `_XX` (its
    UTF-8 bytes in hex): no '.', '/', '~' or space is left, and two parts stay two."""
    return "".join(
        c if _KEPT.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode()) for c in part
    )


def container_name(framework_id: str, task_id: str) -> str:
    """A task's container (its cgroup, its image's podman container): named by structure,
    never by joining ids that may hold the separator. Each part is escaped (`_escape`),
    so `t.<framework>.<task>` names one task, whatever its ids: a framework called
    `<alice's id>.alice` is not alice's. (A name past MAX_NAME is its hash.)"""
    return _name("t", framework_id, task_id)


def group_name(principal: str) -> str:
    """A principal's group (slave.principal_groups): by structure as the containers, and
    never one (it starts with a ~)."""
    return _name(GROUP, principal)


def executor_container_name(framework_id: str, executor_id: str) -> str:
    """A custom executor's container, which holds its tasks too: never a task's."""
    return _name("e", framework_id, executor_id)


def _name(kind: str, *parts: str) -> str:
    name = ".".join([kind, *map(_escape, parts)])
    if len(name) > MAX_NAME:  # (an '_h' is no escape: it cannot be an escaped name)
        name = f"{kind}._h" + hashlib.sha256(name.encode()).hexdigest()
    return name


def podman_name(slave_id: str, framework_id: str, task_id: str) -> str:
    """An image task's podman container: named by its slave too (podman's names are
    the host's, shared by every slave on it), and by structure as the rest."""
    return "drfmesos-" + _name("i", slave_id, framework_id, task_id)


def legacy_container_name(framework_id: str, name: str) -> str:
    """The name a slave before #45 gave a task's container (`name`: a task id, or
    `executor-<id>`), which a recovered task of its may still run in. Two frameworks'
    ids could name one container: only a checkpoint that predates the structural names
    is read with it."""
    raw = f"{framework_id}.{name}"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", raw)
    if safe != raw or safe in (".", ".."):
        safe += "-" + hashlib.sha256(raw.encode()).hexdigest()[:8]
    return safe


# -- posix ------------------------------------------------------------------------------------


class PosixContainer:
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def cgroup(self) -> str | None:
        return None

    def join(self) -> tuple[str, dict[str, str]]:
        return "", {}

    async def limitation(self) -> str | None:
        return None

    def peaked_at_limit(self) -> str | None:
        return None  # (no limit of its own: polled RSS is checked instead)

    async def destroy(self, written: Iterable[Path] = ()) -> None:
        return None


class PosixIsolator:
    kind = "posix"
    enforces_memory = False

    async def prepare(self, name: str, resources: Resources, principal: str = "") -> Container:
        return PosixContainer(name)

    def adopt(
        self, name: str, principal: str | None = None, resources: Resources | None = None
    ) -> Container:
        return PosixContainer(name)

    async def recover(self, keep: set[str]) -> list[str]:
        return []

    async def usage(self, running: list[tuple[Container, int]]) -> list[Usage]:
        by_group = await asyncio.to_thread(groups_usage, {pgid for _, pgid in running})
        return [by_group[pgid] for _, pgid in running]

    async def close(self) -> None:
        return None


def groups_usage(pgids: set[int]) -> dict[int, Usage]:
    """CPU and resident memory of process groups, from /proc (posix has no cgroup): one
    pass over /proc for all of them."""
    hz = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    wanted = {str(g): Usage() for g in pgids}
    for fields in _processes():
        if len(fields) > 21 and (usage := wanted.get(fields[2])) is not None:
            usage.cpu_user_seconds += int(fields[11]) / hz
            usage.cpu_system_seconds += int(fields[12]) / hz
            usage.memory_bytes += int(fields[21]) * page
    for usage in wanted.values():
        usage.memory_peak_bytes = usage.memory_bytes  # (posix keeps no peak)
    return {int(g): usage for g, usage in wanted.items()}


def group_alive(pgid: int) -> bool:
    """Whether a process group has a member that is not a zombie (a SIGKILLed process
    lives on until the kernel next runs it; a zombie holds nothing but its pid)."""
    group = str(pgid)
    return any(len(f) > 2 and f[2] == group and f[0] != "Z" for f in _processes())


def _processes() -> Iterator[list[str]]:
    """Each process's /proc/PID/stat fields after its name (state, ppid, pgrp, ...)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # (gone meanwhile)
        yield stat[stat.rfind(")") + 2 :].split()


async def group_ended(pgid: int, timeout: float) -> bool:
    """Wait, at most `timeout` seconds, until a killed process group's members are gone
    (they are no children of ours, so there is nothing to wait on but /proc)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await asyncio.to_thread(group_alive, pgid):
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(GROUP_POLL)
    return True


GROUP_POLL = 0.02  # seconds between looks at a killed group


# -- cgroups ----------------------------------------------------------------------------------


class CgroupContainer:
    def __init__(
        self,
        cgroups: Cgroups,
        path: str,
        name: str,
        upkeep: Upkeep,
        ended: Callable[[str], None] = lambda path: None,
    ) -> None:
        self.cgroups = cgroups
        self.path = path
        self.name = name
        self.upkeep = upkeep
        self.ended = ended  # (its group's bound lowered once its processes are gone)

    @property
    def cgroup(self) -> str | None:
        return self.path

    def join(self) -> tuple[str, dict[str, str]]:
        files = " ".join(str(f) for f in self.cgroups.procs_files(self.path))
        return JOIN, {"DRFMESOS_CGROUP_PROCS": files}

    async def limitation(self) -> str | None:
        # (a few small cgroupfs reads: no disk behind them, cheaper than a thread hop)
        if self.cgroups.oom_kills(self.path) == 0:
            return None
        limit = self.cgroups.memory_limit(self.path) or 0
        return out_of_memory(limit, self.cgroups.usage(self.path).memory_peak_bytes)

    def peaked_at_limit(self) -> str | None:
        limit = self.cgroups.memory_limit(self.path)
        peak = self.cgroups.usage(self.path).memory_peak_bytes
        if not limit or peak < limit:
            return None
        return out_of_memory(limit, peak)

    async def destroy(self, written: Iterable[Path] = ()) -> None:
        # what the task left running (a double fork) dies before its end is told; most
        # tasks leave nothing, and their cgroup's removal waits off the task's path
        if self.cgroups.pids(self.path):
            try:
                await asyncio.to_thread(self.cgroups.kill, self.path)
            except OSError as e:  # (the removal tries again)
                logs.get("slave").warning("isolation.kill_failed", cgroup=self.path, error=str(e))
        self.ended(self.path)
        self.upkeep.add(self.path, written)


def out_of_memory(limit: int, peak: int) -> str:
    """What a task the kernel killed at its memory limit says."""
    return (
        f"out of memory: the kernel killed it at its limit of {limit / MB:g} MB "
        f"(peak {peak / MB:.0f} MB): raise the task's mem or use less"
    )


class CgroupsIsolator:
    kind = "cgroups"
    enforces_memory = True

    def __init__(
        self,
        cgroups: Cgroups,
        slave_id: str,
        cfs: bool = False,
        pids: PidShares | None = None,
        cpus: float | None = None,
    ) -> None:
        self.cgroups = cgroups
        self.parent = f"{PARENT}/{slave_id}"
        self.cfs = cfs
        self.pids = pids  # each task's bound of processes (None: none)
        self.cpus = cpus  # the cpus the slave offers: its tasks' weight together
        self._parent_made = False
        self._sealed = False
        self.log = logs.get("slave", slave_id=slave_id)
        self.upkeep = Upkeep(cgroups, self.parent, self.log)
        self.groups = PrincipalGroups(cgroups, pids)  # each principal's tasks, together
        self._lock: int | None = None  # the parent's directory, locked while we run
        self._live: dict[str, str] = {}  # each live container's cgroup, by its name
        self._groups: dict[str, str] = {}  # each principal's group's cgroup
        self._sweep: asyncio.Task[None] | None = None

    def _make_parent(self) -> None:
        """The slave's parent cgroup weighs, against the host's other processes, as many
        cpus as the slave offers (and drfmesos/ as the host's cores, all slaves on it
        together): left at the default, one cpu's, the slave's tasks together would get
        one core's weight under contention however many cpus DRF gave them."""
        if self._parent_made:
            return
        self._parent_made = True
        if self.cpus:
            self.cgroups.create(PARENT, Limits(cpus=float(os.cpu_count() or 1)))
            together = self.pids.together() if self.pids is not None else None
            self.cgroups.create(self.parent, Limits(cpus=self.cpus, max_pids=together))

    async def _hold(self) -> None:
        """The parent locked from the isolator's first use on (recovery, or a first task
        where none ran): unlocked, another slave's sweep takes it for a gone slave's and
        removes a principal's group made a moment before its task's cgroup."""
        if self._lock is None:
            self._lock = await asyncio.to_thread(hold, self.cgroups, self.parent, self.log)
            self._seal_parents()

    async def prepare(self, name: str, resources: Resources, principal: str = "") -> Container:
        await self._hold()
        amounts = resources.quantities()  # (reserved cpus are cpus)
        limits = Limits(
            cpus=amounts.get("cpus") or 0.0,
            mem_mb=amounts.get("mem"),
            cfs=self.cfs,
            max_pids=self.pids.of(resources) if self.pids is not None else None,
        )
        self._make_parent()
        # (an executor's container, resized, stays in the group it is in)
        path = self._live.get(name) or f"{self._group(principal)}/{name}"
        group = os.path.dirname(path)
        container = self._container(name, path)
        if path in self.upkeep:  # (a task id used again, its old cgroup due)
            await self.upkeep.take_back(path)
        # (its first launch here, or the first since it emptied: it may have gone since)
        if self.groups.empty(group) and not await self.upkeep.busy(group):
            self.groups.forget(group)
        # in the loop, not a thread: the group's bound raised, a spare renamed (v1) and
        # what of its limits differs (none, for a recycled one of a task loop's), no disk
        # behind them, well under a millisecond; a thread hop per task costs as much
        before = self.groups.join(path, resources)
        try:
            self.groups.write(group)  # (first: the task's bound is within its group's)
            spare = self.upkeep.spare(limits, group)
            made_ahead, held = spare or (None, None)
            self.upkeep.limits.pop(path, None)  # (known again once all is written)
            if not self.cgroups.create(path, limits, made_ahead, held) and spare:
                self.upkeep.unused(spare)  # (the container was there: an executor's, resized)
        except OSError:
            self._left(path, before)
            raise
        self._live[name] = path
        self.upkeep.limits[path] = limits
        if not self._sealed:  # (the parents are there in every hierarchy now)
            self._sealed = True
            self._seal_parents()
        return container

    def adopt(
        self, name: str, principal: str | None = None, resources: Resources | None = None
    ) -> CgroupContainer:
        if principal is None:
            return self._container(name, f"{self.parent}/{name}")
        path = f"{self._group(principal)}/{name}"
        if resources is not None:
            self.groups.join(path, resources)  # (its group's bound written at `recover`)
            self._live[name] = path
        return self._container(name, path)

    def _group(self, principal: str) -> str:
        """A principal's group's cgroup (its name escaped once)."""
        if (group := self._groups.get(principal)) is None:
            group = self._groups[principal] = f"{self.parent}/{group_name(principal)}"
        return group

    def _container(self, name: str, path: str) -> CgroupContainer:
        return CgroupContainer(self.cgroups, path, name, self.upkeep, self._ended)

    def _ended(self, path: str) -> None:
        """A container's processes are gone: its group's bound is lowered, and a group
        left empty goes a while later (unless its principal launches again)."""
        if self._live.get(os.path.basename(path)) == path:
            del self._live[os.path.basename(path)]
        self._left(path)

    def _left(self, path: str, before: tuple[float, float] | None = None) -> None:
        try:
            emptied = self.groups.leave(path, before)
        except OSError as e:  # (its group's bound stays higher until its next change)
            self.log.warning("isolation.group_bound_failed", cgroup=path, error=str(e))
            return
        if emptied is not None:
            self.upkeep.idle(emptied)

    def _seal_parents(self) -> None:
        """drfmesos/ and this slave's parent: a task passes them to its own cgroup (its
        path is in /proc/self/cgroup), never lists them (a few chmods: at the start,
        where they are, and at the first launch, which makes them where they are not)."""
        for name in (PARENT, self.parent):
            try:
                self.cgroups.seal(name)
            except OSError as e:  # (tasks then see each other's cgroups: said, not fatal)
                self.log.warning("isolation.seal_failed", cgroup=name, error=str(e))

    async def recover(self, keep: set[str]) -> list[str]:
        """Destroy the cgroups this slave's previous run left that no recovered task
        owns; and remove what slaves that are gone left (cgroup_upkeep.sweep)."""
        await self._hold()
        stale = await asyncio.to_thread(self._stale, keep)
        for path in stale:
            if not is_spare(path) and not is_group(path):  # (spares it had made: no one's)
                self.log.warning("isolation.orphan_cgroup_destroyed", cgroup=path)
        await asyncio.to_thread(self._destroy_all, stale)
        for group in self.groups.groups():  # (as its recovered tasks say, not as it was)
            try:
                self.groups.write(group)
            except OSError as e:
                self.log.warning("isolation.group_bound_failed", cgroup=group, error=str(e))
        # what slaves that are gone left: housekeeping, not in the way of the start
        self._sweep = asyncio.create_task(self._sweep_gone(), name="cgroup-sweep")
        return stale

    def _stale(self, keep: set[str]) -> list[str]:
        """The cgroups under the parent that are not in `keep`, two levels down: the
        groups' containers, then a group none of them is kept in (its spares too); a
        container right under the parent is a slave's before the groups."""
        stale: list[str] = []
        for child in self.cgroups.children(self.parent):
            if not is_group(child):
                stale += [] if child in keep else [child]
                continue
            inside = self.cgroups.children(child)
            stale += [c for c in inside if c not in keep]
            if not any(c in keep for c in inside):
                stale.append(child)  # (after what is in it)
        return stale

    def _destroy_all(self, paths: list[str]) -> None:
        for path in paths:
            self.cgroups.destroy(path)

    async def _sweep_gone(self) -> None:
        try:
            swept = await asyncio.to_thread(sweep, self.cgroups, PARENT, self.parent)
        except OSError as e:  # (the next slave to start looks again)
            self.log.warning("isolation.sweep_failed", error=str(e))
            return
        if swept:
            self.log.info("isolation.gone_slaves_cgroups_removed", cgroups=len(swept))

    async def close(self) -> None:
        if self._sweep is not None:
            await self._sweep  # (a thread: it finishes its look)
        await self.upkeep.close()
        await asyncio.to_thread(self._remove_empty)

    def _remove_empty(self) -> None:
        """The groups with nothing left in them, then the parent if it is left empty (the
        tasks left running keep theirs)."""
        for group in self.cgroups.children(self.parent):
            if is_group(group) and not self.cgroups.children(group):
                with contextlib.suppress(OSError):
                    self.cgroups.destroy(group)
        if not self.cgroups.children(self.parent):
            with contextlib.suppress(OSError):
                self.cgroups.destroy(self.parent)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    async def usage(self, running: list[tuple[Container, int]]) -> list[Usage]:
        # a few small cgroupfs reads a container: no disk, cheaper than a thread hop
        return [self.cgroups.usage(self.path_of(c)) for c, _ in running]

    def path_of(self, container: Container) -> str:
        return container.cgroup or f"{self.parent}/{container.name}"


def make_isolator(
    kind: str,
    slave_id: str,
    root: Path = Path("/sys/fs/cgroup"),
    cfs: bool = False,
    pids: PidShares | None = None,
    cpus: float | None = None,
) -> Isolator:
    """`kind` is cgroups, posix, or auto (cgroups where the hierarchy is writable)."""
    from slave.cgroups import detect

    if kind == "posix":
        return PosixIsolator()
    pids = pids if pids is not None and pids.bounded else None
    found = detect(root, pids=pids is not None)
    log = logs.get("slave", slave_id=slave_id)
    if isinstance(found, str):
        if kind == "cgroups":
            raise ValueError(f"--isolation cgroups is not possible here: {found}")
        log.warning("isolation.posix_fallback", why=found)
        return PosixIsolator()
    if pids is not None and not _has_pids(found, root):
        why = "this host has no pids controller: a task's processes and threads are unbounded"
        if kind == "cgroups":
            raise ValueError(f"--isolation cgroups: {why} (--max-task-pids 0 runs so)")
        log.warning("isolation.pids_unbounded", why=why, fix="mount the pids controller")
        pids = None
    return CgroupsIsolator(found, slave_id, cfs, pids, cpus)


def _has_pids(found: Cgroups, root: Path) -> bool:
    """Whether the pids controller is there to bound tasks with (v1: its hierarchy; v2:
    among the root's controllers)."""
    if found.version == 1:
        return (root / "pids" / "cgroup.procs").exists()
    try:
        return "pids" in (root / "cgroup.controllers").read_text().split()
    except OSError:
        return False
