"""The tenant fuzzer for long: a credentialed tenant's hostile input and what came back.

    python -m benchmarks.fuzz [--messages 50000] [--requests 1500] [--seed 36]

The same run as tests/test_fuzz.py (its fuzzer is tests/fuzz.py), with more of it: on a
secured mosquitto cluster (TLS, a credentials store, real processes in real sandboxes)
mallory sends generated hostile messages on the topic it may write and hostile requests
to every HTTP route, beside a victim framework with a running task. It prints what it
sent and what came back, and fails if an invariant broke: a sandbox outside a work dir,
a process the master's books do not count, a slave past its total, a handler failure,
a loop step of 100 ms, the victim's task gone.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_fuzz import fuzz
from test_trust import secure_cluster


async def main(messages: int, requests: int, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="drfmesos-fuzz-") as work:
        async with secure_cluster("mosquitto", Path(work), simulated=False) as sec:
            began = time.monotonic()
            await fuzz(sec, Path(work), messages, requests, seed)
            print(
                f"{messages} messages and {requests} requests in {time.monotonic() - began:.1f} s"
            )
            print("invariants: all held")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=36)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.requests, args.seed))
