"""The HTTP side reads the master only through `MasterReader` (issue 29): served from a
fake that has no books, no allocator and no bus, the API, /health and /metrics answer,
and /frameworks and /roles never build a whole state."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
from prometheus_client import Histogram

from master.counters import SlaveChurn
from master.http.api import HttpApi
from master.http.config import HttpConfig
from master.http.live_feed import LiveFeed
from master.http.reader import (
    BookCounts,
    ExecutorUsageRow,
    FrameworkShare,
    Gauges,
    MasterReader,
    TaskUsageRow,
)
from master.intake.queues import PrincipalQueues
from master.lag_probe import Backlog
from master.rate_limits import RateLimits
from protocol.transport.message_counts import MessageCounts
from protocol.wire.messages import (
    ClusterEvent,
    ExecutorUsage,
    FileData,
    FrameworkView,
    Offer,
    RoleView,
    SlaveView,
    State,
    TaskUsage,
    TaskView,
)
from protocol.wire.resources import Resources

COUNTS = BookCounts(slaves=3, slaves_connected=2, frameworks=1, offers_outstanding=0, recovering=1)


def framework(framework_id: str) -> FrameworkView:
    return FrameworkView(
        framework_id=framework_id,
        principal="alice",
        name="A",
        role="eng",
        weight=1.0,
        active=True,
        suppressed=False,
        allocated=Resources(cpus=1),
        offered=Resources(),
        dominant_share=0.25,
        running_tasks=2,
        finished_tasks=0,
    )


class FakeMaster:
    """A MasterReader with fixed answers; asking it for the whole state fails the test."""

    master_id = "master-fake"
    web_ui = ""

    def __init__(self) -> None:
        self.feed = LiveFeed()
        self.recent_events: list[ClusterEvent] = []
        self.queues = PrincipalQueues(RateLimits.defaults(None, None), time.monotonic)
        self.churn = SlaveChurn(registrations=4)
        self.messages = MessageCounts()
        self.event_counts: Counter[str] = Counter(launch=7)
        self.tasks_ended: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.update_resends = 0
        self.round_duration = Histogram("rounds", "rounds", registry=None)

    def backlog(self) -> Backlog:
        return Backlog(messages=0, oldest_wait=0.0, last_wait=0.0)

    def counts(self) -> BookCounts:
        return COUNTS

    def gauges(self) -> Gauges:
        return Gauges(
            counts=COUNTS,
            tasks_by_state={"TASK_RUNNING": 2},
            total=Resources(cpus=4),
            allocated=Resources(cpus=1),
            framework_shares=[FrameworkShare("fw-1", "A", "eng", 0.25, None)],
            role_shares=[("eng", 0.25)],
        )

    def task_usage(self) -> Iterator[TaskUsageRow]:
        usage = TaskUsage(
            framework_id="fw-1",
            task_id="t-1",
            cpu_user_seconds=1.5,
            cpu_system_seconds=0.5,
            cpu_throttled_seconds=0.0,
            memory_bytes=1024,
            memory_peak_bytes=2048,
        )
        yield TaskUsageRow("fw-1", "t-1", "s-1", usage)

    def executor_usage(self) -> Iterator[ExecutorUsageRow]:
        usage = ExecutorUsage(
            framework_id="fw-1", executor_id="e-1", cpu_user_seconds=3.0, memory_bytes=4096
        )
        yield ExecutorUsageRow("fw-1", "e-1", "s-1", usage)

    def state(self, include_tasks: bool = True) -> State:
        raise AssertionError("the whole state was built for a narrow question")

    def framework_views(self) -> tuple[list[FrameworkView], list[FrameworkView]]:
        return [framework("fw-1")], [framework("fw-0")]

    def role_views(self) -> tuple[str, list[RoleView]]:
        return "hdrf", [RoleView(role="eng", weight=2.0, share=0.25)]

    def framework_principal(self, framework_id: str) -> str | None:
        return "alice" if framework_id == "fw-1" else None

    def slave_page(
        self, sort: str = "", offset: int = 0, limit: int = 100, search: str = ""
    ) -> tuple[list[str], int]:
        return [], 0

    def slave_view(self, slave_id: str) -> SlaveView:
        raise KeyError(slave_id)

    def offer_views(self, offset: int = 0, limit: int = 100) -> tuple[list[Offer], int]:
        return [], 0

    def task_views(
        self,
        framework_id: str | None,
        state: str | None,
        offset: int = 0,
        limit: int = 100,
        search: str = "",
        sort: str = "",
    ) -> tuple[list[TaskView], int]:
        return [], 0

    async def read_task_file(
        self, principal: str, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        raise AssertionError("no file is read here")


@pytest.fixture
async def api() -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    reader: MasterReader = FakeMaster()
    server = HttpApi(reader, HttpConfig(port=0))
    url = await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield url, session
    finally:
        await server.stop()


async def test_frameworks_and_roles_are_answered_from_views_not_a_whole_state(
    api: tuple[str, aiohttp.ClientSession],
) -> None:
    url, session = api
    async with session.get(f"{url}api/v1/frameworks") as r:
        assert r.status == 200
        body = await r.json()
    assert [f["framework_id"] for f in body["frameworks"]] == ["fw-1"]
    assert [f["framework_id"] for f in body["completed_frameworks"]] == ["fw-0"]
    async with session.get(f"{url}api/v1/roles") as r:
        assert r.status == 200
        body = await r.json()
    assert body["policy"] == "hdrf"
    assert [(x["role"], x["weight"]) for x in body["roles"]] == [("eng", 2.0)]


async def test_health_and_metrics_read_the_counts_the_reader_gives(
    api: tuple[str, aiohttp.ClientSession],
) -> None:
    url, session = api
    async with session.get(f"{url}health") as r:
        health = await r.json()
    assert (health["slaves"], health["frameworks"]) == (3, 1)
    assert health["slave_churn"]["connected"] == 2
    assert health["slave_churn"]["disconnected"] == 1
    assert health["slave_churn"]["registrations"] == 4
    async with session.get(f"{url}metrics") as r:
        text = await r.text()
    assert "drfmesos_slaves 3.0" in text
    assert "drfmesos_slaves_disconnected 1.0" in text
    assert 'drfmesos_recovery_slaves{state="waiting"} 1.0' in text
    assert 'drfmesos_tasks{state="TASK_RUNNING"} 2.0' in text
    assert "drfmesos_tasks_launched_total 7.0" in text
    assert 'drfmesos_framework_dominant_share{framework_id="fw-1",name="A",role="eng"} 0.25' in text
    assert 'drfmesos_role_dominant_share{role="eng"} 0.25' in text
    assert 'drfmesos_task_memory_bytes{framework_id="fw-1",slave_id="s-1",task_id="t-1"}' in text
    executor = 'executor_id="e-1",framework_id="fw-1"'
    assert f'drfmesos_executor_memory_bytes{{{executor},slave_id="s-1"}} 4096.0' in text
    assert (
        f'drfmesos_executor_cpu_seconds_total{{{executor},mode="user",slave_id="s-1"}} 3.0' in text
    )
