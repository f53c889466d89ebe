"""A framework whose master stops says so. A newcomer pressed Ctrl-C on `drfmesos master`
under a running `drfmesos run`: the run, and the slave, said nothing at all, for as long
as they ran, where a Mesos scheduler counts missed heartbeats and says the master is
lost. The driver now warns `framework.master_silent` once MISSED heartbeat intervals
pass unheard while it is subscribed, and `framework.master_heard` when the master
answers again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog

from frameworks import SchedulerDriver
from master.config import MasterConfig
from protocol.master_silence import FRAMEWORK, MasterSilence
from protocol.transport.aio import cancel_and_wait

from harness.helpers import InProcess, Recorder, eventually, in_process_cluster

CLUSTER = "quiet"
INTERVAL = 0.3  # the master's heartbeats to frameworks, here


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    config = MasterConfig(allocation_interval=0.1, heartbeat_interval=INTERVAL)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as c:
        yield c


async def test_a_framework_whose_master_stops_says_so(cluster: InProcess) -> None:
    driver = SchedulerDriver(Recorder(), name="quiet", broker=cluster.connect, cluster=CLUSTER)
    with structlog.testing.capture_logs() as logs:
        await driver.start()
        try:
            # heartbeats keep it quiet while the master runs: MISSED intervals and more pass
            heard = 0
            silence = driver._link.silence  # (the driver's watch: counted as it hears them)
            hear = silence.heard

            def counted() -> None:
                nonlocal heard
                heard += 1
                hear()

            silence.heard = counted  # type: ignore[method-assign]
            await eventually(lambda: heard >= 5, timeout=10)
            assert not [e for e in logs if e["event"] == "framework.master_silent"]
            await cluster.master.stop()  # (as Ctrl-C of `drfmesos master` stops it)
            await eventually(
                lambda: any(e["event"] == "framework.master_silent" for e in logs), timeout=10
            )
        finally:
            driver.stop()
            await driver.join()
    [said] = [e for e in logs if e["event"] == "framework.master_silent"]
    assert said["log_level"] == "warning"
    assert said["silent"] >= 3 * INTERVAL
    assert f"drfmesos master --cluster {CLUSTER}" in said["detail"]


async def test_the_master_heard_again_closes_the_silence() -> None:
    lines: list[dict[str, object]] = []

    class Log:
        def warning(self, event: str, **fields: object) -> None:
            lines.append({"event": event, **fields})

    silence = MasterSilence(lambda: Log(), "c", lambda: True, FRAMEWORK)
    silence.subscribed(0.05)
    watch = asyncio.create_task(silence.run())
    try:
        await eventually(lambda: [e["event"] for e in lines] == ["framework.master_silent"])
        silence.heard()
        assert [e["event"] for e in lines] == ["framework.master_silent", "framework.master_heard"]
    finally:
        await cancel_and_wait(watch)
