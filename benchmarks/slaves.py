"""How many logical slaves one process holds: memory per slave and heartbeat traffic.

    python -m benchmarks.slaves [--count 1000] [--heartbeat 5]

Starts mosquitto, a master process, and one `drfmesos slave --count N --simulated-tasks`
process; waits until the master knows all N slaves, then reads the slave process's
resident memory and counts the heartbeats reaching the master over a window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

from benchmarks.common import table
from cluster.local.view import fetch_state
from protocol import logs
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus
from protocol.wire.messages import Heartbeat, Wire
from protocol.wire.topics import Topics
from slave.cli import raise_fd_limit


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def measure(count: int, heartbeat: float, window: float) -> list[object]:
    broker = MosquittoBroker()
    await broker.start()
    cluster = f"bench{os.getpid()}"
    url = broker.url.url
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    master = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster",
        "master",
        "--broker",
        url,
        "--cluster",
        cluster,
        "--heartbeat-interval",
        str(heartbeat),
        "--slave-timeout",
        "120",
        "--http",
        "off",  # no web UI: and 5050 may be taken by someone's master
        "--log-level",
        "warning",
        env=env,
    )
    work = tempfile.mkdtemp(prefix="drfmesos-bench-slaves-")
    started = time.perf_counter()
    slaves = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster",
        "slave",
        "--broker",
        url,
        "--cluster",
        cluster,
        "--count",
        str(count),
        "--simulated-tasks",
        "--resources",
        "cpus:4;mem:4096",
        "--work-dir",
        work,
        "--log-level",
        "warning",
        env=env,
    )
    try:
        while True:
            state = await fetch_state(broker.url, cluster, timeout=30)
            if len(state.slaves) >= count:
                break
            await asyncio.sleep(0.5)
        registered_s = time.perf_counter() - started
        beats = 0

        async def count_beats(message: Wire, _r: str | None) -> None:
            nonlocal beats
            if isinstance(message, Heartbeat):
                beats += 1

        async with Bus(broker.url, name="bench-listener") as bus:
            await bus.subscribe(Topics(cluster).inbound_all, count_beats, qos=0)
            await asyncio.sleep(window)
        memory = rss_mb(slaves.pid)
    finally:
        for proc in (slaves, master):
            proc.terminate()
            await proc.wait()
        await broker.stop()
        broker.cleanup()
    return [count, registered_s, memory, memory / count * 1024, beats / window]


async def main(counts: list[int], heartbeat: float, window: float) -> None:
    raise_fd_limit(max(counts))  # mosquitto, started from here, inherits it
    rows = [await measure(n, heartbeat, window) for n in counts]
    print(f"logical slaves in one process (--simulated-tasks), heartbeat every {heartbeat}s")
    print(
        table(
            ["slaves", "all registered s", "process RSS MB", "KB/slave", "heartbeats/s at master"],
            rows,
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, action="append")
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    logs.configure("warning")
    asyncio.run(main(args.count or [100, 1000], args.heartbeat, args.window))
