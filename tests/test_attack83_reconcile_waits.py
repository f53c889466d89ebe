"""Attack 83: reconciliation asks kept while a new leader waits for a slave
(`master.reconcile_waits`), driven by a hostile tenant with valid credentials.

After a failover, a framework's Reconcile naming any task id on a slave that has not
re-registered is kept, by slave, and answered when the slave comes back. The ids are the
tenant's to choose: nothing says they are its tasks, nor that they are on that slave.

In process, on the memory transport with the credentials store's ACL: a slave principal,
mallory (the hostile tenant), and a new leader on the same registry.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_failover_slave_claims import T

from master import reconcile_waits
from protocol.wire.framework import Reconcile, ReconcileTask
from protocol.wire.messages import MAX_RECONCILE_TASKS, Update

from harness.failover import Failover, failover_cluster, reregister
from harness.fakes import FakeFramework
from harness.helpers import eventually, open_transport

PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("mallory", "framework"),
]
pytestmark = pytest.mark.timeout(240)


async def framework(name: str, c: Failover, i: int) -> FakeFramework:
    """A framework of mallory's, subscribed, on a connection and inbox of its own."""
    bus = await open_transport(c.stack, c.broker.connector("mallory"), f"mallory-{i}")
    fw = FakeFramework(bus, T, f"in-{i}")
    await bus.subscribe(T.outbox("framework", "mallory") + f"/in-{i}", fw.receive)
    await fw.subscribe(f"{name}{i}", role="mallory")
    return fw


async def ask_about(fw: FakeFramework, slave_id: str, ids: list[str]) -> None:
    """Reconcile `ids` on `slave_id`, in calls of the most one may ask about."""
    for i in range(0, len(ids), MAX_RECONCILE_TASKS):
        tasks = [
            ReconcileTask(task_id=t, slave_id=slave_id) for t in ids[i : i + MAX_RECONCILE_TASKS]
        ]
        await fw.bus.publish(fw.to_master, Reconcile(framework_id=fw.framework_id, tasks=tasks))


class LagProbe:
    """The longest the event loop went without running this task (what `GET /health`,
    heartbeats and every other tenant's calls wait for)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.005)
            now = loop.time()
            self.worst = max(self.worst, now - last)
            last = now

    def __enter__(self) -> LagProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def test_kept_asks_answered_as_their_slave_returns_do_not_stall_the_master(
    tmp_path: Path,
) -> None:
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        sa = await c.slave("slave-a", "sa")
        await c.fail_over()  # sa is of the registry and has not re-registered: recovering
        assert "sa" in c.master.books.recovering
        mallory = await c.framework("mallory")
        await mallory.subscribe("m", role="mallory")
        # 100,000 ids of 197 characters (within the bound of 250,000 a framework, and
        # of the default rate limit: 10,000 asks a second)
        ids = [f"{i:06d}-" + "x" * 190 for i in range(100_000)]
        await ask_about(mallory, "sa", ids)
        waits = c.master.framework_calls.waits
        await eventually(lambda: len(waits) == len(ids), timeout=120)

        with LagProbe() as probe:
            await reregister(sa, [], {})
            await eventually(lambda: "sa" in c.master.books.slaves and not len(waits), 120)
            await mallory.inbox.wait_until(lambda: len(mallory.inbox.of(Update)) > 0, 60)
        # on_reconcile handles the same asks in slices of 256; a slave's return must too
        assert probe.worst < 0.5, f"the master's loop stood still {probe.worst:.2f} s"


async def test_a_tenants_frameworks_together_keep_no_more_asks_than_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound stands for what one tenant may make the master keep: one principal's
    frameworks together should be held to it, as its frameworks share its rate limit."""
    monkeypatch.setattr(reconcile_waits, "MAX_WAITING", 1_000)  # (250,000 in production)
    async with failover_cluster(tmp_path, PRINCIPALS, T) as c:
        await c.slave("slave-a", "sa")
        await c.fail_over()
        assert "sa" in c.master.books.recovering
        frameworks = [await framework("m", c, i) for i in range(4)]  # (200 by default)
        for fw in frameworks:
            await ask_about(fw, "sa", [f"t-{i}" for i in range(1_000)])
        # a last ask answered at once (a slave nobody knows): the principal's calls are
        # handled in order, so every ask above was handled before it
        last = frameworks[-1]
        await ask_about(last, "nowhere", ["probe"])
        await last.inbox.wait_for(Update, lambda u: u.status.task_id == "probe")
        kept = len(c.master.framework_calls.waits)
        assert kept <= reconcile_waits.MAX_WAITING, f"one principal's frameworks keep {kept}"
