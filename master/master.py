"""The master: keeps the cluster's books and runs the offer loop over the bus.

This is the imperative shell around `master.allocation.allocator` (the policy) and `master.books`
(the records): it decodes calls from frameworks and slaves, checks them against the books,
changes the books, and says what happened to whom. Bad input is answered with an `Error`
and changes nothing; a refused task is answered with its update instead (TASK_ERROR,
TASK_DROPPED or TASK_LOST: see master.task_states).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from master import readout
from master.authz import Caller
from master.books import (
    LISTED_SLAVES,
    TASK_SORTS,
    completed_view,
    framework_views,
    offer_of,
    role_view,
    snapshot,
)
from master.calls.files import FileRequests
from master.calls.framework_calls import FrameworkCalls
from master.calls.intake import MAX_CALL_ITEMS, CallIntake, Route
from master.calls.limited_calls import LimitedCalls
from master.calls.operator_calls import OperatorCalls
from master.calls.partitions import Partitions
from master.calls.slave_calls import SlaveCalls
from master.calls.why_calls import WhyCalls
from master.ha.recovery import Recovery
from master.ha.registry import Registry
from master.heartbeats import silent
from master.http.reader import BookCounts, Gauges, TaskUsageRow
from master.lag_probe import Backlog, backlog_of
from master.preemptor import Preemptor
from master.rounds import Rounds
from master.shell import PRINCIPAL_REMOVED, MasterConfig, MasterShell
from master.slave_pages import slave_page
from master.why_answers import NotFound, WhyAnswers
from protocol.transport.aio import cancel_and_wait
from protocol.transport.base import Transport
from protocol.wire.codec import (
    DecodeError,
    decode_many,
)
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Decline,
    Error,
    ExecutorExited,
    FileData,
    FrameworkMessage,
    FrameworkView,
    Gone,
    Heartbeat,
    Heartbeats,
    Kill,
    Leader,
    MarkSlaveGone,
    Message,
    Offer,
    ReadTaskFile,
    Reconcile,
    Register,
    Request,
    Reregister,
    Revive,
    RoleView,
    SetQuota,
    SetWeights,
    SlaveView,
    StatusUpdate,
    Subscribe,
    Suppress,
    TaskView,
    Teardown,
    UsageReport,
    WatchEvents,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from protocol.wire.why import AskWhy, Why

if TYPE_CHECKING:  # (aiohttp's: a master with --http off runs without it)
    from master.http.api import DoorFactory, HttpApi

__all__ = ["MAX_CALL_ITEMS", "Master", "MasterConfig"]

LISTED_TEXT = 2 * 2**20  # characters of task names and messages a snapshot lists at most
# seconds between looks at the principals file: a principal removed is cut off within
# this and a tick (the README promises 2 s)
PRINCIPALS_RELOAD = 0.5
PROBE_INTERVAL = 1.0  # seconds between lag probes (master.lag_probe)
SLAVE_CHECK_INTERVAL = 1.0  # seconds between looks for silent slaves (50,000: a few ms each)


class Master:
    """The master: the books, the allocation rounds, and every handler on the bus. It
    composes the shell (state and shared steps) with the call handlers, each built with
    the shell and the collaborators it needs, and routes each call to one of them."""

    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        config: MasterConfig | None = None,
        *,
        registry: Registry | None = None,
        epoch: int = 0,
        master_id: str | None = None,
    ) -> None:
        shell = self.shell = MasterShell(
            bus, topics, config, registry=registry, epoch=epoch, master_id=master_id
        )
        # what the HTTP side, the CLI and the tests read of the master: the shell's objects
        self.bus, self.topics, self.config, self.log = bus, topics, shell.config, shell.log
        self.master_id, self.epoch, self.registry = shell.master_id, shell.epoch, shell.registry
        self.books, self.allocator, self.roles_acl = shell.books, shell.allocator, shell.roles_acl
        self.throttle, self.refused, self.messages = shell.throttle, shell.refused, shell.messages
        self.churn, self.lag, self.sampling = shell.churn, shell.lag, shell.sampling
        self.listeners, self.feed, self.changes = shell.listeners, shell.feed, shell.changes
        self.event_counts, self.tasks_ended = shell.event_counts, shell.tasks_ended
        self.recent_events, self.framework_sinks = shell.recent_events, shell.framework_sinks
        self.framework_calls = FrameworkCalls(shell)
        self.limited = LimitedCalls(shell, self.framework_calls)  # every call's way in
        self.partitions = Partitions(shell)
        self.slave_calls = SlaveCalls(shell, self.partitions)
        self._tasks: list[asyncio.Task[None]] = []  # the loops below, while it serves
        self.offer_rounds = Rounds(shell)  # the allocation rounds, and their offers
        self.round_duration = self.offer_rounds.duration
        self.preemptor = Preemptor(
            self.config,
            self.books,
            shell.cycle,
            self.log,
            now=shell.now,
            send_framework=shell.send_framework,
            send_slave=shell.send_slave,
            event=shell.emit_event,
            request_round=shell.request_round,
            changed=shell.state_changed,
            task_changed=shell.task_changed,
        )
        self.operator = OperatorCalls(shell)  # quota and weights at run time
        self.files = FileRequests(shell)  # tasks' stdout and stderr, read from their slaves
        # why a framework is offered nothing: one answer for the bus, HTTP and Mesos's API
        self.why = WhyAnswers(self.books, shell.cycle, self.throttle, self.roles_acl, shell.now)
        self.why_calls = WhyCalls(self.why, shell.refuse, shell.post_to_framework_topic)
        # other APIs served beside ours on --http: the composition root (master.cli) adds
        # Mesos's (master.mesos_api.doors), which reach this master's handlers themselves
        self.http_doors: list[DoorFactory] = []
        self.recovery = Recovery(
            self.config,
            self.books,
            self.allocator,
            self.registry,
            self.churn,
            self.log,
            epoch=self.epoch,
            now=shell.now,
            slave_gone=shell.mark_slave_removed,
        )
        self.listeners.task_ended.append(self.preemptor.task_ended)
        self.listeners.framework_gone.append(shell.cycle.forget)

    @property
    def web_ui(self) -> str:
        """Where the HTTP API listens, once it does ("" before)."""
        return self.shell.web_ui

    @property
    def rounds(self) -> int:
        """Allocation rounds run (for tests and logs)."""
        return self.offer_rounds.count

    @property
    def update_resends(self) -> int:
        return self.shell.update_resends

    def _routes(self) -> dict[str, dict[type[Wire], Route]]:
        """What each kind of principal may call (anything else is refused)."""
        return {
            "framework": {
                Subscribe: self.framework_calls.on_subscribe,
                Accept: self.framework_calls.on_accept,
                Decline: self.framework_calls.on_decline,
                Revive: self.framework_calls.on_revive,
                Suppress: self.framework_calls.on_suppress,
                Request: self.framework_calls.on_request,
                Kill: self.framework_calls.on_kill,
                Acknowledge: self.framework_calls.on_acknowledge,
                Reconcile: self.framework_calls.on_reconcile,
                Message: self.framework_calls.on_message,
                Teardown: self.framework_calls.on_teardown,
                ReadTaskFile: self.files.on_read_task_file,
                AskWhy: self.why_calls.on_ask_why,
                Error: self.slave_calls.on_error,
            },
            "slave": {
                Register: self.slave_calls.on_register,
                Reregister: self.slave_calls.on_reregister,
                Heartbeat: self.slave_calls.on_heartbeat,
                Heartbeats: self.slave_calls.on_heartbeats,
                StatusUpdate: self.slave_calls.on_status_update,
                FrameworkMessage: self.slave_calls.on_executor_message,
                ExecutorExited: self.slave_calls.on_executor_exited,
                FileData: self.files.on_file_data,
                UsageReport: self.slave_calls.on_usage_report,
                Error: self.slave_calls.on_error,
            },
            "operator": {
                Teardown: self.framework_calls.on_teardown,
                SetQuota: self.operator.on_set_quota,
                MarkSlaveGone: self.partitions.on_mark_slave_gone,
                SetWeights: self.operator.on_set_weights,
                WatchEvents: self.operator.on_watch_events,
                AskWhy: self.why_calls.on_ask_why,
            },
        }

    async def start(self) -> None:
        self.routes = self._routes()
        # who sent each call, how much, how it is read; each principal's in its turn
        self.intake = CallIntake(self.shell, self.limited, self.routes, self._gone)
        self.recovery.recover()
        self.http: HttpApi | None = None
        if self.config.http is not None:  # a port in use is said, and the bus goes on
            from master.http.api import HttpApi

            api = HttpApi(self, self.config.http, self.http_doors)
            try:
                self.shell.web_ui = await api.start()
                self.http = api
            except OSError as e:
                await api.stop()
                self.log.error("http.failed", error=str(e), port=self.config.http.port)
        self.announce_leader()
        self.bus.on_connect(self._reannounce)  # a broker that lost its retained messages
        await self.bus.subscribe_raw(self.topics.inbound_all, self.intake.arrive)
        await self.bus.subscribe_raw(self.topics.gone_all, self._gone_arrives)
        self._tasks = [
            asyncio.create_task(self.offer_rounds.loop(), name="master-rounds"),
            asyncio.create_task(self._timer_loop(), name="master-timers"),
            asyncio.create_task(self._probe_loop(), name="master-lag-probe"),
        ]
        self.log.info(
            "master.started",
            policy=self.config.policy,
            topic=self.topics.inbound_all,
            epoch=self.epoch,
            principals=str(self.config.principals) if self.config.principals else None,
            rate_limits=self.config.rate_limits is not None,
        )

    async def handle_call(self, message: Wire, caller: Caller) -> None:
        """A call that came another way than the bus (the Mesos HTTP API, master.mesos_api),
        from a caller that transport authenticated: the bus's handlers, counts and limits."""
        kind = message.TYPE
        self.messages.received[kind] += 1
        route = self.routes[caller.kind].get(type(message))
        if route is None:
            self.shell.refuse(caller, f"a {caller.kind} may not send {kind}", "forbidden", kind)
            return
        await self.limited.call(self.messages.counted(route, kind), message, caller, True)

    async def connection_gone(self, caller: Caller, gone: Gone) -> None:
        """That transport's connection for `caller` closed: as the bus's Last Will."""
        await self.slave_calls.on_gone(gone, caller)

    def announce_leader(self) -> None:
        """Retained, so a party that connects later learns who leads at once."""
        self.bus.post(
            self.topics.leader,
            Leader(
                master_id=self.master_id, epoch=self.epoch, http=self.web_ui, elected_at=time.time()
            ),
            retain=True,
        )

    async def _reannounce(self) -> None:
        self.announce_leader()

    async def _gone_arrives(self, topic: str, payload: bytes) -> None:
        """A Last Will, published by the broker under the vanished party's own name: it
        waits in that party's queue in the intake, behind the calls it sent before it went
        (MQTT orders nothing across topics; Mesos hears a framework's calls and then its
        disconnection on one connection)."""
        if topic == self._probe_topic():
            lag = self.lag.back(payload)
            if lag is not None:  # what the intake read before it was sent before it
                self.intake.fair.sent_by(time.monotonic() - lag)
            return
        parts = topic.split("/")
        if len(parts) != 5 or parts[3] not in ("slave", "framework"):
            return
        self.intake.arrive_gone(parts[3], parts[4], topic, payload)

    async def _gone(self, topic: str, payload: bytes) -> None:
        parts = topic.split("/")
        for item in decode_many(payload):
            if isinstance(item, DecodeError) or not isinstance(item.message, Gone):
                continue
            await self.slave_calls.on_gone(item.message, Caller(parts[3], parts[4], None))

    def _probe_topic(self) -> str:
        return self.topics.gone("master", self.bus.principal or "master")

    async def _probe_loop(self) -> None:
        """A probe a second to the master's own topic, timed back (see backlog())."""
        while True:
            try:
                await self.bus.publish_raw(self._probe_topic(), self.lag.send())
            except Exception as e:  # a closing bus, say: the next probe tries again
                self.log.debug("lag_probe.failed", error=str(e))
            await asyncio.sleep(PROBE_INTERVAL)

    def backlog(self) -> Backlog:
        """How far behind the master is in reading its calls (/metrics, /health)."""
        bus_oldest, last = self.bus.backlog_ages()
        fair = self.intake.fair
        ages = (max(bus_oldest, fair.oldest_age()), last)
        return backlog_of(self.bus.backlog() + fair.backlog(), ages, self.lag)

    async def stop(self) -> None:
        if getattr(self, "http", None) is not None:
            assert self.http is not None
            await self.http.stop()
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        await self.intake.fair.close()
        await self.throttle.close()
        await self.preemptor.stop_fair_shares()
        self.log.info("master.stopped", rounds=self.rounds, **self.bus.stats)

    async def run(self) -> None:
        """Start, and serve until cancelled."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def _disconnect_removed_principals(self) -> None:
        """`drfmesos auth remove`: the broker lets the principal in no more, and its
        frameworks are disconnected (their failover timeouts run) whether or not their
        connection left a Last Will to say it ended, over the bus or HTTP (told why
        first: a Mesos framework's stream closes on it). Its calls are refused from now
        (LimitedCalls); added back, it may re-subscribe."""
        for fw in list(self.books.frameworks.values()):
            why = self.roles_acl.unknown(fw.principal)
            if fw.connected and why is not None:
                self.shell.send_framework(
                    fw, Error(message=why, code=PRINCIPAL_REMOVED, about=fw.framework_id)
                )
                self.shell.disconnect_framework(fw, "its principal was removed")

    async def _timer_loop(self) -> None:
        tick = min(0.25, self.config.state_interval)
        next_heartbeat = self.shell.now()
        next_state = self.shell.now()
        next_acl = self.shell.now() + PRINCIPALS_RELOAD
        next_slave_check = self.shell.now()
        while True:
            now = self.shell.now()
            try:
                if now >= next_acl:  # `drfmesos auth add` reaches a running master
                    next_acl = now + PRINCIPALS_RELOAD
                    if await self.roles_acl.refresh():
                        self._disconnect_removed_principals()
                if now >= next_slave_check:
                    next_slave_check = now + SLAVE_CHECK_INTERVAL
                    self._expire_slaves(now)
                self._expire(now)
                self.recovery.expire_recovering(now)
                self._retry_updates(now)
                self.preemptor.preemption_tick(now)
                if now >= next_heartbeat:
                    next_heartbeat = now + self.config.heartbeat_interval
                    for fw in self.books.frameworks.values():
                        if fw.connected:
                            self.shell.send_framework(fw, Heartbeat(source=self.master_id))
                if now >= next_state and self.shell.state_dirty:
                    next_state = now + self.config.state_interval
                    self.publish_state()
            except Exception:
                self.log.exception("timers.failed")
            await asyncio.sleep(tick)

    def _expire_slaves(self, now: float) -> None:
        """Slaves silent past the timeout, from what this master could have read."""
        behind, timeout = self.backlog().oldest_wait, self.config.slave_timeout
        for slave in silent(self.books.slaves.values(), now, timeout, behind, PROBE_INTERVAL):
            self.shell.remove_slave(slave, f"no heartbeat for {timeout}s")

    def _expire(self, now: float) -> None:
        for fw in list(self.books.frameworks.values()):
            if (
                not fw.connected
                and fw.disconnected_at is not None
                and now - fw.disconnected_at > fw.failover_timeout
            ):
                self.shell.remove_framework(fw, f"failover timeout {fw.failover_timeout}s passed")
        for timed_out in self.shell.cycle.expired(now):  # (back in the pool, filtered)
            self.shell.rescind_offer(self.books.offers[timed_out.offer_id], recover=False)
            self.shell.request_round()

    def _retry_updates(self, now: float) -> None:
        for fw in self.books.frameworks.values():
            if not fw.connected:
                continue
            for pending in fw.pending.values():
                if pending.next_attempt <= now:
                    self.shell.resend_update(fw, pending, now)

    def state(self, include_tasks: bool = True) -> Any:
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
            master_id=self.master_id,
            now=time.time(),
            policy=self.config.policy,
            total=a.total,
            allocated=allocated,
            allocation=allocation,
            free={s: a.free(s) for s in self.books.slaves} if small else None,
            include_tasks=include_tasks and small,
            refused=dict(self.refused),
            roles=self.preemptor.with_fair_shares(self._role_views()),
            preemption=self.preemptor.preemption_view(),
            fair=self.preemptor.preemption.fair,
            starving=self.preemptor.starving(self.shell.now()),
            web_ui=self.web_ui,
            epoch=self.epoch,
        )

    async def read_task_file(
        self, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        return await self.files.read_task_file(framework_id, task_id, name, offset, length)

    def framework_views(self) -> tuple[list[FrameworkView], list[FrameworkView]]:
        a, books = self.allocator, self.books
        allocation = {f: a.allocation(f) for f in books.frameworks}
        registered = framework_views(
            books,
            a.total,
            allocation,
            self.preemptor.preemption.fair,
            self.preemptor.starving(self.shell.now()),
        )
        return registered, [completed_view(fw) for fw in books.completed_frameworks.values()]

    def _role_views(self) -> list[RoleView]:
        """The allocator's role standings as the wire shows them."""
        return [role_view(r) for r in self.allocator.role_views()]

    def role_views(self) -> tuple[str, list[RoleView]]:
        return self.config.policy, self.preemptor.with_fair_shares(self._role_views())

    def why_of(self, framework: str, kind: str, principal: str) -> Why | NotFound:
        found = self.why.find(framework, kind, principal)
        if isinstance(found, NotFound):
            return found
        return self.why.answer(found, operator=kind == "operator")

    def framework_principal(self, framework_id: str) -> str | None:
        books = self.books
        fw = books.frameworks.get(framework_id) or books.completed_frameworks.get(framework_id)
        return None if fw is None else fw.principal

    def counts(self) -> BookCounts:
        return readout.counts(self.books)

    def gauges(self) -> Gauges:
        a, stats = self.allocator, self.preemptor.preemption.stats
        shares = {f: a.dominant_share(f) for f in self.books.frameworks}
        return replace(
            readout.gauges(
                self.books,
                a.total,
                a.allocated_total(),
                shares,
                self.preemptor.preemption.fair,
                self._role_views(),
                self.bus.stats,
            ),
            tasks_preempted=stats.tasks_preempted,
            work_lost_seconds=stats.work_lost_seconds,
        )

    def task_usage(self) -> Iterator[TaskUsageRow]:
        return readout.task_usage(self.books)

    def slave_view(self, slave_id: str) -> SlaveView:
        slave = self.books.slaves[slave_id]
        heard = time.time() - (self.shell.now() - slave.last_seen)
        return slave.view(self.allocator.free(slave_id), round(heard, 3))

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

    def publish_state(self) -> None:
        self.shell.state_dirty = False
        state = self.state(include_tasks=len(self.books.slaves) < 200)
        if sum(len(t.name) + len(t.message) for t in state.tasks) > LISTED_TEXT:
            # tenants' names and their executors' messages would outgrow the broker's
            # limit (the snapshot unpublishable, tools left with a stale one): counted
            state = state.model_copy(update={"tasks": [], "offers": []})
        self.bus.post(self.topics.state, state, retain=True)
        self.feed.tick(state)
