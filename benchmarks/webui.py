"""The web UI at scale: 1,000 slaves and 10,000 running tasks.

    python -m benchmarks.webui [--slaves 1000] [--tasks 10000] [--window 30]

Starts mosquitto, a master serving HTTP, one process holding the slaves (simulated
tasks), a framework that fills the cluster with long tasks and one that keeps short tasks
churning. Then measures, beside its bound from the same run:

- the live feed's bytes per second, against sending the whole state every tick (what the
  feed would cost without diffing: /api/v1/state's size times the ticks a second);
- the time to first render in headless Chromium (navigation to the frameworks table
  drawn), against the time to fetch /api/v1/state alone;
- a page of tasks (/api/v1/tasks?limit=50) against the whole state.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.common import percentile, table
from cluster.local.launcher import Launcher
from cluster.local.view import wait_state
from protocol import logs
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from slave.cli import raise_fd_limit


async def timed_get(session: aiohttp.ClientSession, url: str, n: int = 5) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(n):
        start = time.perf_counter()
        async with session.get(url) as r:
            size = len(await r.read())
        times.append(time.perf_counter() - start)
    return percentile(times, 50), size


async def feed_bytes(url: str, window: float) -> tuple[float, int]:
    """Bytes a second the live feed sends after its first snapshot, and how many events."""
    received = events = 0
    async with aiohttp.ClientSession() as session, session.get(url + "api/v1/stream") as r:
        await r.content.readuntil(b"\n\n")  # the snapshot: a page's one-off cost
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < window:
            try:
                chunk = await within(r.content.readuntil(b"\n\n"), window - elapsed)
            except TimeoutError:
                break
            received += len(chunk)
            events += 1
    return received / window, events


def first_render(url: str) -> float:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options
    )
    try:
        driver.get(url)
        WebDriverWait(driver, 60, 0.05).until(
            lambda d: d.execute_script("return window.__firstRender")
        )
        return float(driver.execute_script("return window.__firstRender")) / 1000
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


async def measure(slaves: int, tasks: int, window: float) -> None:
    raise_fd_limit(slaves)
    broker = MosquittoBroker()
    await broker.start()
    work = tempfile.mkdtemp(prefix="bench-webui-")
    launcher = Launcher(broker.url, "webui", Path(work), "warning")
    per_slave = max(1, tasks // slaves)
    try:
        await launcher.start("master", "master", "--http", "127.0.0.1:0",
                             "--allocation-interval", "1", "--slave-timeout", "120")  # fmt: skip
        await launcher.start(
            "slave", "slaves", "--count", str(slaves), "--simulated-tasks",
            "--resources", f"cpus:{per_slave + 1};mem:{(per_slave + 1) * 1024}",
            "--work-dir", f"{work}/slaves",
        )  # fmt: skip
        state = await wait_state(broker.url, "webui", lambda s: s.slaves_registered == slaves,
                                 timeout=300)  # fmt: skip
        url = state.web_ui
        await launcher.start(
            "framework", "framework-long", "drf-demo", "--name", "long", "--task-cpus", "1",
            "--task-mem", "1024", "--task-duration", "3000-3600", "--executor", "command",
            "--tasks-per-offer", "fill", "--max-tasks", str(tasks),
        )  # fmt: skip
        await wait_state(
            broker.url, "webui",
            lambda s: sum(f.running_tasks for f in s.frameworks) >= tasks, timeout=600,
        )  # fmt: skip
        await launcher.start(
            "framework", "framework-churn", "drf-demo", "--name", "churn", "--task-cpus", "0.5",
            "--task-mem", "256", "--task-duration", "2-5", "--executor", "command",
        )  # fmt: skip
        await asyncio.sleep(5)  # warm-up: let the churn start (a benchmark, not a test)
        async with aiohttp.ClientSession() as session:
            state_time, state_size = await timed_get(session, url + "api/v1/state")
            page_time, page_size = await timed_get(session, url + "api/v1/tasks?limit=50")
        rate, events = await feed_bytes(url, window)
        render = await asyncio.to_thread(first_render, url)
        ticks = events / window
        print(f"{slaves} slaves, {tasks} running tasks (+ churn), feed window {window:g}s\n")
        print(table(
            ["figure", "value", "bound (same run)", "bound is"],
            [
                ["live feed, bytes/s", rate, state_size * max(ticks, 2.0),
                 "whole state every tick"],
                ["first render, s", render, state_time, "fetching /api/v1/state once"],
                ["a page of 50 tasks, s", page_time, state_time, "the whole state"],
                ["a page of 50 tasks, bytes", page_size, state_size, "the whole state"],
            ],
        ))  # fmt: skip
    finally:
        await launcher.stop_all()
        await broker.stop()
        broker.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slaves", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=10000)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    logs.configure("warning")
    os.environ.setdefault("PYTHONPATH", os.getcwd())
    asyncio.run(measure(args.slaves, args.tasks, args.window))


if __name__ == "__main__":
    main()
