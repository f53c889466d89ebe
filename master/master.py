"""The master: keeps the cluster's books and runs the offer loop over the bus.

This is the imperative shell around `master.allocator` (the policy) and `master.books`
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
from collections.abc import Awaitable, Callable
from typing import Any

from master.authz import Caller
from master.books import TASK_SORTS, OfferRecord, offer_of, snapshot
from master.core import MasterConfig
from master.fair_intake import FairIntake
from master.files import FileRequests
from master.http_api import HttpApi
from master.lag_probe import Backlog, backlog_of
from master.limited_calls import LimitedCalls
from master.operator_calls import OperatorCalls
from master.preemptor import Preemptor
from master.recovery import Recovery
from master.slave_calls import SlaveCalls
from protocol.bus import cancel_and_wait
from protocol.codec import (
    MAX_MESSAGE_BYTES,
    DecodeError,
    Envelope,
    count_messages,
    decode_many,
)
from protocol.messages import (
    Accept,
    Acknowledge,
    Decline,
    Error,
    ExecutorExited,
    FileData,
    FrameworkMessage,
    Gone,
    Heartbeat,
    Kill,
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

__all__ = ["Master", "MasterConfig"]

PRINCIPALS_RELOAD = 1.0  # seconds between looks at the principals file
MAX_CALL_BYTES = 1024 * 1024  # one message of a framework or operator, at most (README)
MAX_CALL_ITEMS = 4096  # calls and list items in one payload of theirs, at most (README)
DECODE_INLINE_BYTES = 64 * 1024  # payloads above this are decoded off the loop
YIELD_EVERY = 64  # calls of one payload handled between turns of the loop
PROBE_INTERVAL = 1.0  # seconds between lag probes (master.lag_probe)


Route = Callable[[Any, Caller], Awaitable[None]]


class Master(LimitedCalls, SlaveCalls, OperatorCalls, Preemptor, FileRequests, Recovery):
    """The master: the books, the allocation rounds, and every handler on the bus."""

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
                ReadTaskFile: self._on_read_task_file,
                Error: self._on_error,
            },
            "slave": {
                Register: self._on_register,
                Reregister: self._on_reregister,
                Heartbeat: self._on_heartbeat,
                StatusUpdate: self._on_status_update,
                FrameworkMessage: self._on_executor_message,
                ExecutorExited: self._on_executor_exited,
                FileData: self._on_file_data,
                UsageReport: self._on_usage_report,
                Error: self._on_error,
            },
            "operator": {
                Teardown: self._on_teardown,
                SetQuota: self._on_set_quota,
                MarkSlaveGone: self._on_mark_slave_gone,
                SetWeights: self._on_set_weights,
            },
        }

    async def start(self) -> None:
        self.routes = self._routes()
        self.intake = FairIntake(self._inbound)  # each principal's calls in its turn
        self.recover()
        self.http: HttpApi | None = None
        if self.config.http is not None:  # a port in use is said, and the bus goes on
            api = HttpApi(self, self.config.http)
            try:
                self.web_ui = await api.start()
                self.http = api
            except OSError as e:
                await api.stop()
                self.log.error("http.failed", error=str(e), port=self.config.http.port)
        self.announce_leader()
        self.bus.on_connect(self._reannounce)  # a broker that lost its retained messages
        await self.bus.subscribe_raw(self.topics.inbound_all, self._intake)
        await self.bus.subscribe_raw(self.topics.gone_all, self._gone)
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

    async def _decode(self, payload: bytes, limited: bool) -> list[Envelope | DecodeError]:
        """A payload's calls. One of a framework or operator holds at most MAX_CALL_BYTES
        a message and MAX_CALL_ITEMS calls and list items in all. A big payload is decoded
        in a thread, each message a short step there, so the loop goes on meanwhile."""
        limit, items = (MAX_CALL_BYTES, MAX_CALL_ITEMS) if limited else (MAX_MESSAGE_BYTES, None)
        if len(payload) <= DECODE_INLINE_BYTES:
            return decode_many(payload, limit, items)
        return await asyncio.to_thread(decode_many, payload, limit, items)

    async def _reannounce(self) -> None:
        self.announce_leader()

    async def _gone(self, topic: str, payload: bytes) -> None:
        """A Last Will, published by the broker under the vanished party's own name."""
        parts = topic.split("/")
        if topic == self._probe_topic():
            self.lag.back(payload)
            return
        if len(parts) != 5 or parts[3] not in ("slave", "framework"):
            return
        for item in decode_many(payload):
            if isinstance(item, DecodeError) or not isinstance(item.message, Gone):
                continue
            await self._on_gone(item.message, Caller(parts[3], parts[4], None))

    def _probe_topic(self) -> str:
        return self.topics.gone("master", self.bus.broker.username or "master")

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
        await self.stop_fair_shares()
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
            self._send_framework(self.books.frameworks[framework_id], Offers(offers=offers))
        self.log.debug("round.done", offers=len(allocations), frameworks=len(by_framework))

    async def _timer_loop(self) -> None:
        tick = min(0.25, self.config.state_interval)
        next_heartbeat = self._now()
        next_state = self._now()
        next_acl = self._now() + PRINCIPALS_RELOAD
        while True:
            now = self._now()
            try:
                if now >= next_acl:  # `drfmesos auth add` reaches a running master
                    next_acl = now + PRINCIPALS_RELOAD
                    await self.roles_acl.refresh()
                self._expire(now)
                self.expire_recovering(now)
                self._retry_updates(now)
                self.preemption_tick(now)
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

    def _expire(self, now: float) -> None:
        for slave in list(self.books.slaves.values()):
            if now - slave.last_seen > self.config.slave_timeout:
                self.remove_slave(slave, f"no heartbeat for {self.config.slave_timeout}s")
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
        a = self.allocator
        fids = list(self.books.frameworks)
        return snapshot(
            self.books,
            master_id=self.master_id,
            now=time.time(),
            policy=self.config.policy,
            total=a.total,
            allocated=a.allocated_total(),
            allocation={f: a.allocation(f) for f in fids},
            free={s: a.free(s) for s in self.books.slaves},
            include_tasks=include_tasks,
            refused=dict(self.refused),
            roles=self.with_fair_shares(self.allocator.role_views()),
            preemption=self.preemption_view(),
            fair=self.preemption.fair,
            starving=self.starving(self._now()),
            web_ui=self.web_ui,
            epoch=self.epoch,
        )

    def slave_view(self, slave_id: str) -> SlaveView:
        slave = self.books.slaves[slave_id]
        heard = time.time() - (self._now() - slave.last_seen)
        return slave.view(self.allocator.free(slave_id), round(heard, 3))

    def slave_ids(self, sort: str = "") -> list[str]:
        """Every slave's id, in `sort`'s order (SLAVE_SORTS; by id by default): by
        `last_heartbeat` the longest unheard first, so "which are late" is the first page.
        A `-` before reverses it."""
        slaves = self.books.slaves
        if sort.lstrip("-") == "last_heartbeat":
            ids = sorted(slaves, key=lambda s: (slaves[s].last_seen, s))
        else:
            ids = sorted(slaves)
        return ids[::-1] if sort.startswith("-") else ids

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
