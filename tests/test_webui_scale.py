"""The web UI with 50,000 slaves, in a real headless Chromium: it opens in under 2 s
with the summary and the first page of slaves, and its search finds one slave.

The slaves are put straight into an in-process master's books (what 50,000
registrations would leave there): this is the page's and the API's cost, not the
broker's (benchmarks.slaves measures that)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from master.books import Slave
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.transport.bus import Bus
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.browser import browser, shot  # noqa: F401  (the browser fixture)

T = Topics("uiscale")
SLAVES = 50_000
OPENS_WITHIN = 2.0  # seconds (issue #34)


def add_slaves(master: Master, count: int) -> None:
    total, now = Resources(cpus=4, mem=4096), master.outbox.clock()
    for i in range(count):
        sid = f"slave-{i:05d}"
        master.books.slaves[sid] = Slave(sid, "rack", f"host-{i}", total, {}, "", now)
        master.allocator.add_slave(sid, total)


@pytest.mark.timing  # a wall-clock bound
async def test_the_page_opens_fast_with_50000_slaves_and_finds_one(
    mosquitto: MosquittoBroker,
    browser: object,  # noqa: F811
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    config = MasterConfig(http=HttpConfig(port=port), slave_timeout=3600, state_interval=0.5)
    async with Bus(mosquitto.url, name="master") as bus:
        master = Master(bus, T, config)
        await master.start()
        try:
            add_slaves(master, SLAVES)
            driver: object = browser

            def text(element_id: str) -> str:
                return str(driver.find_element(By.ID, element_id).text)  # type: ignore[attr-defined]

            def open_page() -> float:
                started = time.perf_counter()
                driver.get(f"http://127.0.0.1:{port}/")  # type: ignore[attr-defined]
                WebDriverWait(driver, 30, poll_frequency=0.05).until(
                    lambda _: (
                        text("slave-count") == f"({SLAVES})"
                        and "slave-00000" in text("slaves")
                        and f"{SLAVES} slaves" in text("counters")
                    )
                )
                return time.perf_counter() - started

            took = await asyncio.to_thread(open_page)
            shot(driver, "scale-50000-slaves")
            assert took < OPENS_WITHIN, f"the page took {took:.2f}s with {SLAVES} slaves"

            def search() -> str:
                box = driver.find_element(By.ID, "slave-search")  # type: ignore[attr-defined]
                box.send_keys("slave-04242")
                WebDriverWait(driver, 30, poll_frequency=0.05).until(
                    lambda _: text("slave-count") == "(1)"
                )
                return text("slaves")

            found = await asyncio.to_thread(search)
            assert "slave-04242" in found
            assert "host-4242" in found
            assert "slave-00000" not in found
        finally:
            await master.stop()
