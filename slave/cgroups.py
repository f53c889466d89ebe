"""Control groups, v1 or v2: make one per container, set its limits, read its accounting.

Both versions sit behind `Cgroups`. Every path starts from a root (/sys/fs/cgroup), so
the tests can point it at a fake tree. A cgroup is named by its path under the root
("drfmesos/<slave-id>/<container>"), the same in every v1 hierarchy.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slave import cgroupfs as fs

PERIOD_US = 100_000  # CFS period: the quota is the cpus' share of it
MIN_QUOTA_US = 1_000  # the kernel refuses less
MB = 1024 * 1024
SEALED = 0o711  # the slave's parent cgroups: others pass, do not list


@dataclass(frozen=True)
class Limits:
    cpus: float
    mem_mb: float | None = None
    cfs: bool = False  # a hard cap of `cpus`, not only a weight
    max_pids: int | None = None


@dataclass
class Usage:
    cpu_user_seconds: float = 0.0
    cpu_system_seconds: float = 0.0
    cpu_throttled_seconds: float = 0.0
    memory_bytes: int = 0
    memory_peak_bytes: int = 0


class Cgroups(Protocol):
    version: int

    def create(
        self, name: str, limits: Limits, spare: str | None = None, held: Limits | None = None
    ) -> bool:
        """Make it (or set the limits of one there) with `limits`. `spare`: an empty
        cgroup made ahead beside it (`make_spare`, or `recycle`), renamed to `name` where
        the kernel can (v1): no mkdir on the task's path; `held`: the limits a recycled
        spare still has (only what differs is written), None for a new one's defaults.
        True if the spare was used."""
        ...

    def limit(self, name: str, limits: Limits, held: Limits) -> None:
        """Set the limits of a cgroup that is there (a principal's group, its tasks come
        and go), `held` what it holds: only what differs is written."""
        ...

    def make_spare(self, name: str) -> bool:
        """Make an empty cgroup ahead, with no limits (blocking: from a thread). False if
        this version cannot rename one into a container (v2)."""
        ...

    def recycle(self, finished: dict[str, tuple[str, Limits]]) -> set[str]:
        """(Blocking: from a thread.) Rename each finished cgroup (its task's processes
        gone) to a spare's name (`finished`: that name, and the limits the cgroup holds)
        for another task, if it is surely as good as new once its counters are reset: no
        process or cgroup left in it, nothing charged to its memory (no page of its task's
        to charge the next), no OOM kill and no CFS throttling counted (neither count can
        be reset); then its peaks and CPU time are reset. The ones recycled; the others
        are removed as before. None on v2 (cgroup2 renames no cgroup)."""
        ...

    def procs_files(self, name: str) -> list[Path]:
        """Where a single-threaded process (the task's shell) writes 0 to join the cgroup
        (one file per hierarchy)."""
        ...

    def seal(self, name: str) -> None:
        """Others may pass its directory (to their own cgroup below), not list it, and
        read none of its files: a task never learns the other tasks' cgroups' names, nor
        reads the usage of the cgroups above them (a principal's group is named after the
        principal: review 79, one tenant's task read another's processes, memory and CPU
        time from its group's counters)."""
        ...

    def pids(self, name: str) -> list[int]: ...

    def usage(self, name: str) -> Usage: ...

    def oom_kills(self, name: str) -> int: ...

    def memory_limit(self, name: str) -> int | None: ...

    def uncharged(self, name: str) -> bool:
        """Nothing at all is charged to its memory cgroup (its processes gone): no page
        cache to keep it as a zombie, it can go at once."""
        ...

    def children(self, parent: str) -> list[str]: ...

    def lock_dir(self, name: str) -> Path:
        """The directory a live slave holds locked (flock) for its parent cgroup `name`."""
        ...

    def kill(self, name: str) -> None:
        """SIGKILL every process in it and in the cgroups below it (podman's), until none
        is left, and remove the cgroups below it (blocking: call it from a thread)."""
        ...

    def release(self, name: str, force: bool = False, memory: bool = True) -> bool:
        """Remove it, empty of processes, leaving the kernel no zombie: a memory cgroup
        still charged with page cache is kept while any of it is dirty (the kernel could
        not drop it, and it would outlive the rmdir, unseen, holding one of the kernel's
        64K memory cgroup ids) unless `force`; its clean cache is dropped, then it is
        removed. Not `memory`: all but the memory cgroup (v1; v2 has one). True once it is
        gone."""
        ...

    def destroy(self, name: str) -> None:
        """Kill every process in it and remove it (blocking: call it from a thread)."""
        ...


def _root_only(d: Path) -> None:
    """Its control files (0444 or 0644 as the kernel makes them, its counters among them)
    for root alone: its owner's bits kept, the others' taken (a few dozen chmods, once a
    cgroup: the slave's parents and each principal's group)."""
    with os.scandir(d) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                mode = entry.stat(follow_symlinks=False).st_mode
                if mode & 0o077:
                    os.chmod(entry.path, mode & 0o700)


def shares(cpus: float) -> int:
    return min(262_144, max(2, round(1024 * cpus)))  # (the kernel's bounds)


def weight(cpus: float) -> int:
    """v2's cpu.weight: 100 is the default, as 1024 shares in v1 (one cpu)."""
    return min(10_000, max(1, round(100 * cpus)))


def _bytes(mem_mb: float | None) -> int:
    """A memory limit in bytes, -1 for none (as v1 writes and reads it: unlimited)."""
    return -1 if mem_mb is None else int(mem_mb * MB)


def quota_us(cpus: float) -> int:
    return max(MIN_QUOTA_US, round(cpus * PERIOD_US))


class CgroupsV1:
    """One hierarchy per controller (cpu and cpuacct are often one mount: used once)."""

    version = 1
    CONTROLLERS = ("cpu", "cpuacct", "memory", "pids")

    def __init__(self, root: Path, pids: bool = True) -> None:
        self.root = root
        # without a pids limit the pids hierarchy is left out: each hierarchy costs a
        # mkdir, a migration and an rmdir a task
        wanted = [c for c in self.CONTROLLERS if pids or c != "pids"]
        self.mounts = {c: root / c for c in wanted if (root / c).is_dir()}
        self.hierarchies = fs.distinct(self.mounts.values())
        # a task's shell joins the memory hierarchy last: what opening another's file
        # allocates once it is in it stays charged there (the kernel's slab pages), and
        # the cgroup is not recycled as new then
        memory = self.mounts.get("memory")
        self._join_order = sorted(self.hierarchies, key=lambda mount: mount == memory)
        # cleaning looks in every hierarchy: a slave started before with a pids limit used
        # that one, and podman (a task's image) makes the task's path in all of them
        self.all_hierarchies = fs.distinct(
            sorted(p for p in root.iterdir() if (p / "cgroup.procs").exists())
        )
        # swap accounting is on (each memory cgroup has a memory+swap limit too)
        self.memsw = (root / "memory" / "memory.memsw.limit_in_bytes").exists()
        # TCP buffers are charged to a v1 memory cgroup only once its TCP limit is set (v2
        # charges them to its memory): unset, a 64 MB task queued 1.26 GB in its sockets'
        # buffers (300 loopback connections), the host's to give, past every tenant's limit
        self.tcp = (root / "memory" / "memory.kmem.tcp.limit_in_bytes").exists()
        # each mount held open: the paths of a task's cgroups are walked from there (fs.At)
        self._fds = {
            m: os.open(m, os.O_PATH | os.O_DIRECTORY)
            for m in {*self.hierarchies, *self.all_hierarchies}
        }

    def __del__(self) -> None:
        for fd in getattr(self, "_fds", {}).values():
            with contextlib.suppress(OSError):
                os.close(fd)

    def _in(self, mount: Path, name: str) -> fs.At:
        return fs.At(self._fds[mount], name)

    def _at(self, controller: str, name: str) -> fs.At | None:
        mount = self.mounts.get(controller)
        return self._in(mount, name) if mount is not None else None

    def make_spare(self, name: str) -> bool:
        for mount in self.hierarchies:
            fs.mkdir(self._in(mount, name))
        return True

    def create(
        self, name: str, limits: Limits, spare: str | None = None, held: Limits | None = None
    ) -> bool:
        used = spare is not None and fs.rename_all(
            [self._fds[m] for m in self.hierarchies], spare, name
        )
        new = True  # (its memory cgroup: a spare's is as new)
        if not used:
            made = {m: fs.mkdir(self._in(m, name)) for m in self.hierarchies}
            if (memory := self.mounts.get("memory")) is not None:
                new = made[memory]
            held = None
        self._write(name, limits, held, new)
        return used

    def limit(self, name: str, limits: Limits, held: Limits) -> None:
        self._write(name, limits, held, False)

    def _write(self, name: str, limits: Limits, held: Limits | None, new: bool) -> None:
        """Only what differs from a new cgroup's defaults (`held` None), or from what it
        holds, is written (the CFS period is the kernel's default, PERIOD_US); `new`: its
        memory cgroup was just made (else an executor's, resized: its limit is read)."""
        if (cpu := self._at("cpu", name)) is not None:
            if held is None or shares(held.cpus) != shares(limits.cpus):
                fs.write(cpu / "cpu.shares", shares(limits.cpus))
            quota = quota_us(limits.cpus) if limits.cfs else -1
            if (limits.cfs and held is None) or (
                held is not None and quota != (quota_us(held.cpus) if held.cfs else -1)
            ):
                fs.write(cpu / "cpu.cfs_quota_us", quota)
        if (mem := self._at("memory", name)) is not None:
            if held is not None:
                self._memory(mem, _bytes(limits.mem_mb), _bytes(held.mem_mb))
            elif limits.mem_mb is not None:
                was = -1 if new else fs.read_int(mem / "memory.limit_in_bytes")
                self._memory(mem, _bytes(limits.mem_mb), was)
        if (pids := self._at("pids", name)) is not None:
            if limits.max_pids is not None and (held is None or held.max_pids != limits.max_pids):
                fs.write(pids / "pids.max", limits.max_pids)
            elif limits.max_pids is None and held is not None and held.max_pids is not None:
                fs.write(pids / "pids.max", "max")

    def _memory(self, mem: fs.At, limit: int, was: int) -> None:
        """Set its memory limit (-1: none) from `was` (-1: none, a new cgroup's), and on v1
        its TCP buffers' to the same."""
        if self.tcp:  # (even where memory's stands: a shrink refused before left it higher)
            self._tcp(mem, limit)
        if limit == was:
            return
        files = ["memory.limit_in_bytes"]
        if self.memsw:
            # memory <= memory+swap at every step: to grow, memsw goes first (a new
            # cgroup's limits are unlimited: memory first)
            growing = was != -1 and (limit == -1 or limit > was)
            files.insert(0 if growing else 1, "memory.memsw.limit_in_bytes")
        for file in files:
            fs.write(mem / file, limit)

    def _tcp(self, mem: fs.At, limit: int) -> None:
        """Its TCP buffers held to `limit` (as much again as its memory, at most). Below
        what its buffers hold now the kernel refuses it (EBUSY: TCP is no part of the
        memory usage a shrink's floor reads): it stays as it was until the next change.
        A kernel that does not take it at all is asked no more."""
        try:
            fs.write(mem / "memory.kmem.tcp.limit_in_bytes", limit)
        except OSError as e:
            if e.errno != errno.EBUSY:
                self.tcp = False

    def recycle(self, finished: dict[str, tuple[str, Limits]]) -> set[str]:
        if not finished:
            return set()
        # podman's: a task's path made in other hierarchies (where the slave's parent is)
        parents = {os.path.dirname(name) for name in finished}
        others = [
            m
            for m in self.all_hierarchies
            if m not in self.hierarchies and any(fs.isdir(self._in(m, p)) for p in parents)
        ]
        fds = [self._fds[m] for m in self.hierarchies]
        done: set[str] = set()
        for name, (spare, held) in finished.items():
            try:
                if any(fs.isdir(self._in(m, name)) for m in others):
                    continue
                if self._as_new(name, held):
                    self.reset(name)
                    if fs.rename_all(fds, name, spare):
                        done.add(name)
            except OSError:  # (removed instead)
                continue
        return done

    def _as_new(self, name: str, held: Limits) -> bool:
        """Nothing of its last task is left in it but counters that `reset` resets."""
        # (what fails most often first: a task that wrote a file left its page cache)
        if (mem := self._at("memory", name)) is not None:
            # (memory+swap holds memory: one read; kernel memory is charged to it too)
            charged = "memory.memsw.usage_in_bytes" if self.memsw else "memory.usage_in_bytes"
            if fs.read_int(mem / charged, -1) != 0:
                return False
            if self.tcp and fs.read_int(mem / "memory.kmem.tcp.usage_in_bytes", -1) != 0:
                return False  # (a socket of its last task's holds buffers: made anew)
            if fs.keyed(mem / "memory.oom_control").get("oom_kill", -1) != 0:
                return False
        for mount in self.hierarchies:
            at = self._in(mount, name)
            if fs.subdirs(at) != 0 or fs.procs(at):
                return False
        # (a cgroup with no CFS quota of its own is never throttled: its parents have none)
        cpu = self._at("cpu", name)
        return not (
            held.cfs and cpu is not None and fs.keyed(cpu / "cpu.stat").get("nr_throttled", -1)
        )

    def reset(self, name: str) -> None:
        """Its memory peaks (to what is charged now) and CPU time reset; OSError if not."""
        if (mem := self._at("memory", name)) is not None:
            fs.write(mem / "memory.max_usage_in_bytes", 0)
            if self.memsw:
                fs.write(mem / "memory.memsw.max_usage_in_bytes", 0)
            if self.tcp:
                fs.write(mem / "memory.kmem.tcp.max_usage_in_bytes", 0)
        if (acct := self._at("cpuacct", name)) is not None:
            fs.write(acct / "cpuacct.usage", 0)  # (its user and system times with it)

    def procs_files(self, name: str) -> list[Path]:
        # `tasks`, not cgroup.procs: moving the writing thread alone (the shell's only one)
        # takes no global lock, where moving a process waits for an RCU grace period (12
        # ms at p90 on this machine, up to 50, per task). The memory hierarchy's last
        # (`_join_order`).
        return [mount / name / "tasks" for mount in self._join_order]

    def seal(self, name: str) -> None:
        # in every hierarchy, made where missing: an image task's podman makes its path in
        # the ones the slave does not use, 0755, and a tenant listed the principals and
        # other tenants' task ids there
        for mount in self.all_hierarchies:
            with contextlib.suppress(FileExistsError):
                os.makedirs(mount / name, mode=SEALED)
            os.chmod(mount / name, SEALED)
            _root_only(mount / name)

    def pids(self, name: str) -> list[int]:
        # (one hierarchy: a process joins all of ours before it runs anything)
        return sorted(fs.procs(self._in(self.hierarchies[-1], name)))

    def usage(self, name: str) -> Usage:
        usage = Usage()
        if (acct := self._at("cpuacct", name)) is not None:
            if (user := fs.read_int(acct / "cpuacct.usage_user", -1)) >= 0:
                usage.cpu_user_seconds = user / 1e9
                usage.cpu_system_seconds = fs.read_int(acct / "cpuacct.usage_sys") / 1e9
            else:  # older kernels: ticks of USER_HZ
                stat = fs.keyed(acct / "cpuacct.stat")
                hz = os.sysconf("SC_CLK_TCK")
                usage.cpu_user_seconds = stat.get("user", 0) / hz
                usage.cpu_system_seconds = stat.get("system", 0) / hz
        if (cpu := self._at("cpu", name)) is not None:
            usage.cpu_throttled_seconds = fs.keyed(cpu / "cpu.stat").get("throttled_time", 0) / 1e9
        if (mem := self._at("memory", name)) is not None:
            usage.memory_bytes = fs.read_int(mem / "memory.usage_in_bytes")
            usage.memory_peak_bytes = fs.read_int(mem / "memory.max_usage_in_bytes")
        return usage

    def oom_kills(self, name: str) -> int:
        mem = self._at("memory", name)
        return fs.keyed(mem / "memory.oom_control").get("oom_kill", 0) if mem else 0

    def memory_limit(self, name: str) -> int | None:
        mem = self._at("memory", name)
        return fs.read_int(mem / "memory.limit_in_bytes") if mem else None

    def uncharged(self, name: str) -> bool:
        mem = self._at("memory", name)
        return mem is None or fs.read_int(mem / "memory.usage_in_bytes", -1) == 0

    def children(self, parent: str) -> list[str]:
        names: set[str] = set()
        for mount in self.all_hierarchies:
            with contextlib.suppress(OSError):
                names.update(e.name for e in os.scandir(mount / parent) if e.is_dir())
        return sorted(f"{parent}/{n}" for n in names)

    def lock_dir(self, name: str) -> Path:
        return self.hierarchies[0] / name

    def kill(self, name: str) -> None:
        fs.kill([m / name for m in self.all_hierarchies if (m / name).is_dir()])

    def release(self, name: str, force: bool = False, memory: bool = True) -> bool:
        mem = self.mounts.get("memory")
        parent = os.path.dirname(name)
        # ours, and the others where podman made the container's path (its parent's is
        # enough to look for: a failed rmdir costs more than a stat)
        gone = all(
            [
                fs.rmdir(self._in(m, name))
                for m in self.all_hierarchies
                if m != mem and (m in self.hierarchies or fs.isdir(self._in(m, parent)))
            ]
        )
        if mem is None:
            return gone
        if not memory:
            return False
        at, d = self._in(mem, name), mem / name
        drained = fs.drop_cache(
            fs.read_int(at / "memory.usage_in_bytes")
            - fs.read_int(at / "memory.kmem.usage_in_bytes"),
            d / "memory.stat",
            ("dirty", "writeback"),
            d / "memory.force_empty",
            force,
        )
        return drained and fs.rmdir(at) and gone

    def destroy(self, name: str) -> None:
        self.kill(name)
        if not self.release(name):
            self.release(name, force=True)


class CgroupsV2:
    """The unified hierarchy: controllers are enabled for children by each parent."""

    version = 2
    CONTROLLERS = ("cpu", "memory", "pids")

    def __init__(self, root: Path) -> None:
        self.root = root
        # parents whose children have our controllers: which of them they have (`detect`
        # makes sure of cpu and memory at the root; a test may use a root without them)
        self._enabled: dict[Path, set[str]] = {}

    def _enable_controllers(self, parent: Path) -> set[str]:
        if (enabled := self._enabled.get(parent)) is not None:
            return enabled
        available = set(fs.read(parent / "cgroup.controllers").split())
        wanted = [c for c in self.CONTROLLERS if c in available]
        if wanted:
            fs.write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        self._enabled[parent] = set(wanted)
        return self._enabled[parent]

    def make_spare(self, name: str) -> bool:
        return False  # (cgroup2 renames no cgroup)

    def recycle(self, finished: dict[str, tuple[str, Limits]]) -> set[str]:
        return set()  # (nor can memory.peak be reset before kernel 6.12)

    def create(
        self, name: str, limits: Limits, spare: str | None = None, held: Limits | None = None
    ) -> bool:
        path = self.root
        for part in name.split("/"):
            enabled = self._enable_controllers(path)
            path = path / part
            path.mkdir(exist_ok=True)
        if "cpu" in enabled:
            fs.write(path / "cpu.weight", weight(limits.cpus))
            if limits.cfs:
                fs.write(path / "cpu.max", f"{quota_us(limits.cpus)} {PERIOD_US}")
        if "memory" in enabled and limits.mem_mb is not None:
            fs.write(path / "memory.max", int(limits.mem_mb * MB))
            if (path / "memory.swap.max").exists():  # no swap: the limit is the limit
                fs.write(path / "memory.swap.max", 0)
        if "pids" in enabled and limits.max_pids is not None:
            fs.write(path / "pids.max", limits.max_pids)
        return False

    def limit(self, name: str, limits: Limits, held: Limits) -> None:
        path = self.root / name
        enabled = self._enable_controllers(path.parent)  # (known: it made `name`)
        if "cpu" in enabled and weight(limits.cpus) != weight(held.cpus):
            fs.write(path / "cpu.weight", weight(limits.cpus))
        if "pids" in enabled and limits.max_pids != held.max_pids:
            fs.write(path / "pids.max", "max" if limits.max_pids is None else limits.max_pids)

    def procs_files(self, name: str) -> list[Path]:
        return [self.root / name / "cgroup.procs"]

    def seal(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(self.root / name, SEALED)
            _root_only(self.root / name)

    def pids(self, name: str) -> list[int]:
        return fs.procs(self.root / name)

    def usage(self, name: str) -> Usage:
        path = self.root / name
        cpu = fs.keyed(path / "cpu.stat")
        current = fs.read_int(path / "memory.current")
        return Usage(
            cpu_user_seconds=cpu.get("user_usec", 0) / 1e6,
            cpu_system_seconds=cpu.get("system_usec", 0) / 1e6,
            cpu_throttled_seconds=cpu.get("throttled_usec", 0) / 1e6,
            memory_bytes=current,
            memory_peak_bytes=fs.read_int(path / "memory.peak", current),  # (kernel 5.19+)
        )

    def oom_kills(self, name: str) -> int:
        return fs.keyed(self.root / name / "memory.events").get("oom_kill", 0)

    def uncharged(self, name: str) -> bool:
        return fs.read_int(self.root / name / "memory.current", -1) == 0

    def memory_limit(self, name: str) -> int | None:
        raw = ""
        with contextlib.suppress(OSError):
            raw = fs.read(self.root / name / "memory.max").strip()
        return int(raw) if raw.isdigit() else None

    def children(self, parent: str) -> list[str]:
        with contextlib.suppress(OSError):
            return sorted(
                f"{parent}/{e.name}" for e in os.scandir(self.root / parent) if e.is_dir()
            )
        return []

    def lock_dir(self, name: str) -> Path:
        return self.root / name

    def kill(self, name: str) -> None:
        path = self.root / name
        if path.is_dir():
            fs.kill([path], path / "cgroup.kill")

    def release(self, name: str, force: bool = False, memory: bool = True) -> bool:
        d = self.root / name
        if not memory:
            return False
        drained = fs.drop_cache(
            fs.read_int(d / "memory.current") - fs.keyed(d / "memory.stat").get("kernel", 0),
            d / "memory.stat",
            ("file_dirty", "file_writeback"),
            d / "memory.reclaim",  # (kernel 5.19+; without it, nothing is dropped)
            force,
        )
        return drained and fs.rmdir(d)

    def destroy(self, name: str) -> None:
        self.kill(name)
        if not self.release(name):
            self.release(name, force=True)


def detect(root: Path = Path("/sys/fs/cgroup"), pids: bool = True) -> Cgroups | str:
    """The cgroups this host lets us write, or why not (a sentence for the warning)."""
    if (root / "cgroup.controllers").exists():  # cgroup v2 mounted at the root
        available = set(fs.read(root / "cgroup.controllers").split())
        missing = {"cpu", "memory"} - available
        if missing:
            return f"cgroup v2 at {root} lacks the {', '.join(sorted(missing))} controller"
        if not os.access(root, os.W_OK):
            return f"cgroup v2 at {root} is not writable by this user"
        return CgroupsV2(root)
    needed = [root / c for c in ("cpu", "memory")]
    if not all((d / "cgroup.procs").exists() for d in needed):
        return f"no cgroup v1 cpu and memory hierarchies under {root}"
    if not all(os.access(d, os.W_OK) for d in needed):
        return f"the cgroup hierarchies under {root} are not writable by this user"
    return CgroupsV1(root, pids)
