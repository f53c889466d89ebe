"""What the HTTP side (the API, `/metrics`, the live page) reads of the master: this
interface and nothing else, so the master's books and policy can change behind it and
the HTTP side can be served from a fake. The master implements it (master.master)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import Histogram

from master.counters import SlaveChurn
from master.http.live_feed import LiveFeed
from master.intake.queues import PrincipalQueues
from master.lag_probe import Backlog
from master.why_answers import Refusal
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
from protocol.wire.why import Why


@dataclass(frozen=True)
class FrameworkShare:
    framework_id: str
    name: str
    role: str
    share: float  # its dominant share, offered or in use
    fair: float | None  # its share of the policy's ideal, once preemption computed it
    tasks: int = 0  # its live tasks the master knows (a new leader: those re-registered)


@dataclass(frozen=True)
class TaskUsageRow:
    framework_id: str
    task_id: str
    slave_id: str
    usage: TaskUsage


@dataclass(frozen=True)
class ExecutorUsageRow:
    framework_id: str
    executor_id: str
    slave_id: str
    usage: ExecutorUsage


@dataclass(frozen=True)
class BookCounts:
    """How many of each the books hold (cheap: `/health` reads it)."""

    slaves: int
    slaves_connected: int
    frameworks: int
    offers_outstanding: int
    recovering: int  # slaves of the registry still awaited after a failover
    # slaves an operator took out of the offers, by what they are: deactivated, draining,
    # drained (registered or not)
    maintenance: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Gauges:
    """The books' numbers `/metrics` shows, read at one moment."""

    counts: BookCounts
    tasks_by_state: dict[str, int]  # live tasks only
    total: Mapping[str, float]
    allocated: Mapping[str, float]
    framework_shares: list[FrameworkShare] = field(default_factory=list)
    role_shares: list[tuple[str, float]] = field(default_factory=list)
    bus_in: int = 0
    bus_out: int = 0
    tasks_preempted: int = 0
    work_lost_seconds: float = 0.0
    tasks_by_health: dict[str, int] = field(default_factory=dict)  # live, health-checked


class MasterReader(Protocol):
    """The master as the HTTP side sees it: views and counts, never the books."""

    @property
    def master_id(self) -> str: ...
    @property
    def web_ui(self) -> str: ...
    @property
    def feed(self) -> LiveFeed: ...
    @property
    def recent_events(self) -> Sequence[ClusterEvent]: ...
    @property
    def queues(self) -> PrincipalQueues: ...
    @property
    def churn(self) -> SlaveChurn: ...
    @property
    def messages(self) -> MessageCounts: ...
    @property
    def event_counts(self) -> Mapping[str, int]: ...
    @property
    def tasks_ended(self) -> Mapping[str, int]: ...
    @property
    def refused(self) -> Mapping[str, int]: ...
    @property
    def update_resends(self) -> int: ...
    @property
    def round_duration(self) -> Histogram: ...

    def backlog(self) -> Backlog: ...
    def counts(self) -> BookCounts: ...
    def gauges(self) -> Gauges: ...
    def task_usage(self) -> Iterator[TaskUsageRow]: ...
    def executor_usage(self) -> Iterator[ExecutorUsageRow]: ...
    def state(self, include_tasks: bool = True) -> State: ...
    def framework_views(self) -> tuple[list[FrameworkView], list[FrameworkView]]:
        """The registered frameworks, and the last ones removed (oldest first)."""
        ...

    def role_views(self) -> tuple[str, list[RoleView]]:
        """The policy, and each role with its share and fair share."""
        ...

    def framework_principal(self, framework_id: str) -> str | None:
        """Whose framework this is (registered or completed), if it is known."""
        ...

    def slave_page(
        self, sort: str = "", offset: int = 0, limit: int = 100, search: str = ""
    ) -> tuple[list[str], int]: ...
    def slave_view(self, slave_id: str) -> SlaveView: ...
    def offer_views(self, offset: int = 0, limit: int = 100) -> tuple[list[Offer], int]: ...
    def task_views(
        self,
        framework_id: str | None,
        state: str | None,
        offset: int = 0,
        limit: int = 100,
        search: str = "",
        sort: str = "",
    ) -> tuple[list[TaskView], int]: ...
    async def read_task_file(
        self, principal: str, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        """For `principal` (`master.calls.files.FileReadsBusy` past its reads at once)."""
        ...

    def why_of(self, framework: str, kind: str, principal: str) -> Why | Refusal:
        """Why a framework (an id or a name) is offered nothing, if the asker (`kind`,
        `principal`) may see it (master.why_answers)."""
        ...
