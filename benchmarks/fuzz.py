"""The tenant fuzzer for long: a credentialed tenant's hostile input and what came back.

    python -m benchmarks.fuzz [--messages 50000] [--requests 1500] [--seed 36]
                              [--frameworks 200] [--churn 20] [--top 0] [--no-trim]

The same run as tests/test_fuzz.py (its fuzzer is tests/fuzz.py), with more of it: on a
secured mosquitto cluster (TLS, a credentials store, real processes in real sandboxes)
mallory sends generated hostile messages on the topic it may write and hostile requests
to every HTTP route, beside a victim framework with a running task. It prints what it
sent and what came back, and fails if an invariant broke: a sandbox outside a work dir,
a process the master's books do not count, a slave past its total, a handler failure,
a loop step of 100 ms, the victim's task gone. Then mallory registers `--frameworks`
frameworks at once, each declining every offer for a year and reviving, for `--churn`
seconds.

And the master's memory: its RSS at the start, at the peak, and once every framework of
the attacker's is torn down and its offers are gone (after a full collection and glibc's
`malloc_trim`, unless `--no-trim`), against the bound: within 20% of the start. The
master runs in this process (its books are checked directly), so the figures include the
slaves and the fuzzer beside it; `--top N` also prints what the master's own code
allocated since the start and still holds, the N biggest first (tracemalloc: a run
several times slower).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from harness.fuzz import churn_frameworks
from harness.fuzz_attack import fuzz
from harness.helpers import eventually
from harness.trust import Secure, T, secure_cluster

RSS_BOUND = 1.2  # the RSS after the attack, at most, as a multiple of the start's


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def trim() -> None:
    """A full collection, and glibc's free memory given back to the system."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc is not None:
        ctypes.CDLL(libc).malloc_trim(0)


class Memory:
    """The process's RSS from the attack's start (and, with `top`, what the master's code
    allocated since), its peak looked at every `every` seconds."""

    def __init__(self, top: int, trimmed: bool, every: float = 0.1) -> None:
        self.top, self.trimmed, self.every = top, trimmed, every
        self.start = self.peak = float("nan")
        self._before: tracemalloc.Snapshot | None = None
        self._task: asyncio.Task[None] | None = None

    async def settled(self) -> float:
        """The RSS once the loop has let go of what came before (a few turns of it, a
        full collection, and a trim unless told not to)."""
        for _ in range(20):
            await asyncio.sleep(0.05)
        trim() if self.trimmed else gc.collect()
        return rss_mib()

    async def attacking(self) -> None:
        """The attack begins: the start's figure, once what came before is let go."""
        self.start = self.peak = await self.settled()
        if self.top:
            tracemalloc.start(8)
            self._before = tracemalloc.take_snapshot()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mib())
            await asyncio.sleep(self.every)

    def attacked(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.peak = max(self.peak, rss_mib())

    def kept(self) -> None:
        """Print what the master's code allocated since the start and still holds."""
        if self._before is None:
            return
        snapshot = tracemalloc.take_snapshot()
        everything = sum(s.size_diff for s in snapshot.compare_to(self._before, "filename"))
        master = [tracemalloc.Filter(True, "*/master/*", all_frames=True)]
        now = snapshot.filter_traces(master)
        growth = now.compare_to(self._before.filter_traces(master), "traceback")
        total = sum(stat.size_diff for stat in growth)
        print(
            f"held since the start: {everything / 2**20:+.2f} MiB of Python objects, of which "
            f"{total / 2**20:+.2f} MiB allocated in the master's code"
        )
        for stat in growth[: self.top]:
            print(f"{stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks")
            for line in stat.traceback.format()[-8:]:
                print("    " + line)


async def attackers_gone(sec: Secure, principal: str = "mallory") -> int:
    """Tear down every framework of `principal` still there (as an operator would), wait
    until none is left and none of their offers; how many it had in all."""
    books, removals = sec.master.books, sec.master.removals
    for fw in [fw for fw in books.frameworks.values() if fw.principal == principal]:
        removals.remove_framework(fw, "the attack is over")

    def gone() -> bool:
        theirs = {f for f, fw in books.frameworks.items() if fw.principal == principal}
        return not theirs and not any(o.framework_id in theirs for o in books.offers.values())

    await eventually(gone, timeout=30)
    return sum(1 for owner, _ in books.removed.values() if owner == principal)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="drfmesos-fuzz-") as work:
        async with secure_cluster("mosquitto", Path(work), simulated=False) as sec:
            memory = Memory(args.top, not args.no_trim)
            began = time.monotonic()
            try:  # (tracing, a loop step takes several times as long)
                await fuzz(
                    *(sec, Path(work), args.messages, args.requests, args.seed),
                    step_bound=1.0 if args.top else 0.1,
                    attacking=memory.attacking,
                )
                took = time.monotonic() - began
                print(f"{args.messages} messages and {args.requests} requests in {took:.1f} s")
                churned = await churn_frameworks(
                    sec.connect("mallory"), T, "mallory", args.frameworks, args.churn
                )
                print(
                    f"{len(churned)} frameworks declined for a year and revived, {args.churn:g} s"
                )
            finally:
                memory.attacked()
            gone = await attackers_gone(sec)
            after = await memory.settled()
            memory.kept()
            most = RSS_BOUND * memory.start
            print(
                f"master RSS: start {memory.start:.0f} MiB, peak {memory.peak:.0f} MiB, after "
                f"the attack's {gone} frameworks and their offers are gone {after:.0f} MiB "
                f"(bound {most:.0f} MiB: within {RSS_BOUND - 1:.0%} of the start)"
            )
            if after > most:
                raise SystemExit(f"the master kept {after - memory.start:.0f} MiB after the attack")
            print("invariants: all held")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--frameworks", type=int, default=200)
    parser.add_argument("--churn", type=float, default=20.0)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--no-trim", action="store_true")
    asyncio.run(main(parser.parse_args()))
