"""Newcomer 88: Ctrl-C on a framework with a failover timeout tore it down.

A newcomer's own framework registered with `failover_timeout=120` and kept its framework
id in a file, to come back after a restart of itself (examples/README.md, "Failover": "a
framework whose process dies ... keeps its tasks for that long"). Stopped with Ctrl-C --
`asyncio.run` then cancels `driver.run()` -- it sent a Teardown on its way out, and the
master killed its tasks; the restarted process found its framework gone. Killed with
SIGTERM or SIGKILL instead, the broker's Last Will told the master, and the tasks were
kept. In Mesos (and pymesos) only an explicit `stop()` tears a framework down; a
scheduler whose process ends leaves its tasks for its failover timeout.
"""

from __future__ import annotations

import asyncio

from frameworks import Scheduler, SchedulerDriver
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


async def _cancelled_after_subscribing(cluster: Cluster, failover_timeout: float) -> str:
    """Run a driver as `asyncio.run(driver.run())` does, and cancel it as Ctrl-C does."""
    driver = SchedulerDriver(
        Scheduler(),
        name="mine",
        broker=cluster.connect,
        cluster=T.cluster,
        failover_timeout=failover_timeout,
    )
    running = asyncio.create_task(driver.run())
    await eventually(lambda: driver.framework_id is not None)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    # a call of the same principal after it: served after whatever the driver's
    # going sent (its Teardown, or its Last Will)
    await cluster.framework("later", principal=driver.principal)
    return driver.framework_id or ""


async def test_ctrl_c_leaves_a_framework_with_a_failover_timeout_to_its_successor(
    cluster: Cluster,
) -> None:
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    fid = await _cancelled_after_subscribing(cluster, failover_timeout=120)
    framework = cluster.master.books.frameworks.get(fid)
    assert framework is not None, "torn down: its tasks would have been killed"
    assert not framework.connected  # its failover timeout runs, as for a process gone


async def test_ctrl_c_still_tears_down_a_framework_without_one(cluster: Cluster) -> None:
    await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    fid = await _cancelled_after_subscribing(cluster, failover_timeout=0)
    assert fid not in cluster.master.books.frameworks
