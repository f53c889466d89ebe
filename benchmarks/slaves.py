"""Many slaves on one master and one mosquitto: registration, heartbeats, a failover.

    python -m benchmarks.slaves --count 50000 --json        # the issue #34 run
    python -m benchmarks.slaves --count 5000 --no-failover  # a quick look

Starts mosquitto, ZooKeeper and two masters (one leads; `--no-failover`: one master, no
ZooKeeper), then `--processes` processes of `drfmesos slave --count N --simulated-tasks`,
each its own principal and connection, as separate machines would be. It measures:

- `registered_s`: from the first slave process's start until the leader has every slave;
- over `--window` seconds of steady state: heartbeats the leader handled a second, beside
  the heartbeats the slaves sent in the same window (counted by a listener on the
  slaves' topics: what reached the broker), the leader's CPU share and RSS;
- with `--tasks` (default: 2 a slave), `--frameworks` SDK frameworks launch them through
  offers (`benchmarks.failover_tasks`): `tasks_running_s`, from the frameworks' start
  until the leader and the frameworks have every task RUNNING; the leader's RSS per task;
- `failover_elected_s`: the leader is killed (SIGKILL); from then until this benchmark
  sees the standby lead, and on the wall clock from the kill: `failover_session_expired_s`
  (ZooKeeper removed the old leader's election node), `failover_until_won_s` (the standby
  won the election), `failover_serving_s` (it serves), the last split into
  `failover_takeover_s` (from winning until serving: connecting to the broker,
  `failover_bus_s`, and reading the registry, `failover_registry_read_s`);
  `failover_reregistered_s`: from the kill until this benchmark sees the new
  leader have every slave connected again (`failover_all_back_s`: when the new leader had
  the last one, on its clock); `failover_tasks`: the tasks the new leader
  holds then (every framework's back); `reconciled_s`: from the kill until every task
  of every framework was answered RUNNING by the frameworks' reconciliation with the
  new leader; `tasks_lost`: updates of any other state (LOST, GONE, ...) they heard;
- `lost_slaves`: slaves the leaders removed or did not have back at the end;
- `registers_read`, `failover_reregisters_read`: the (re-)registrations the leader read
  until it had every slave (more than the slaves: retries, each admitted again).

The last line of output is one JSON object (`--json`: that line alone on stdout), with
`targets`: each bound beside the figure it holds (issue 51: registered, every slave back
after the failover and every task answered, each in under a minute; 95% of the heartbeats
sent handled; none lost), and the load average at the start and the end. It exits 1 when
a slave or a task is lost, or fewer than 95% of the heartbeats sent reached the master, or
a phase did not finish in its time (registration: REGISTERED_BOUND; the failover's
re-registration and reconciliation: FAILOVER_BOUND): a dead cluster never prints a table
of zeros.

`SLAVES_PROFILE=<dir>` runs the masters and the slave processes under cProfile, counting
CPU time (benchmarks.cpu_profile):
`<dir>/master-<n>.prof` and `<dir>/rack<n>.prof` each, written as they stop (not the
killed leader's), for `python -m pstats`. The figures are then cProfile's, not the code's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

from benchmarks.common import table
from benchmarks.election_watch import ElectionWatch
from benchmarks.failover_tasks import Frameworks, framework_name, task_size
from benchmarks.party_cpu import PartyCpu
from cluster.testing.bytecode import keep_bytecode
from cluster.testing.zookeeper import ZooKeeperServer
from protocol import logs
from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.messages import Heartbeats, Wire
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.cli import raise_fd_limit

HEARTBEATS_REACHING = 0.95  # of those sent, at least this share reaches the master
PHASE_TIMEOUT = 300.0  # seconds any phase may take before the run is called failed
CAUGHT_UP = 1.0  # seconds behind, at most, for the master to count as caught up
POLL = 2.0  # seconds between looks at the master's /metrics (each walks its slaves)
LAUNCH_RATE = 100  # tasks a second, at least, for the launch phase's time
FAILOVER_BOUND = 60.0  # seconds from the kill: every slave back, every task answered
REGISTERED_BOUND = 60.0  # seconds from the slaves' start until the leader has every one
SLAVE = Resources(cpus=4, mem=4096)  # each simulated slave's
# Where the logical slaves' work dirs go: 100,000 of them stand for 100,000 machines, each
# with its own disk, but here their half a million files (an id and journals a slave)
# share one file system. On this host's ext4 making 4,000 slaves' files took 2.25 s of
# CPU (5.8 s of wall time), on tmpfs 0.32 s: on disk the slaves' start measured the disk.
SHM = "/dev/shm"
PROFILE = os.environ.get("SLAVES_PROFILE")  # a directory: profile each process (see above)


def python(party: str) -> list[str]:
    """How a party's process is started (under cProfile if SLAVES_PROFILE says where)."""
    if not PROFILE:
        return [sys.executable]
    return [sys.executable, "-m", "benchmarks.cpu_profile", f"{PROFILE}/{party}.prof"]


@dataclass
class MasterProcess:
    name: str
    proc: asyncio.subprocess.Process
    http_port: int

    def metrics(self) -> dict[str, float]:
        """The master's /metrics, as `name{labels}` -> value (blocking: call in a thread)."""
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    async def scrape(self) -> dict[str, float]:
        try:
            return await asyncio.to_thread(self.metrics)
        except OSError:
            return {}  # not serving yet (or any more)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")


def trusted_frameworks(count: int) -> dict[str, object]:
    """The rate limits file an operator writes for a trusted batch tenant: the benchmark's
    frameworks listed without a qps (not limited, as Mesos reads a listed principal
    without one), everyone else at the master's defaults. An Accept carries one slave's
    offers (as Mesos's does), so 200,000 tasks on 100,000 slaves are 100,000 Accepts: at
    the default 1,000 calls a second the launch phase measured the rate limiter (and its
    refusals, relaunched), not the master."""
    return {"limits": [{"principal": framework_name(i)} for i in range(count)]}


def metric(scraped: dict[str, float], name: str, /, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    total = 0.0
    for key, value in scraped.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cluster = f"bench{os.getpid()}"
        self.broker = MosquittoBroker()
        self.zk = None if args.no_failover else ZooKeeperServer()
        self.masters: list[MasterProcess] = []
        self.slaves: list[asyncio.subprocess.Process] = []
        self.work = tempfile.mkdtemp(prefix="drfmesos-bench-slaves-", dir=args.work_dir)
        self.frameworks: Frameworks | None = None
        self.cpu = PartyCpu(self.parties)
        # the figures so far: a phase that does not finish still leaves those before it
        # (and the CPU each party spent in it) beside its error
        self.result: dict[str, object] = {"slaves": args.count, "processes": args.processes}
        self.env = {**os.environ, "PYTHONPATH": os.getcwd()}
        with open(f"{self.work}/rate-limits.json", "w") as f:  # (the masters')
            json.dump(trusted_frameworks(args.frameworks), f)

    def parties(self) -> dict[str, list[int]]:
        """Our processes by party, for the CPU each phase took (benchmarks.party_cpu)."""
        return {
            "master": [m.proc.pid for m in self.masters],
            "slaves": [p.pid for p in self.slaves],
            "broker": [p for p in [self.broker.pid] if p is not None],
            "zookeeper": [p for p in [self.zk.pid if self.zk else None] if p is not None],
        }

    async def start_master(self, name: str) -> None:
        port = free_port()
        ha = ["--zk", self.zk.url(f"/{self.cluster}")] if self.zk is not None else []
        limits = f"{self.work}/rate-limits.json"
        proc = await asyncio.create_subprocess_exec(
            *python(name),
            "-m",
            "cluster",
            "master",
            "--broker",
            self.broker.url.url,
            "--cluster",
            self.cluster,
            *ha,
            "--heartbeat-interval",
            str(self.args.heartbeat),
            "--slave-timeout",
            str(self.args.slave_timeout),
            "--slave-reregister-timeout",
            str(self.args.slave_timeout),
            "--rate-limits",
            limits,
            "--http",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            env=self.env,
        )
        self.masters.append(MasterProcess(name, proc, port))

    async def start_slaves(self) -> None:
        count, processes = self.args.count, self.args.processes
        for i in range(processes):
            n = count // processes + (1 if i < count % processes else 0)
            url = self.broker.url.url.replace("mqtt://", f"mqtt://rack{i}@", 1)
            self.slaves.append(
                await asyncio.create_subprocess_exec(
                    *python(f"rack{i}"),
                    "-m",
                    "cluster",
                    "slave",
                    "--broker",
                    url,
                    "--cluster",
                    self.cluster,
                    "--count",
                    str(n),
                    "--simulated-tasks",
                    "--resources",
                    ";".join(f"{name}:{amount:g}" for name, amount in SLAVE.items()),
                    "--work-dir",
                    f"{self.work}/rack{i}",
                    "--registration-backoff-factor",
                    str(self.args.backoff_factor),
                    "--log-level",
                    "warning",
                    env=self.env,
                )
            )

    async def leader(self, timeout: float = PHASE_TIMEOUT) -> MasterProcess:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for m in self.masters:
                if m.proc.returncode is None and metric(await m.scrape(), "drfmesos_elected"):
                    return m
            await asyncio.sleep(0.5)
        raise TimeoutError(f"no master was elected within {timeout:.0f}s")

    async def all_back(self, leader: MasterProcess, since: float) -> float:
        """Seconds from `since` until `leader` has every slave connected, none awaited."""
        connected = 0.0
        while time.perf_counter() - since < PHASE_TIMEOUT:
            scraped = await leader.scrape()
            connected = metric(scraped, "drfmesos_slaves_connected")
            waiting = metric(scraped, "drfmesos_recovery_slaves", state="waiting")
            if connected >= self.args.count and not waiting:
                return time.perf_counter() - since
            await asyncio.sleep(POLL)
        raise TimeoutError(
            f"{connected:.0f} of {self.args.count} slaves connected after {PHASE_TIMEOUT:.0f}s"
            f" (load average {os.getloadavg()[0]:.1f})"
        )

    async def steady(self, leader: MasterProcess) -> dict[str, float]:
        """Heartbeats sent and handled, CPU and RSS over the window."""
        sent = 0

        async def count(message: Wire, _reply_to: str | None) -> None:
            nonlocal sent
            if isinstance(message, Heartbeats):
                sent += len(message.slave_ids)

        async with Bus(self.broker.url, name="bench-listener") as bus:
            await bus.subscribe(Topics(self.cluster).inbound("slave", "+"), count, qos=0)
            # A master still reading the registration storm's backlog handles, in the
            # window, heartbeats sent before it: counted against what the listener saw
            # sent in the window, they read as more than were sent (+38% at 10,000 when
            # registrations waited on ZooKeeper one by one). The window opens once it
            # has caught up.
            waited, behind = time.perf_counter(), await self.behind(leader)
            behind_when_registered = behind
            while behind > CAUGHT_UP and time.perf_counter() - waited < PHASE_TIMEOUT:
                await asyncio.sleep(POLL)
                behind = await self.behind(leader)
            caught_up = time.perf_counter() - waited
            before, cpu = await leader.scrape(), leader.cpu_seconds()
            t, sent_before = time.perf_counter(), sent
            await asyncio.sleep(self.args.window)
            after, cpu = await leader.scrape(), leader.cpu_seconds() - cpu
            seconds, sent = time.perf_counter() - t, sent - sent_before

        handled = metric(after, "drfmesos_messages_total", type="Heartbeat", outcome="handled")
        handled -= metric(before, "drfmesos_messages_total", type="Heartbeat", outcome="handled")
        return {
            "backlog_when_registered_s": behind_when_registered,
            "caught_up_s": caught_up,  # waited for the master's backlog before the window
            "master_backlog_at_window_s": behind,
            "heartbeats_per_s": handled / seconds,
            "expected_heartbeats_per_s": sent / seconds,
            "master_cpu_pct": cpu / seconds * 100,
            "master_rss_mb": leader.rss_mb(),
            # how far behind the master is (master.lag_probe): its oldest unhandled message
            "master_backlog_s": metric(after, "drfmesos_inbound_oldest_wait_seconds"),
            "load_average_1m": os.getloadavg()[0],  # the machine's, for reading the rest
        }

    async def behind(self, leader: MasterProcess) -> float:
        """How far behind the master is in reading its calls, in seconds (lag probe)."""
        scraped = await leader.scrape()
        return max(
            metric(scraped, "drfmesos_inbound_oldest_wait_seconds"),
            metric(scraped, "drfmesos_inbound_last_wait_seconds"),
        )

    async def lost(self) -> int:
        removed = 0
        for m in self.masters:
            if m.proc.returncode is None:
                removed += int(metric(await m.scrape(), "drfmesos_slave_removals_total"))
        return removed

    async def measure(self) -> dict[str, object]:
        args = self.args
        result = self.result
        result["heartbeat_interval_s"] = args.heartbeat
        result["slaves_work_dir"] = self.work
        await self.broker.start()
        if self.zk is not None:
            await self.zk.start()
        for i in range(1 if self.zk is None else 2):
            await self.start_master(f"master-{i}")
        leader = await self.leader()
        started = time.perf_counter()
        self.cpu.phase()  # (what starting the broker, ZooKeeper and the masters took)
        await self.start_slaves()
        result["registered_s"] = round(await self.all_back(leader, started), 1)
        # (more than one a slave: retries the master read, each admitted again)
        scraped = await leader.scrape()
        result["registers_read"] = int(metric(scraped, "drfmesos_messages_total", type="Register"))
        # (CPU seconds by party: on 2 cores a phase takes at least all / 2 seconds)
        result["cpu_registration_s"] = self.cpu.phase()
        result.update({k: round(v, 1) for k, v in (await self.steady(leader)).items()})
        rss = float(result["master_rss_mb"])  # type: ignore[arg-type]
        result["master_rss_kb_per_slave"] = round(rss * 1024 / args.count, 2)
        if args.tasks:
            self.cpu.phase()
            result.update(await self.launch(leader, rss))
            result["cpu_launch_s"] = self.cpu.phase()
        if self.zk is not None:
            self.cpu.phase()
            result.update(await self.failover(leader))
            result["cpu_failover_s"] = self.cpu.phase()  # (until reconciled, or all back)
        result["lost_slaves"] = await self.lost()
        if self.frameworks is not None:
            result.update(self.frameworks.counts())
        return result

    async def launch(self, leader: MasterProcess, rss_before: float) -> dict[str, object]:
        """The frameworks launch the tasks; until the leader and they have all RUNNING."""
        args = self.args
        per_slave = -(-args.tasks // args.count)
        self.frameworks = Frameworks(
            self.broker.url.url,
            self.cluster,
            args.frameworks,
            args.tasks,
            task_size(SLAVE, per_slave),
        )
        started = time.perf_counter()
        await self.frameworks.start()
        # (launching through offers runs at a few hundred tasks a second here: 100,000
        # take minutes, so this phase gets a second per LAUNCH_RATE tasks, at least)
        budget = max(PHASE_TIMEOUT, args.tasks / LAUNCH_RATE)
        await self.frameworks.all_running(budget)
        await self.tasks_back(leader, started, budget)  # (the phase's budget: one clock)
        running_s = time.perf_counter() - started
        rss = leader.rss_mb()
        return {
            "tasks": args.tasks,
            "tasks_running_s": round(running_s, 1),
            "master_rss_mb_with_tasks": round(rss, 1),
            "master_rss_kb_per_task": round((rss - rss_before) * 1024 / args.tasks, 2),
        }

    async def tasks_back(
        self, leader: MasterProcess, since: float, within: float = PHASE_TIMEOUT
    ) -> float:
        """Seconds from `since` until `leader` holds every task, each framework its own;
        failed `within` seconds of `since`."""
        assert self.frameworks is not None
        want = {f.name: f.target for f in self.frameworks.fillers}
        have: dict[str, float] = {}
        while time.perf_counter() - since < within:
            scraped = await leader.scrape()
            have = {n: metric(scraped, "drfmesos_framework_tasks", name=n) for n in want}
            if all(have[n] >= want[n] for n in want):
                return time.perf_counter() - since
            await asyncio.sleep(POLL)
        raise TimeoutError(f"the leader holds {have} tasks of {want} after {within:.0f}s")

    async def failover(self, leader: MasterProcess) -> dict[str, object]:
        """Kill the leader; the new one's slaves, tasks and the frameworks' reconciliation."""
        if self.frameworks is not None:
            self.frameworks.expect_failover()
        assert self.zk is not None
        watch = ElectionWatch(self.zk.hosts, f"/{self.cluster}/{self.cluster}/election")
        try:
            await watch.watch_leader()
            killed_at = time.time()  # (the wall clock, beside the new leader's)
            leader.proc.kill()
            await leader.proc.wait()
            killed = time.perf_counter()
            new = await self.leader()
            elected = time.perf_counter() - killed
        finally:
            await watch.close()
        result = self.result  # (filled as it goes: a phase that times out keeps these)
        result["failover_elected_s"] = round(elected, 1)
        # where the election's time went, on the wall clock: the old leader's ZooKeeper
        # session expiring (seen by a watch on its election node), the standby winning
        # the election, its start (connecting to the broker, reading the registry), and
        # the rest until this poll saw it lead
        scraped = await new.scrape()
        won = metric(scraped, "drfmesos_term_won_timestamp_seconds") - killed_at
        took_over = metric(scraped, "drfmesos_takeover_seconds", step="serving")
        if watch.leader_gone_at is not None:
            result["failover_session_expired_s"] = round(watch.leader_gone_at - killed_at, 2)
        result["failover_until_won_s"] = round(won, 2)
        result["failover_bus_s"] = round(
            metric(scraped, "drfmesos_takeover_seconds", step="bus"), 2
        )
        result["failover_registry_read_s"] = round(
            metric(scraped, "drfmesos_takeover_seconds", step="registry"), 2
        )
        result["failover_takeover_s"] = round(took_over, 2)
        result["failover_serving_s"] = round(won + took_over, 2)
        result["failover_reregistered_s"] = round(await self.all_back(new, killed), 1)
        scraped = await new.scrape()
        # (the same on the new leader's own clock: this poll sees it up to POLL later, and
        # later again while its loop is busy)
        back = metric(scraped, "drfmesos_recovery_done_timestamp_seconds")
        result["failover_all_back_s"] = round(back - killed_at, 1) if back else None
        result["failover_reregisters_read"] = int(
            metric(scraped, "drfmesos_messages_total", type="Reregister")
            + metric(scraped, "drfmesos_messages_total", type="Register")
        )
        if self.frameworks is None:
            return result
        result["failover_tasks_s"] = round(await self.tasks_back(new, killed), 1)
        scraped = await new.scrape()
        result["failover_tasks"] = int(metric(scraped, "drfmesos_framework_tasks"))
        left = max(1.0, PHASE_TIMEOUT - (time.perf_counter() - killed))
        try:
            await self.frameworks.all_answered(left)
        except TimeoutError:
            answered = self.frameworks.counts()["tasks_answered"]
            raise TimeoutError(
                f"{answered} of {self.args.tasks} tasks answered by reconciliation "
                f"{PHASE_TIMEOUT:.0f}s after the kill"
            ) from None
        result["reconciled_s"] = round(time.perf_counter() - killed, 1)
        return result

    async def stop(self) -> None:
        """Every process told at once (10,000 slaves take a while to stop), then waited for."""
        if self.frameworks is not None:
            with contextlib.suppress(Exception):
                await within(self.frameworks.stop(), 30)
        procs = [p for p in [*self.slaves, *(m.proc for m in self.masters)] if p.returncode is None]
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                await within(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await self.broker.stop()
        self.broker.cleanup()
        if self.zk is not None:
            await self.zk.close()
        # (the slaves' journals: some 780 MB for 50,000 with their tasks, left in /tmp
        # by every run before)
        await asyncio.to_thread(shutil.rmtree, self.work, True)


def targets(result: dict[str, object]) -> list[dict[str, object]]:
    """Each figure the run measured that has a bound, beside it, and whether it holds."""
    out: list[dict[str, object]] = []
    for phase, bound in (
        ("registered_s", REGISTERED_BOUND),
        ("failover_reregistered_s", FAILOVER_BOUND),
        ("reconciled_s", FAILOVER_BOUND),
    ):
        if phase in result:
            took = float(result[phase])  # type: ignore[arg-type]
            out.append({"figure": phase, "measured": took, "bound": f"<= {bound:g}",
                        "holds": took <= bound})  # fmt: skip
    sent = float(result.get("expected_heartbeats_per_s", 0))  # type: ignore[arg-type]
    if sent:
        share = float(result.get("heartbeats_per_s", 0)) / sent  # type: ignore[arg-type]
        out.append({"figure": "heartbeats_handled_share", "measured": round(share, 3),
                    "bound": f">= {HEARTBEATS_REACHING:g}",
                    "holds": share >= HEARTBEATS_REACHING})  # fmt: skip
    return out


def verdict(result: dict[str, object]) -> list[str]:
    """What fails the run, in words (empty: it holds)."""
    problems = []
    if result.get("error"):
        problems.append(str(result["error"]))
    if result.get("lost_slaves"):
        problems.append(f"{result['lost_slaves']} slaves lost")
    if result.get("tasks_lost"):
        problems.append(f"{result['tasks_lost']} tasks lost: {result['tasks_lost_by_state']}")
    for target in targets(result):
        if not target["holds"] and target["figure"] != "heartbeats_handled_share":
            problems.append(f"{target['figure']}: {target['measured']}, bound {target['bound']}")
    if "failover_tasks" in result and result["failover_tasks"] != result.get("tasks"):
        problems.append(f"the new leader holds {result.get('failover_tasks')} tasks")
    sent = float(result.get("expected_heartbeats_per_s", 0))  # type: ignore[arg-type]
    got = float(result.get("heartbeats_per_s", 0))  # type: ignore[arg-type]
    if not sent or got < HEARTBEATS_REACHING * sent:
        problems.append(f"heartbeats reaching the master: {got:,.0f}/s of {sent:,.0f}/s sent")
    return problems


async def main(args: argparse.Namespace) -> int:
    keep_bytecode()  # (the parties it starts: cluster.testing.bytecode)
    raise_fd_limit(args.count + 1000)  # mosquitto, started from here, inherits it
    load_at_start = os.getloadavg()[0]
    run = Run(args)
    try:
        result = await run.measure()
    except TimeoutError as e:
        result = run.result
        result["error"] = str(e)
        result["cpu_unfinished_phase_s"] = run.cpu.phase()
    finally:
        await run.stop()
    problems = verdict(result)
    result["targets"] = targets(result)
    result["holds"] = not problems
    result["load_at_start"], result["load_at_end"] = load_at_start, os.getloadavg()[0]
    if not args.json:
        rows = [[k, v] for k, v in result.items()]
        print(table(["figure", "value"], rows))
        for problem in problems:
            print(f"FAILS: {problem}")
    print(json.dumps(result))
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument(
        "--processes", type=int, default=0, help="default: 1 per 4,000 slaves (open files)"
    )
    parser.add_argument("--heartbeat", type=float, default=15.0, help="the master's interval")
    parser.add_argument("--slave-timeout", type=float, default=75.0)
    parser.add_argument(
        "--backoff-factor", type=float, default=0.0, help="default: 1 s per 4,000 slaves"
    )
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--tasks", type=int, default=-1, help="default: 2 a slave (0: none)")
    parser.add_argument("--frameworks", type=int, default=2, help="that launch the tasks")
    parser.add_argument("--no-failover", action="store_true")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument(
        "--work-dir",
        default=SHM if os.path.isdir(SHM) else None,
        help=f"where the slaves' work dirs go (default: {SHM}, memory; some 16 KB a slave)",
    )
    parsed = parser.parse_args()
    # (a logical slave keeps its journals open: 4,000 a process fit a 20,000-file limit,
    # slave.cli.raise_fd_limit; 10,000 did not, and their journal writes failed)
    parsed.processes = parsed.processes or max(1, -(-parsed.count // 4_000))
    parsed.tasks = 2 * parsed.count if parsed.tasks < 0 else parsed.tasks
    # (the slaves reach the master at about 4,000 a second: it admits a registration in
    # some 100 us of its loop and a re-registration with two tasks in some 220 us)
    parsed.backoff_factor = parsed.backoff_factor or max(1.0, parsed.count / 4000)
    logs.configure("warning")
    sys.exit(asyncio.run(main(parsed)))
