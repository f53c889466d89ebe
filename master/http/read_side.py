"""The master's read side: its books, policy and counters as the HTTP side reads them
(`MasterReader`), and the `State` snapshot the master publishes on the bus.

Read models only: nothing here changes the books. Views are built for what is asked (a
page of slaves or tasks, never all of them on a big cluster), from the books and the
allocator at one moment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from prometheus_client import Histogram

from master import slave_values
from master.allocation.allocator import Allocator
from master.books import Books
from master.calls.files import FileRequests
from master.config import MasterInfo
from master.counters import MessageCounts, SlaveChurn
from master.http import readout
from master.http.live_feed import LiveFeed
from master.http.reader import BookCounts, ExecutorUsageRow, Gauges, TaskUsageRow
from master.http.slave_pages import slave_page
from master.http.snapshot import (
    LISTED_SLAVES,
    TASK_SORTS,
    completed_view,
    framework_views,
    offer_of,
    role_view,
    snapshot,
)
from master.intake.queues import PrincipalQueues
from master.lag_probe import Backlog
from master.outbox import Outbox
from master.preemptor import Preemptor
from master.updates import TaskUpdates
from master.why_answers import Refusal, WhyAnswers
from protocol.transport.aio import loop_time
from protocol.transport.base import Transport
from protocol.wire.messages import (
    ClusterEvent,
    FileData,
    FrameworkView,
    Offer,
    RoleView,
    SlaveView,
    State,
    TaskView,
)
from protocol.wire.resources import Resources
from protocol.wire.why import Why

# The share of the master's loop that /metrics' walk over every task and slave may take
# (see ReadSide._walked). A walk over fewer than WALK_REUSED_PAST tasks and slaves is
# never reused, however long it took (a small cluster's on a loaded machine: always fresh).
WALK_SHARE = 0.1
WALK_REUSED_PAST = 10_000
monotonic_seconds = time.monotonic  # when (a test's to set)
walk_clock = time.perf_counter  # how long the walk took (a test's to set)


class ReadSide:
    """A `master.http.reader.MasterReader`: what the master's parts show, read where they
    keep it. `web_ui` is where the HTTP API listens, once it does."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        preemptor: Preemptor,
        outbox: Outbox,
        files: FileRequests,
        *,
        info: MasterInfo,
        policy: str,
        bus: Transport,
        churn: SlaveChurn,
        messages: MessageCounts,
        updates: TaskUpdates,
        queues: PrincipalQueues,
        why: WhyAnswers,
        round_duration: Histogram,
        feed: LiveFeed,
        backlog: Callable[[], Backlog],
    ) -> None:
        """`info`, `policy`: what a snapshot says of this master; `bus`: its message
        counts; `backlog`: how far behind the master reads its calls."""
        self.books, self.allocator, self.preemptor = books, allocator, preemptor
        self.outbox, self.files, self.info, self.policy = outbox, files, info, policy
        self.bus, self.churn, self.messages, self.updates = bus, churn, messages, updates
        self.queues, self.round_duration, self.feed = queues, round_duration, feed
        self.backlog, self.why = backlog, why
        self.web_ui = ""
        self._walk: tuple[readout.TaskCounts, Resources] | None = None  # (see _walked)
        self._walk_again = 0.0

    # -- counters, where they are kept ---------------------------------------------------------
    @property
    def master_id(self) -> str:
        return self.info.master_id

    @property
    def recent_events(self) -> Sequence[ClusterEvent]:
        return self.outbox.recent_events

    @property
    def event_counts(self) -> Mapping[str, int]:
        return self.outbox.event_counts

    @property
    def tasks_ended(self) -> Mapping[str, int]:
        return self.outbox.tasks_ended

    @property
    def refused(self) -> Mapping[str, int]:
        return self.outbox.refused

    @property
    def update_resends(self) -> int:
        return self.updates.resends

    # -- the books ---------------------------------------------------------------------------
    def state(self, include_tasks: bool = True) -> State:
        """The books as a snapshot; past LISTED_SLAVES slaves it counts slaves, tasks and
        offers instead of listing them (a snapshot of 50,000 would outgrow the broker's
        message limit, and cost the loop seconds a tick): /api/v1 pages them."""
        a = self.allocator
        fids = list(self.books.frameworks)
        small = len(self.books.slaves) <= LISTED_SLAVES
        allocation = {f: a.allocation(f) for f in fids}
        # (allocated_total walks every slave: 50,000 took the loop ~0.1 s a tick. A big
        # cluster sums the frameworks' instead, which leaves out only the tasks of
        # frameworks not yet back after a failover)
        allocated = a.allocated_total() if small else sum(allocation.values(), Resources())
        return snapshot(
            self.books,
            a,
            master_id=self.info.master_id,
            now=time.time(),
            policy=self.policy,
            allocated=allocated,
            allocation=allocation,
            free={s: a.free(s) for s in self.books.slaves} if small else None,
            include_tasks=include_tasks and small,
            refused=dict(self.outbox.refused),
            roles=self.preemptor.with_fair_shares(self._role_views()),
            preemption=self.preemptor.preemption_view(),
            fair=self.preemptor.preemption.fair,
            starving=self.preemptor.starving(loop_time()),
            web_ui=self.web_ui,
            epoch=self.info.epoch,
        )

    def framework_views(self) -> tuple[list[FrameworkView], list[FrameworkView]]:
        a, books = self.allocator, self.books
        allocation = {f: a.allocation(f) for f in books.frameworks}
        registered = framework_views(
            books,
            a,
            allocation,
            self.preemptor.preemption.fair,
            self.preemptor.starving(loop_time()),
        )
        completed = [completed_view(fw, a) for fw in books.completed_frameworks.values()]
        return registered, completed

    def _role_views(self) -> list[RoleView]:
        """The allocator's role standings as the wire shows them."""
        return [role_view(r) for r in self.allocator.roles.views()]

    def role_views(self) -> tuple[str, list[RoleView]]:
        return self.policy, self.preemptor.with_fair_shares(self._role_views())

    def why_of(self, framework: str, kind: str, principal: str) -> Why | Refusal:
        found = self.why.find(framework, kind, principal)
        if isinstance(found, Refusal):
            return found
        return self.why.answer(found, operator=kind == "operator", principal=principal)

    def framework_principal(self, framework_id: str) -> str | None:
        books = self.books
        fw = books.frameworks.get(framework_id) or books.completed_frameworks.get(framework_id)
        return None if fw is None else fw.principal

    def counts(self) -> BookCounts:
        return readout.counts(self.books)

    def gauges(self) -> Gauges:
        a, stats = self.allocator, self.preemptor.preemption.stats
        shares = {f: a.dominant_share(f) for f in self.books.frameworks}
        tasks, allocated = self._walked()
        return replace(
            readout.gauges(
                self.books,
                tasks,
                a.total,
                allocated,
                shares,
                self.preemptor.preemption.fair,
                self._role_views(),
                self.bus.stats,
            ),
            tasks_preempted=stats.tasks_preempted,
            work_lost_seconds=stats.work_lost_seconds,
        )

    def _walked(self) -> tuple[readout.TaskCounts, Resources]:
        """The tasks counted and everything allocated: a walk over every task and slave
        (at 100,000 slaves and 200,000 tasks some 0.5 s of the loop), so a big one is
        reused for a while: at most WALK_SHARE of the loop goes to it, however often
        /metrics is scraped (every 2 s, the walks took a quarter of it). A small one is
        done afresh each time."""
        now = monotonic_seconds()
        if self._walk is None or now >= self._walk_again:
            took = walk_clock()
            self._walk = readout.task_counts(self.books), self.allocator.allocated_total()
            took = walk_clock() - took
            big = len(self.books.slaves) + self._walk[0].live > WALK_REUSED_PAST
            self._walk_again = now + took / WALK_SHARE if big else now
        return self._walk

    def task_usage(self) -> Iterator[TaskUsageRow]:
        return readout.task_usage(self.books)

    def executor_usage(self) -> Iterator[ExecutorUsageRow]:
        return readout.executor_usage(self.books)

    def slave_view(self, slave_id: str) -> SlaveView:
        slave = self.books.slaves[slave_id]
        heard = time.time() - (loop_time() - slave.last_seen)
        out = self.books.maintenance.get(slave_id)
        values = slave_values.free(self.books, slave)
        return slave.view(self.allocator.free(slave_id), round(heard, 3), out, values)

    def slave_page(
        self, sort: str = "", offset: int = 0, limit: int = 100, search: str = ""
    ) -> tuple[list[str], int]:
        """A page of slave ids in `sort`'s order (SLAVE_SORTS; by id by default): by
        `last_heartbeat` the longest unheard first, so "which are late" is the first page;
        a `-` before reverses it. Of the slaves whose id or hostname holds `search`; and
        how many those are."""
        return slave_page(self.books.slaves, sort, offset, limit, search)

    def offer_views(self, offset: int = 0, limit: int = 100) -> tuple[list[Offer], int]:
        """A page of outstanding offers, oldest first; and how many there are."""
        records = list(self.books.offers.values())[offset : offset + limit]
        return [offer_of(self.books, r) for r in records], len(self.books.offers)

    def task_views(
        self,
        framework_id: str | None,
        state: str | None,
        offset: int = 0,
        limit: int = 100,
        search: str = "",
        sort: str = "",
    ) -> tuple[list[TaskView], int]:
        """A page of tasks, running and recently ended, of one framework or all, in one
        state or all, whose id or name holds `search`, in `sort`'s order (TASK_SORTS; by
        default live ones first); and how many match in all. Views are built for the page
        only."""
        matching = [
            task
            for fw in (*self.books.frameworks.values(), *self.books.completed_frameworks.values())
            if framework_id is None or fw.framework_id == framework_id
            for task in (*fw.tasks.values(), *fw.ended.values())
            if state is None or task.state.value == state
            if not search or search in task.task_id or search in task.info.name
        ]
        if sort:
            key, newest_first = TASK_SORTS[sort.lstrip("-")], sort.startswith("-")
            matching.sort(key=key, reverse=newest_first)
        page = [task.view() for task in matching[offset : offset + limit]]
        return page, len(matching)

    async def read_task_file(
        self, principal: str, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        return await self.files.read_task_file(
            principal, framework_id, task_id, name, offset, length
        )
