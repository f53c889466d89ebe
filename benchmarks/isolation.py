"""Isolation: does a slave hold its tasks to what DRF gave them, and at what cost?

    python -m benchmarks.isolation [--seconds 10] [--tasks 200] [--pairs 16] [--window 3]
    python -m benchmarks.isolation --loop-only [--pairs 16] [--window 3]
    python -m benchmarks.isolation --tenants [--count 2000] [--rounds 3]

Each run is mosquitto, a master process and one real slave process (`drfmesos slave`,
command tasks), driven by frameworks on the public SDK in this process. Needs root and a
writable cgroup hierarchy (the slave is started with `--isolation cgroups`).

- CPU: a task of 0.25 cpus spinning two processes, `--cgroups-enable-cfs`; its CPU-s/s
  over a window (from /proc, the same reading for both modes), beside posix.
- memory: a task of 64 MB that touches 16 MB more every 10 ms; how far it got (the last
  size it printed) when it was stopped, beside posix.
- the task loop: `true` tasks as fast as offers come, tasks/s with cgroups / posix: a
  cgroups slave and a posix slave both up, the loop on each in turn for `--window`
  seconds, `--pairs` pairs of windows (loop_pairs); the figure is the median of the
  pairs' ratios, and it holds if its 95% confidence interval lies above the bound (a
  single run of this machine swings more than the modes differ). Beside it, the slave
  process's own CPU a task in each mode (its tasks' not counted): what a cgroups task
  costs the slave more, whatever the scheduler gives the tasks. `--loop-only` measures
  this alone and prints every pair.
- 200 tasks (`sleep`) under cgroups: the slave process's own CPU over a window (10 s at
  least) while it reports their usage every 5 s, the default (all the slave does then:
  a bound on the accounting's cost).
- `--tenants`, what keeping tenants apart costs (#45): `true` tasks through `drfmesos
  framework command --count 2000`, its whole run timed, on a slave with everything on
  (cgroups, each task as its principal's user, in a PID namespace of its own) and on a
  posix one (no cgroups, no user switch, no namespace: the slave before #45 as a
  non-root operator ran it), both up for the whole run, in turns: full then posix,
  posix then full, `--rounds` times. The figure is full / posix of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import bounds, table
from benchmarks.e2e import Flood
from cluster.local.view import wait_state
from cluster.testing.bytecode import keep_bytecode
from frameworks import (
    Filters,
    Offer,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskState,
    TaskStatus,
    build_task,
)
from frameworks.scheduler import Driver
from protocol import logs
from protocol.tooling.brokers import BrokerURL, MosquittoBroker
from protocol.transport.aio import within
from slave.isolator import PARENT, groups_usage, make_isolator

SPIN = f"{sys.executable} -c 'while True: pass'"
# prints how many MB it holds after each step, so its last line is how far it got
HOG = (
    f"{sys.executable} -u -c '"
    "import time\n"
    "a = []\n"
    "while True:\n"
    "    a.append(bytearray(16 * 2**20))\n"
    "    print(16 * len(a), flush=True)\n"
    "    time.sleep(0.01)'"
)


@dataclass
class Cluster:
    url: BrokerURL
    name: str
    work: Path
    slave: asyncio.subprocess.Process

    def sandbox(self, framework_id: str, task_id: str) -> Path:
        return self.work / "sandboxes" / framework_id / task_id


@contextlib.asynccontextmanager
async def cluster(isolation: str, *slave_args: str, resources: str) -> AsyncIterator[Cluster]:
    broker = MosquittoBroker()
    await broker.start()
    name, url = f"iso{os.getpid()}", broker.url
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    common = ["--broker", url.url, "--cluster", name, "--log-level", "warning"]
    # (not under /tmp, as an operator's: there a task's own /tmp would hide its sandbox, and
    # the slave gives tasks none, so the run would not pay for theirs)
    outside_tmp = "/var/lib" if os.geteuid() == 0 else None
    work = Path(tempfile.mkdtemp(prefix="drfmesos-iso-", dir=outside_tmp))
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "master", *common, "--allocation-interval", "0.2",
            env=env,
        ),
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "slave", *common, "--isolation", isolation,
            "--work-dir", str(work), "--resources", resources, *slave_args,
            env=env,
        ),
    ]  # fmt: skip
    try:
        await wait_state(url, name, lambda s: s.slaves_registered == 1, timeout=60)
        yield Cluster(url, name, work, procs[1])
    finally:
        for p in procs:
            p.terminate()
            await p.wait()
        await broker.stop()
        broker.cleanup()
        # a slave stopped leaves its tasks' cgroups for its next start: there is none
        if (work / "slave_id").exists() and isolation == "cgroups":
            slave_id = (work / "slave_id").read_text().strip()
            leftover = make_isolator("cgroups", slave_id)
            await leftover.recover(set())
            await leftover.close()
            LEFT.extend(await asyncio.to_thread(cgroups_of, slave_id))
        await asyncio.to_thread(shutil.rmtree, work, True)  # (its sandboxes, outside /tmp)


CGROUPS = Path("/sys/fs/cgroup")
LEFT: list[str] = []  # cgroups a benchmark's slave left behind, all cleaning done
ZOMBIES: list[int] = []  # memory cgroups the kernel holds more after a task loop


def cgroups_of(slave_id: str) -> list[str]:
    return [str(p) for p in CGROUPS.glob(f"*/{PARENT}/{slave_id}")]


def memory_cgroups() -> int:
    """Memory cgroups the kernel holds, removed ones it keeps (zombies) included."""
    with contextlib.suppress(OSError, StopIteration, IndexError), open("/proc/cgroups") as f:
        return int(next(line for line in f if line.startswith("memory")).split()[2])
    return 0


class Launch(Scheduler):
    """Launches `count` tasks of one command, then declines; remembers each one's last
    status."""

    def __init__(self, count: int, command: str, resources: Resources) -> None:
        self.count, self.command, self.resources = count, command, resources
        self.launched = 0
        self.framework_id = ""
        self.last: dict[str, TaskStatus] = {}
        # task ids by every state they reported: a STARTING re-sent (unacknowledged past
        # the slave's resend_after on a busy machine) may come after the RUNNING
        self.reached: dict[TaskState, set[str]] = {}
        self.changed = asyncio.Event()

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        self.framework_id = framework_id

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks, free = [], offer.resources
            while self.launched < self.count and free.contains(self.resources):
                free = free - self.resources
                self.launched += 1
                tasks.append(
                    build_task(
                        offer,
                        "t",
                        self.resources,
                        command=self.command,
                        task_id=f"t{self.launched}",
                    )
                )
            await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=3600))

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        self.last[status.task_id] = status
        self.reached.setdefault(status.state, set()).add(status.task_id)
        self.changed.set()

    async def until(self, condition: object, timeout: float = 120.0) -> None:
        async def wait() -> None:
            while not condition():  # type: ignore[operator]
                self.changed.clear()
                await self.changed.wait()

        await within(wait(), timeout)

    def ever(self, state: TaskState) -> int:
        return len(self.reached.get(state, ()))

    def in_state(self, state: TaskState) -> int:
        return sum(1 for s in self.last.values() if s.state == state)


@contextlib.asynccontextmanager
async def framework(c: Cluster, scheduler: Scheduler, name: str) -> AsyncIterator[None]:
    driver = SchedulerDriver(scheduler, name=name, broker=c.url, cluster=c.name, role=name)
    await driver.start()
    try:
        yield
    finally:
        driver.stop()
        await driver.join()


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pgid_of(pidfile: Path) -> int:
    with open(f"/proc/{int(pidfile.read_text())}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[2])


async def cpu_use(isolation: str, seconds: float) -> float:
    """CPU-s/s of a 0.25-cpu task spinning two processes."""
    async with cluster(isolation, "--cgroups-enable-cfs", resources="cpus:2;mem:1024") as c:
        launch = Launch(1, f"echo $$ > pid; {SPIN} & {SPIN} & wait", Resources(cpus=0.25, mem=64))
        async with framework(c, launch, "cpu"):
            await launch.until(lambda: launch.ever(TaskState.RUNNING) == 1)
            pidfile = c.sandbox(launch.framework_id, "t1") / "pid"
            for _ in range(200):  # the shell writes it just after RUNNING
                if pidfile.exists() and pidfile.read_text().strip():
                    break
                await asyncio.sleep(0.05)
            pgid = pgid_of(pidfile)
            await asyncio.sleep(1.0)  # both spinners up

            def used() -> float:
                u = groups_usage({pgid})[pgid]
                return u.cpu_user_seconds + u.cpu_system_seconds

            before, t0 = used(), time.monotonic()
            await asyncio.sleep(seconds)  # the window measured
            return (used() - before) / (time.monotonic() - t0)


async def memory_reach(isolation: str) -> tuple[float, str]:
    """How many MB a 64 MB task touching 16 MB every 10 ms held when stopped; and why."""
    async with cluster(isolation, resources="cpus:2;mem:2048") as c:
        launch = Launch(1, HOG, Resources(cpus=0.5, mem=64))
        async with framework(c, launch, "mem"):
            await launch.until(lambda: "t1" in launch.last and launch.last["t1"].state.terminal)
            lines = (c.sandbox(launch.framework_id, "t1") / "stdout").read_text().split()
            return float(lines[-1]) if lines else 0.0, launch.last["t1"].message


async def many_tasks(count: int, seconds: float) -> tuple[float, float]:
    """The slave's own CPU (fraction of a core) with `count` tasks under cgroups, their
    usage reported every 5 s (the default); and the same slave's with no task."""
    seconds = max(seconds, 10.0)  # two reports at least
    async with cluster("cgroups", resources=f"cpus:{count / 50};mem:{count * 16}") as c:
        pid = c.slave.pid
        t0, before = time.monotonic(), cpu_seconds(pid)
        await asyncio.sleep(seconds)  # idle: heartbeats only
        idle = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
        launch = Launch(count, "sleep 600", Resources(cpus=0.01, mem=8))
        async with framework(c, launch, "many"):
            await launch.until(lambda: launch.ever(TaskState.RUNNING) == count, timeout=300)
            await asyncio.sleep(2.0)  # the launches' own work is over
            t0, before = time.monotonic(), cpu_seconds(pid)
            await asyncio.sleep(seconds)  # the window measured
            busy = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
    return busy, idle


class Gate(Flood):
    """A task loop that runs only while open: shut, it suppresses its offers (and declines
    one already on its way), and the tasks it has in flight finish."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.open = False
        self.driver: Driver | None = None
        self.registered_ = asyncio.Event()

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        self.driver = driver
        driver.suppress_offers()
        self.registered_.set()

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        if self.open:
            await super().resource_offers(driver, offers)
        else:
            driver.decline_offers([o.offer_id for o in offers], Filters(refuse_seconds=0))

    async def window(self, warmup: float, seconds: float, slave: int) -> tuple[float, float]:
        """Open for `warmup` then `seconds` seconds: the tasks/s over the latter, and the
        CPU the slave process (`slave`, its pid) spent a task then, in ms (its tasks' own
        not counted)."""
        assert self.driver is not None
        self.open = True
        self.driver.revive_offers()
        await asyncio.sleep(warmup)
        done, t0, cpu0 = len(self.finished), time.perf_counter(), cpu_seconds(slave)
        await asyncio.sleep(seconds)  # the window measured
        tasks, cpu = len(self.finished) - done, cpu_seconds(slave) - cpu0
        rate = tasks / (time.perf_counter() - t0)
        self.open = False
        self.driver.suppress_offers()
        return rate, 1000 * cpu / max(tasks, 1)


async def loop_pairs(
    seconds: float, pairs: int, warmup: float = 2.0, verbose: bool = False
) -> tuple[list[float], dict[str, list[float]], dict[str, list[float]]]:
    """The task loop's tasks/s with cgroups over that with posix, once a pair of windows.

    Both slaves (each with its master and broker) are up for the whole run, and a task
    loop runs on one of them at a time, in turns: cgroups then posix, posix then cgroups,
    `pairs` times; the other waits, suppressed (its cost the same for both). A pair's two
    windows are seconds apart, so that the load other users put on this machine, which
    drifts over a minute, weighs on both alike; the ratios of the pairs show how far that
    still moves the figure. Each window is preceded by `warmup` seconds of its loop: the
    removal of a finished task's cgroup trails its end by a second or two (upkeep), so the
    cgroups window counts the removals of as many tasks as it leaves to the next one."""
    resources = "cpus:2;mem:2048"
    before = memory_cgroups()
    ratios: list[float] = []
    runs: dict[str, list[float]] = {"cgroups": [], "posix": []}
    costs: dict[str, list[float]] = {"cgroups": [], "posix": []}  # the slave's ms a task
    async with (
        cluster("cgroups", resources=resources) as cg,
        cluster("posix", resources=resources) as px,
    ):
        gates = {"cgroups": Gate("loop"), "posix": Gate("loop")}
        async with framework(cg, gates["cgroups"], "loop"), framework(px, gates["posix"], "loop"):
            for gate in gates.values():
                await within(gate.registered_.wait(), 60)
            for i in range(pairs):
                rates: dict[str, float] = {}
                for kind in ("cgroups", "posix") if i % 2 == 0 else ("posix", "cgroups"):
                    pid = (cg if kind == "cgroups" else px).slave.pid
                    rates[kind], cost = await gates[kind].window(warmup, seconds, pid)
                    runs[kind].append(rates[kind])
                    costs[kind].append(cost)
                ratios.append(rates["cgroups"] / max(rates["posix"], 1e-9))
                if verbose:
                    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                    print(
                        f"  pair {i + 1:2}: cgroups {rates['cgroups']:6.1f}  posix "
                        f"{rates['posix']:6.1f} tasks/s  = {ratios[-1]:.2f}x  (slave CPU a "
                        f"task {costs['cgroups'][-1]:.2f} / {costs['posix'][-1]:.2f} ms; "
                        f"load {load})",
                        flush=True,
                    )
    ZOMBIES.append(memory_cgroups() - before)
    return ratios, runs, costs


def slave_costs(costs: dict[str, list[float]]) -> str:
    cg, px = (statistics.median(costs[k]) for k in ("cgroups", "posix"))
    return (
        f"the slave's own CPU a task (median of windows): cgroups {cg:.2f} ms, posix "
        f"{px:.2f} ms, {cg - px:+.2f} ms with cgroups"
    )


@dataclass(frozen=True)
class Ratio:
    """The median of the pairs' ratios, with a 95% confidence interval of it from their
    order statistics (no assumption on how they spread), and their range."""

    median: float
    low: float  # the interval
    high: float
    least: float
    most: float
    pairs: int

    @classmethod
    def of(cls, ratios: list[float]) -> Ratio:
        xs, n = sorted(ratios), len(ratios)
        median = statistics.median(xs)
        # the largest k with P(k-1 or fewer of n below the median) <= 2.5%: the median
        # lies between the k-th smallest and the k-th largest with 95% confidence or more
        k, below = 0, 0.0
        while below + math.comb(n, k) / 2**n <= 0.025:
            below += math.comb(n, k) / 2**n
            k += 1
        if k == 0:
            raise ValueError(f"{n} pairs: a 95% interval of their median needs 6 at least")
        return cls(median, xs[k - 1], xs[n - k], xs[0], xs[-1], n)

    def __str__(self) -> str:
        return (
            f"{self.median:.2f}x (95% CI {self.low:.2f}-{self.high:.2f}, "
            f"{self.pairs} pairs from {self.least:.2f} to {self.most:.2f})"
        )

    def holds(self, bound: float) -> str:
        """Whether the figure is surely at least `bound`: its interval above it."""
        if self.low >= bound:
            return "yes"
        return "NO" if self.high < bound else "NO (undecided: its interval holds the bound)"


LOOP_BOUND = 0.8
TENANTS_BOUND = 0.8  # full isolation's tasks/s over posix's, `drfmesos framework command`
FULL = ("--switch-user", "--pid-namespace")
BARE = ("--no-switch-user", "--no-pid-namespace")


async def command_rate(c: Cluster, count: int, name: str) -> float:
    """Tasks/s of `drfmesos framework command --cmd true --count COUNT`, timed whole
    (its start and registration included: the same for both modes)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "framework", "command", "--broker", c.url.url,
        "--cluster", c.name, "--name", name, "--cmd", "true", "--count", str(count),
        "--resources", "cpus:0.1;mem:32", "--log-level", "warning",
        stdout=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    code = await proc.wait()
    elapsed = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"framework command {name} exited with {code}")
    return count / elapsed


async def tenants_cost(count: int, rounds: int) -> dict[str, list[float]]:
    """Tasks/s in each mode, a run each a turn (see the module's docstring)."""
    resources = "cpus:2;mem:2048"
    uid_map = Path(tempfile.mkdtemp(prefix="drfmesos-iso-uids-")) / "task-uids.json"
    rates: dict[str, list[float]] = {"full": [], "posix": []}
    async with (
        cluster("cgroups", *FULL, "--task-uid-map", str(uid_map), resources=resources) as full,
        cluster("posix", *BARE, resources=resources) as bare,
    ):
        for i in range(rounds):
            for kind in ("full", "posix") if i % 2 == 0 else ("posix", "full"):
                c = full if kind == "full" else bare
                rates[kind].append(await command_rate(c, count, f"{kind}{i}"))
                print(f"  round {i + 1}: {kind:5} {rates[kind][-1]:7.1f} tasks/s", flush=True)
    return rates


def tenants_report(count: int, rates: dict[str, list[float]]) -> None:
    full, bare = (statistics.median(rates[k]) for k in ("full", "posix"))
    ratio = full / bare
    print(
        f"isolation of tenants: {count} `true` tasks through `drfmesos framework command`, "
        f"one real slave a mode, mosquitto, {os.cpu_count()} cores"
    )
    print(
        table(
            ["mode", "tasks/s (median)", "each run"],
            [
                ["cgroups + task users + PID namespaces", full, _runs(rates["full"])],
                ["posix: no user switch, no namespace", bare, _runs(rates["posix"])],
            ],
        )
    )
    print(
        bounds([("full / posix", f"{ratio:.2f}x", f">= {TENANTS_BOUND}x", ratio >= TENANTS_BOUND)])
    )


def _runs(rates: list[float]) -> str:
    return ", ".join(f"{r:.1f}" for r in rates)


async def main(seconds: float, tasks: int, pairs: int, window: float) -> None:
    keep_bytecode()  # (the parties it starts: cluster.testing.bytecode)
    cpu_cg, cpu_px = await cpu_use("cgroups", seconds), await cpu_use("posix", seconds)
    (mem_cg, why_cg), (mem_px, why_px) = await memory_reach("cgroups"), await memory_reach("posix")
    ratios, runs, costs = await loop_pairs(window, pairs)
    loop = Ratio.of(ratios)
    loop_cg, loop_px = (statistics.mean(runs[k]) for k in ("cgroups", "posix"))
    busy, idle = await many_tasks(tasks, seconds)
    print(f"isolation: one real slave, {seconds:g}s windows, mosquitto, {os.cpu_count()} cores")
    print(
        table(
            ["figure", "cgroups", "posix"],
            [
                ["0.25-cpu task spinning 2 processes, CPU-s/s (cfs)", cpu_cg, cpu_px],
                ["64 MB task touching 16 MB / 10 ms, MB when stopped", mem_cg, mem_px],
                ["task loop, tasks/s", loop_cg, loop_px],
            ],
        )
    )
    print(f"stopped, cgroups: {why_cg}\nstopped, posix: {why_px}")
    print(f"slave CPU with {tasks} tasks: {busy:.2%} of a core (idle, no task: {idle:.2%})")
    print(slave_costs(costs))
    print(left_behind())
    print(
        bounds(
            [
                ("CPU-s/s of a 0.25-cpu task, cfs", f"{cpu_cg:.3f}", "<= 0.35", cpu_cg <= 0.35),
                ("64 MB task stopped at", f"{mem_cg:.0f} MB", "< 128 MB", mem_cg < 128),
                (
                    "task loop cgroups / posix (median of pairs)",
                    str(loop),
                    f">= {LOOP_BOUND}x, all its CI",
                    loop.low >= LOOP_BOUND,
                ),
                (f"slave CPU, {tasks} tasks, cgroups", f"{busy:.2%}", "<= 2%", busy <= 0.02),
                ("cgroups left behind", str(len(LEFT)), "0", not LEFT),
            ]
        )
    )


def left_behind() -> str:
    return (
        f"cgroups its slaves left behind: {len(LEFT)} {LEFT[:3]}; memory cgroups the kernel "
        f"holds more after each cgroups task loop (zombies among them; other users of this "
        f"host's cgroups too): {ZOMBIES}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--loop-only", action="store_true", help="only the task loop's ratio")
    parser.add_argument("--pairs", type=int, default=16, help="task loop windows per mode")
    parser.add_argument("--window", type=float, default=3.0, help="task loop window, s")
    parser.add_argument("--tenants", action="store_true", help="only tenant isolation's cost")
    parser.add_argument("--count", type=int, default=2000, help="--tenants: tasks a run")
    parser.add_argument("--rounds", type=int, default=3, help="--tenants: runs a mode")
    args = parser.parse_args()
    if args.pairs < 6:
        parser.error("--pairs: 6 at least (a 95% interval of the median needs them)")
    logs.configure("warning")
    if args.tenants:
        tenants_report(args.count, asyncio.run(tenants_cost(args.count, args.rounds)))
    elif args.loop_only:
        ratios, _, costs = asyncio.run(loop_pairs(args.window, args.pairs, verbose=True))
        loop = Ratio.of(ratios)
        print(slave_costs(costs))
        print(f"task loop, cgroups / posix: {loop}")
        print(f"bound >= {LOOP_BOUND}x, all its 95% CI: {loop.holds(LOOP_BOUND)}")
        print(left_behind())
    else:
        asyncio.run(main(args.seconds, args.tasks, args.pairs, args.window))
