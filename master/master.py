"""The master: keeps the cluster's books and runs the offer loop over the bus.

This is the imperative shell around `master.allocation.allocator` (the policy) and `master.books`
(the records): it decodes calls from frameworks and slaves, checks them against the books,
changes the books, and says what happened to whom. Bad input is answered with an `Error`
and changes nothing; a refused task is answered with its update instead (TASK_ERROR,
TASK_DROPPED or TASK_LOST: see master.task_states).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

from prometheus_client import Histogram

from master import readout
from master.authz import Caller
from master.books import (
    LISTED_SLAVES,
    TASK_SORTS,
    OfferRecord,
    completed_view,
    framework_views,
    offer_of,
    role_view,
    snapshot,
)
from master.calls.files import FileRequests
from master.calls.limited_calls import INTAKE_WEIGHTS, LimitedCalls
from master.calls.operator_calls import OperatorCalls
from master.calls.slave_calls import SlaveCalls
from master.fair_intake import FairIntake
from master.ha.recovery import Recovery
from master.heartbeats import silent
from master.http.api import DoorFactory, HttpApi
from master.http.reader import BookCounts, Gauges, TaskUsageRow
from master.lag_probe import Backlog, backlog_of
from master.offer_bound import bounded
from master.preemptor import Preemptor
from master.shell import MasterConfig
from master.slave_pages import slave_page
from protocol.transport.aio import cancel_and_wait
from protocol.wire.codec import (
    MAX_MESSAGE_BYTES,
    DecodeError,
    Envelope,
    count_messages,
    decode_many,
)
from protocol.wire.messages import (
    MAX_OFFERS_PER_MESSAGE,
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
    Offers,
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
    Wire,
    new_id,
)
from protocol.wire.resources import Resources

__all__ = ["Master", "MasterConfig"]

PRINCIPALS_RELOAD = 1.0  # seconds between looks at the principals file
MAX_CALL_BYTES = 1024 * 1024  # one message of a framework or operator, at most (README)
MAX_CALL_ITEMS = 4096  # calls and list items in one payload of theirs, at most (README)
DECODE_INLINE_BYTES = 64 * 1024  # payloads above this are decoded off the loop
YIELD_EVERY = 64  # calls of one payload handled between turns of the loop
PROBE_INTERVAL = 1.0  # seconds between lag probes (master.lag_probe)
SLAVE_CHECK_INTERVAL = 1.0  # seconds between looks for silent slaves (50,000: a few ms each)


Route = Callable[[Any, Caller], Awaitable[None]]


class Master(LimitedCalls, SlaveCalls):
    """The master: the books, the allocation rounds, and every handler on the bus."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tasks: list[asyncio.Task[None]] = []  # the loops below, while it serves
        self.rounds = 0  # allocation rounds run (for tests and logs)
        self.round_duration = Histogram(
            "drfmesos_allocation_round_seconds",
            "How long an allocation round takes.",
            buckets=(1e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0),
            registry=None,  # the master's own registry (master.http.metrics) collects it
        )
        self.preemptor = Preemptor(
            self.config,
            self.books,
            self.allocator,
            self.log,
            now=self._now,
            send_framework=self._send_framework,
            send_slave=self._send_slave,
            event=self._event,
            request_round=self.request_round,
            changed=self.state_changed,
            task_changed=self._task_changed,
        )
        self.operator = OperatorCalls(self)  # quota and weights at run time
        self.files = FileRequests(self)  # tasks' stdout and stderr, read from their slaves
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
            now=self._now,
            slave_gone=self._slave_gone,
        )
        self.listeners.task_ended.append(self.preemptor.task_ended)
        self.listeners.framework_gone.append(self.preemptor.framework_gone)

    def _routes(self) -> dict[str, dict[type[Wire], Route]]:
        """What each kind of principal may call (anything else is refused)."""
        return {
            "framework": {
                Subscribe: self._on_subscribe,
                Accept: self._on_accept,
                Decline: self._on_decline,
                Revive: self._on_revive,
                Suppress: self._on_suppress,
                Request: self._on_request,
                Kill: self._on_kill,
                Acknowledge: self._on_acknowledge,
                Reconcile: self._on_reconcile,
                Message: self._on_message,
                Teardown: self._on_teardown,
                ReadTaskFile: self.files.on_read_task_file,
                Error: self._on_error,
            },
            "slave": {
                Register: self._on_register,
                Reregister: self._on_reregister,
                Heartbeat: self._on_heartbeat,
                Heartbeats: self._on_heartbeats,
                StatusUpdate: self._on_status_update,
                FrameworkMessage: self._on_executor_message,
                ExecutorExited: self._on_executor_exited,
                FileData: self.files.on_file_data,
                UsageReport: self._on_usage_report,
                Error: self._on_error,
            },
            "operator": {
                Teardown: self._on_teardown,
                SetQuota: self.operator.on_set_quota,
                MarkSlaveGone: self._on_mark_slave_gone,
                SetWeights: self.operator.on_set_weights,
            },
        }

    async def start(self) -> None:
        self.routes = self._routes()
        self.intake = FairIntake(self._served)  # each principal's calls in its turn
        self._gone_prefix = self.topics.gone_all.removesuffix("+/+")
        self.recovery.recover()
        self.http: HttpApi | None = None
        if self.config.http is not None:  # a port in use is said, and the bus goes on
            api = HttpApi(self, self.config.http, self.http_doors)
            try:
                self.web_ui = await api.start()
                self.http = api
            except OSError as e:
                await api.stop()
                self.log.error("http.failed", error=str(e), port=self.config.http.port)
        self.announce_leader()
        self.bus.on_connect(self._reannounce)  # a broker that lost its retained messages
        await self.bus.subscribe_raw(self.topics.inbound_all, self._intake)
        await self.bus.subscribe_raw(self.topics.gone_all, self._gone_arrives)
        self._tasks = [
            asyncio.create_task(self._round_loop(), name="master-rounds"),
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

    async def _inbound(self, topic: str, payload: bytes) -> None:
        """A call: who sent it is the topic's principal; the payload is not trusted."""
        sender = self.topics.sender(topic)
        if sender is None:
            self.messages.outcomes[("?", "dropped", "")] += 1
            return
        limited = sender.kind != "slave"  # as Mesos: rate limits are for framework principals
        if (
            limited
            and self.throttle.full(sender.principal, count_messages(payload))
            and self._refused_unread(sender, payload)
        ):  # (not decoded to be refused call by call)
            return
        items = await self._decode(payload, limited)
        # read here, not by the bus's decoder: counted here (drfmesos_bus_messages{in})
        self.bus.stats["received"] += len(items)
        routes = self.routes[sender.kind]
        asked: str | None = ""  # (a list's items share one reply_to: checked once)
        caller = Caller.of(sender, None)
        for i, item in enumerate(items):
            if i and not i % YIELD_EVERY:  # a big batch lets the loop breathe (health, rounds)
                await asyncio.sleep(0)
            if item.reply_to != asked:
                asked, reply_to = item.reply_to, item.reply_to
                if not self.topics.owns_reply_topic(sender, reply_to):
                    reply_to = None  # answers go only to the sender's own outbox
                caller = Caller.of(sender, reply_to)
            kind = (item.type_name or "?") if isinstance(item, DecodeError) else item.message.TYPE
            self.messages.received[kind] += 1
            if isinstance(item, DecodeError):
                self._refuse(
                    caller, f"{item.reason}: {item.detail}", item.reason, item.type_name or ""
                )
                continue
            route = routes.get(type(item.message))
            if route is None:
                self._refuse(
                    caller,
                    f"a {sender.kind} may not send {item.message.TYPE}",
                    "forbidden",
                    item.message.TYPE,
                )
                continue
            await self._call(self.messages.counted(route, kind), item.message, caller, limited)

    async def handle_call(self, message: Wire, caller: Caller) -> None:
        """A call that came another way than the bus (the Mesos HTTP API, master.mesos_api),
        from a caller that transport authenticated: the bus's handlers, counts and limits."""
        kind = message.TYPE
        self.messages.received[kind] += 1
        route = self.routes[caller.kind].get(type(message))
        if route is None:
            self._refuse(caller, f"a {caller.kind} may not send {kind}", "forbidden", kind)
            return
        await self._call(self.messages.counted(route, kind), message, caller, True)

    async def connection_gone(self, caller: Caller, gone: Gone) -> None:
        """That transport's connection for `caller` closed: as the bus's Last Will."""
        await self._on_gone(gone, caller)

    async def _decode(self, payload: bytes, limited: bool) -> list[Envelope | DecodeError]:
        """A payload's calls. One of a framework or operator holds at most MAX_CALL_BYTES
        a message and MAX_CALL_ITEMS calls and list items in all. A big payload is decoded
        in a thread, each message a short step there, so the loop goes on meanwhile."""
        limit, items = (MAX_CALL_BYTES, MAX_CALL_ITEMS) if limited else (MAX_MESSAGE_BYTES, None)
        if len(payload) <= DECODE_INLINE_BYTES:
            return decode_many(payload, limit, items)
        return await asyncio.to_thread(decode_many, payload, limit, items)

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
            self.lag.back(payload)
            return
        parts = topic.split("/")
        if len(parts) != 5 or parts[3] not in ("slave", "framework"):
            return
        kind = parts[3]
        self.intake.put(f"{kind}/{parts[4]}", INTAKE_WEIGHTS.get(kind, 1.0), topic, payload, 1)

    async def _served(self, topic: str, payload: bytes) -> None:
        """The intake's turn for one payload: a call, or a Last Will."""
        if topic.startswith(self._gone_prefix):
            await self._gone(topic, payload)
        else:
            await self._inbound(topic, payload)

    async def _gone(self, topic: str, payload: bytes) -> None:
        parts = topic.split("/")
        for item in decode_many(payload):
            if isinstance(item, DecodeError) or not isinstance(item.message, Gone):
                continue
            await self._on_gone(item.message, Caller(parts[3], parts[4], None))

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
        ages = (max(bus_oldest, self.intake.oldest_age()), last)
        return backlog_of(self.bus.backlog() + self.intake.backlog(), ages, self.lag)

    async def stop(self) -> None:
        if getattr(self, "http", None) is not None:
            assert self.http is not None
            await self.http.stop()
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        await self.intake.close()
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

    async def _round_loop(self) -> None:
        """A round every allocation interval, and soon after a free (frees within
        `round_batch` share one). Each visits only the slaves that may have something
        new to offer (see Allocator.allocate)."""
        interval = self.config.allocation_interval
        loop = asyncio.get_running_loop()
        next_full = loop.time() + interval
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._round_wanted.wait(), max(0.0, next_full - loop.time()))
            if self._round_wanted.is_set() and self.config.round_batch > 0:
                await asyncio.sleep(self.config.round_batch)  # let a burst of frees land
            self._round_wanted.clear()
            if loop.time() >= next_full:
                next_full = loop.time() + interval
            try:
                self.allocation_round()
            except Exception:
                self.log.exception("round.failed")

    def allocation_round(self) -> None:
        now = self._now()
        started = time.perf_counter()
        allocations = self.allocator.allocate(now)
        self.rounds += 1
        self.round_duration.observe(time.perf_counter() - started)
        if not allocations:
            return
        allocations = bounded(self.allocator, allocations, self.books.frameworks, now)
        by_framework: dict[str, list[Offer]] = defaultdict(list)
        for a in allocations:
            fw = self.books.frameworks[a.framework_id]
            slave = self.books.slaves[a.slave_id]
            offer_id = f"o-{new_id()[:20]}"
            record = OfferRecord(offer_id, a.framework_id, a.slave_id, a.resources, now)
            self.books.offers[offer_id] = record
            fw.offers.add(offer_id)
            slave.offers.add(offer_id)
            by_framework[a.framework_id].append(
                Offer(
                    offer_id=offer_id,
                    framework_id=a.framework_id,
                    slave_id=a.slave_id,
                    hostname=slave.hostname,
                    resources=a.resources,
                    attributes=slave.attributes,
                )
            )
            self._event(
                "offer",
                framework_id=a.framework_id,
                slave_id=a.slave_id,
                offer_id=offer_id,
                resources=a.resources,
            )
        for framework_id, offers in by_framework.items():
            fw, most = self.books.frameworks[framework_id], MAX_OFFERS_PER_MESSAGE
            for start in range(0, len(offers), most):
                self._send_framework(fw, Offers(offers=offers[start : start + most]))
        self.log.debug("round.done", offers=len(allocations), frameworks=len(by_framework))

    async def _timer_loop(self) -> None:
        tick = min(0.25, self.config.state_interval)
        next_heartbeat = self._now()
        next_state = self._now()
        next_acl = self._now() + PRINCIPALS_RELOAD
        next_slave_check = self._now()
        while True:
            now = self._now()
            try:
                if now >= next_acl:  # `drfmesos auth add` reaches a running master
                    next_acl = now + PRINCIPALS_RELOAD
                    await self.roles_acl.refresh()
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
                            self._send_framework(fw, Heartbeat(source=self.master_id))
                if now >= next_state and self._state_dirty:
                    next_state = now + self.config.state_interval
                    self.publish_state()
            except Exception:
                self.log.exception("timers.failed")
            await asyncio.sleep(tick)

    def _expire_slaves(self, now: float) -> None:
        """Slaves silent past the timeout, from what this master could have read."""
        behind, timeout = self.backlog().oldest_wait, self.config.slave_timeout
        for slave in silent(self.books.slaves.values(), now, timeout, behind, PROBE_INTERVAL):
            self.remove_slave(slave, f"no heartbeat for {timeout}s")

    def _expire(self, now: float) -> None:
        for fw in list(self.books.frameworks.values()):
            if (
                not fw.connected
                and fw.disconnected_at is not None
                and now - fw.disconnected_at > fw.failover_timeout
            ):
                self.remove_framework(fw, f"failover timeout {fw.failover_timeout}s passed")
        timeout = self.config.offer_timeout
        if timeout:
            for record in list(self.books.offers.values()):
                if now - record.created_at > timeout:
                    self._rescind(record)
                    self.request_round()

    def _retry_updates(self, now: float) -> None:
        for fw in self.books.frameworks.values():
            if not fw.connected:
                continue
            for pending in fw.pending.values():
                if pending.next_attempt <= now:
                    self._resend(fw, pending, now)

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
            starving=self.preemptor.starving(self._now()),
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
            self.preemptor.starving(self._now()),
        )
        return registered, [completed_view(fw) for fw in books.completed_frameworks.values()]

    def _role_views(self) -> list[RoleView]:
        """The allocator's role standings as the wire shows them."""
        return [role_view(r) for r in self.allocator.role_views()]

    def role_views(self) -> tuple[str, list[RoleView]]:
        return self.config.policy, self.preemptor.with_fair_shares(self._role_views())

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
        heard = time.time() - (self._now() - slave.last_seen)
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
        self._state_dirty = False
        state = self.state(include_tasks=len(self.books.slaves) < 200)
        self.bus.post(self.topics.state, state, retain=True)
        self.feed.tick(state)
