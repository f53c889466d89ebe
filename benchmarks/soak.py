"""The chaos soak: a highly available cluster that keeps losing parts, and the books kept.

    python -m benchmarks.soak [--minutes 10] [--every 4] [--seed 1] [--run-dir DIR]

ZooKeeper, mosquitto, 3 masters (`--zk`), 5 slaves and 3 journaled frameworks running
real short shell tasks (`frameworks/samples/journaled.py`), each a process; each framework
has a fixed list of work items (`--work`, per framework) and launches again whatever ended
in a retryable state, and the first is partition-aware (it hears TASK_DROPPED,
TASK_UNREACHABLE, ... where the others hear TASK_LOST). Every few
seconds it kill -9s one of: the leading master, a standby, a slave, a framework
scheduler (restarted within its failover timeout), the broker (restarted after a pause)
or ZooKeeper (restarted). Then the chaos stops and it checks, and prints:

- work items, and how many were FINISHED exactly once (must be all): none lost (never
  finished), none finished twice, none run twice at once (each item's task holds a lock
  while it runs: one that finds it held says so);
- tasks launched, and how many reached exactly one terminal state in their framework's
  own journal (must be all);
- tasks that ever ran twice (each task's command makes a directory named after itself;
  one that finds it made says so) and tasks RUNNING again after they ended (must be 0);
- status updates lost: tasks that never heard how they ended (must be 0);
- the failovers, and how long each took (leader gone -> next leader announced);
- that the master's books balance (what frameworks hold = what live tasks use) and that
  the dominant shares return to fair (spread under 0.1) within a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import percentile, table
from cluster.testing.bytecode import keep_bytecode
from cluster.testing.ha import HACluster, HAConfig, books_balance, share_spread
from protocol import logs

ACTIONS = ("leader", "standby", "slave", "framework", "broker", "zookeeper")


@dataclass
class SoakReport:
    minutes: float
    actions: dict[str, int] = field(default_factory=dict)
    work_items: int = 0
    work_once: int = 0  # FINISHED exactly once
    work_lost: int = 0  # never FINISHED
    work_twice: int = 0  # FINISHED more than once
    work_overlaps: int = 0  # run twice at once
    work_errors: int = 0  # a task of theirs ended TASK_ERROR (its description is wrong)
    launched: int = 0
    one_end: int = 0
    several_ends: int = 0
    never_ended: int = 0
    ran_twice: int = 0
    running_after_end: int = 0
    failovers: list[float] = field(default_factory=list)  # the leader killed
    zk_failovers: list[float] = field(default_factory=list)  # ZooKeeper killed, then back
    ends: dict[str, int] = field(default_factory=dict)  # tasks by terminal state
    failovers_unfinished: int = 0
    balanced: bool = False
    fair_after: float | None = None  # seconds after the chaos until the shares were fair
    spread: float = 1.0

    @property
    def ok(self) -> bool:
        return (
            self.launched > 0
            and self.work_items > 0
            and self.work_once == self.work_items
            and self.work_overlaps == 0
            and self.one_end == self.launched
            and self.ran_twice == 0
            and self.running_after_end == 0
            and self.never_ended == 0
            and self.failovers_unfinished == 0
            and self.balanced
            and self.fair_after is not None
        )

    def rows(self) -> list[tuple[str, object, str]]:
        fo = self.failovers
        return [
            ("chaos minutes", self.minutes, ""),
            ("parts killed", sum(self.actions.values()), _counts(self.actions)),
            ("work items", self.work_items, "> 0"),
            ("... FINISHED exactly once", self.work_once, f"= {self.work_items}"),
            ("... lost (never FINISHED)", self.work_lost, "= 0"),
            ("... FINISHED twice", self.work_twice, "= 0"),
            ("... run twice at once", self.work_overlaps, "= 0"),
            ("... with a TASK_ERROR", self.work_errors, "= 0"),
            ("tasks relaunched (retryable ends)", self.launched - self.work_items, ""),
            ("tasks launched", self.launched, "> 0"),
            ("... exactly one terminal state", self.one_end, f"= {self.launched}"),
            ("... several terminal states", self.several_ends, "= 0"),
            ("tasks by how they ended", _counts(self.ends), ""),
            ("status updates lost (no end heard)", self.never_ended, "= 0"),
            ("tasks ever running twice at once", self.ran_twice, "= 0"),
            ("a new RUNNING after a task ended", self.running_after_end, "= 0"),
            ("failovers (leader killed)", len(fo), f"{self.failovers_unfinished} never ended"),
            ("failover p50 (s)", percentile(fo, 50), "< 10"),
            ("failover p99 (s)", percentile(fo, 99), "< 10"),
            ("failovers (ZooKeeper killed)", len(self.zk_failovers), ""),
            ("... leader again p50 (s)", percentile(self.zk_failovers, 50), "incl. its pause"),
            ("books balance after", "yes" if self.balanced else "NO", "yes"),
            (
                "fair again after (s)",
                self.fair_after if self.fair_after is not None else "NO",
                "< 60",
            ),
            ("dominant share spread", self.spread, "< 0.1"),
        ]


def _counts(actions: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(actions.items()))


async def chaos(ha: HACluster, seconds: float, every: float, rng: random.Random) -> dict[str, int]:
    done: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    turn = 0
    while time.monotonic() < deadline:
        await asyncio.sleep(every * rng.uniform(0.7, 1.3))
        action = ACTIONS[turn % len(ACTIONS)] if turn < len(ACTIONS) else rng.choice(ACTIONS)
        turn += 1
        await act(ha, action, rng)
        done[action] = done.get(action, 0) + 1
    return done


async def act(ha: HACluster, action: str, rng: random.Random) -> None:
    c = ha.config
    log = logs.get("soak")
    if action in ("leader", "standby"):
        leader = ha.leader_name()
        masters = [f"master{i}" for i in range(c.masters)]
        if action == "leader" and leader is not None:
            victim = leader
        else:
            victim = rng.choice([m for m in masters if m != leader] or masters)
        log.info("soak.kill", victim=victim, action=action)
        ha.kill(victim)
        await asyncio.sleep(1.0)
        await ha.restart(victim)
    elif action in ("slave", "framework"):  # back well within their timeouts
        victim = (
            f"slave{rng.randrange(c.slaves)}"
            if action == "slave"
            else f"fw{rng.randrange(c.frameworks)}"
        )
        log.info("soak.kill", victim=victim)
        ha.kill(victim)
        await asyncio.sleep(rng.uniform(0.5, 3.0))
        await ha.restart(victim)
    elif action == "broker":
        log.info("soak.kill", victim="broker")
        await ha.kill_broker()
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        await ha.restart_broker()
    elif action == "zookeeper":
        log.info("soak.kill", victim="zookeeper")
        await ha.kill_zookeeper()
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        await ha.restart_zookeeper()


async def settle(ha: HACluster, report: SoakReport, calm_started: float) -> None:
    """After the chaos: shares back to fair and books balanced, then drain every task."""

    def fair_and_balanced(state: object) -> bool:
        from protocol.wire.messages import State

        assert isinstance(state, State)
        held, used = books_balance(state)
        # a framework whose work is all done holds nothing, as it should: not unfair
        busy = ha.busy()
        report.spread = share_spread(state, busy) if len(busy) > 1 else 0.0
        report.balanced = held == used
        connected = sum(1 for f in state.frameworks if f.active)
        return (
            connected == ha.config.frameworks
            and report.balanced
            and report.spread < 0.1
            and state.recovering_slaves == 0
        )

    try:
        await ha.wait_for_state(fair_and_balanced, timeout=60)
        report.fair_after = round(time.monotonic() - calm_started, 1)
    except TimeoutError:
        pass
    await ha.drain()

    def all_ended() -> bool:
        fates = ha.fates()
        work_done = all(w.finished or w.errors for w in ha.work().values())
        return work_done and all(f.terminal for f in fates.values() if f.launched)

    # the work left when the chaos stopped is still to do (about a minute's worth)
    deadline = time.monotonic() + 240
    while not all_ended() and time.monotonic() < deadline:  # noqa: ASYNC110 - other processes write the journals
        await asyncio.sleep(0.5)


def judge(ha: HACluster, report: SoakReport) -> None:
    fates = [f for f in ha.fates().values() if f.launched]
    report.launched = len(fates)
    report.one_end = sum(1 for f in fates if len(f.terminal) == 1)
    report.several_ends = sum(1 for f in fates if len(f.terminal) > 1)
    report.never_ended = sum(1 for f in fates if not f.terminal)
    report.running_after_end = sum(1 for f in fates if f.running_after_end)
    report.ran_twice = len(set(ha.doubles()))
    work = ha.work().values()
    report.work_items = len(work)
    report.work_once = sum(1 for w in work if w.finished == 1)
    report.work_lost = sum(1 for w in work if w.finished == 0)
    report.work_twice = sum(1 for w in work if w.finished > 1)
    report.work_errors = sum(1 for w in work if w.errors)
    report.work_overlaps = len(set(ha.overlaps()))
    report.ends = {}
    for f in fates:
        for state in f.terminal:
            name = state.removeprefix("TASK_")
            report.ends[name] = report.ends.get(name, 0) + 1
    report.failovers = [
        f.seconds for f in ha.failovers if f.seconds is not None and "zookeeper" not in f.cause
    ]
    report.zk_failovers = [
        f.seconds for f in ha.failovers if f.seconds is not None and "zookeeper" in f.cause
    ]
    report.failovers_unfinished = sum(1 for f in ha.failovers if f.seconds is None)


async def soak(
    minutes: float, every: float, seed: int, run_dir: Path, config: HAConfig | None = None
) -> SoakReport:
    rng = random.Random(seed)
    report = SoakReport(minutes=minutes)
    if config is None:
        config = HAConfig(work_items=work_for(minutes), partition_aware=1)
    async with HACluster(run_dir, config) as ha:
        await ha.wait_for_leader(timeout=60)
        await ha.wait_for_state(
            lambda s: (
                sum(1 for f in s.frameworks if f.active) == ha.config.frameworks
                and len(s.slaves) == ha.config.slaves
            ),
            timeout=60,
        )
        report.actions = await chaos(ha, minutes * 60, every, rng)
        await ha.wait_for_leader(timeout=60)
        await settle(ha, report, time.monotonic())
        judge(ha, report)
    return report


def work_for(minutes: float, per_second: float = 3.0) -> int:
    """Work items for each framework: a little less than it gets through in the chaos
    (about 2.5 tasks a second each under chaos), so it works all along."""
    return max(20, round(minutes * 60 * per_second))


def main() -> None:
    keep_bytecode()  # (the parties it starts: cluster.testing.bytecode)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--every", type=float, default=4.0, help="seconds between kills")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--work", type=int, default=None, help="work items per framework (default: by minutes)"
    )
    parser.add_argument("--run-dir", type=Path, default=None)
    args = parser.parse_args()
    logs.configure("warning")
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="drfmesos-soak-"))
    config = HAConfig(work_items=args.work or work_for(args.minutes), partition_aware=1)
    report = asyncio.run(soak(args.minutes, args.every, args.seed, run_dir, config))
    print(f"chaos soak: {args.minutes:g} min, a kill every ~{args.every:g} s; logs in {run_dir}")
    print(table(["", "measured", "bound"], report.rows()))
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
