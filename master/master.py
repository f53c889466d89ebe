"""The master: keeps the cluster's books and runs the offer loop over the bus.

This is the composition root of the imperative shell around the offer cycle
(`master.cycle`, over the allocation policy) and the books (`master.books`): it builds
each part with the parts it uses and nothing more, routes each kind of principal's calls
to the handlers (`master.calls`) through the one intake, and keeps the timers. Bad input
is answered with an `Error` and changes nothing; a refused task is answered with its
update instead (TASK_ERROR, TASK_DROPPED or TASK_LOST: see master.task_states).

The parts, by what they do:

- what is known: the books (`master.books`), the allocator and the offer cycle around it
  (`master.cycle`, reading the books through `master.cycle_books`), the registry;
- what is said: the outbox (`master.outbox`: messages, refusals, the event stream);
- what changes the books beside the handlers: offers (`master.offers`), task updates and
  ends (`master.updates`), removals (`master.removals`), the registry's writes
  (`master.ha.recorder`);
- when: the rounds (`master.rounds`), preemption (`master.preemptor`), recovery after a
  failover (`master.ha.recovery`), the timers here;
- who may send what: the intake (`master.intake`) and the routes below;
- what is read: the read side (`master.http.read_side`), which the HTTP API serves.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller, RoleACL
from master.books import Books
from master.calls.accepts import Accepts
from master.calls.drains import Drains
from master.calls.files import FileRequests
from master.calls.framework_calls import FrameworkCalls
from master.calls.framework_updates import FrameworkUpdates
from master.calls.operator_calls import OperatorCalls
from master.calls.partitions import Partitions
from master.calls.resource_operations import ResourceOperations
from master.calls.slave_calls import SlaveCalls
from master.calls.status_updates import StatusUpdates
from master.calls.subscribe import Subscriptions
from master.calls.why_calls import WhyCalls
from master.config import MasterConfig, MasterInfo
from master.counters import MessageCounts, SlaveChurn
from master.cycle import OfferCycle
from master.cycle_books import CycleBooks
from master.framework_ids import FrameworkIds
from master.ha.leadership import next_epoch
from master.ha.recorder import Recorder
from master.ha.recovery import Recovery
from master.ha.registry import MemoryStore, Registry
from master.heartbeats import silent
from master.http.live_feed import LiveFeed
from master.http.read_side import ReadSide
from master.intake import MAX_CALL_ITEMS, CallIntake, PrincipalQueues, RateLimitRefusals, Routes
from master.lag_probe import Backlog, LagProbe, backlog_of
from master.listeners import Listeners
from master.offers import OfferBook
from master.outbox import Outbox
from master.preemptor import Preemptor
from master.rate_limits import RateLimits
from master.removals import Removals
from master.roles_file import RolesError, RolesFile, load_roles
from master.rounds import Rounds
from master.updates import TaskUpdates
from master.why_answers import WhyAnswers
from protocol import logs
from protocol.transport.aio import cancel_and_wait, loop_time
from protocol.transport.base import Transport
from protocol.transport.sending import MAX_PAYLOAD
from protocol.wire.codec import encode
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    DeactivateSlave,
    Decline,
    DrainSlave,
    Error,
    ExecutorExited,
    FileData,
    FrameworkMessage,
    FrameworkShutDown,
    Gone,
    Heartbeat,
    Heartbeats,
    Kill,
    Leader,
    MarkSlaveGone,
    Message,
    OperateResources,
    ReactivateSlave,
    ReadTaskFile,
    Reconcile,
    Register,
    Request,
    Reregister,
    Revive,
    SetQuota,
    SetQuotas,
    SetWeights,
    StatusUpdate,
    Subscribe,
    Suppress,
    Teardown,
    UpdateFramework,
    UsageReport,
    WatchEvents,
)
from protocol.wire.topics import Topics
from protocol.wire.why import AskWhy

if TYPE_CHECKING:  # (aiohttp's: a master with --http off runs without it)
    from master.http.api import DoorFactory, HttpApi

__all__ = ["MAX_CALL_ITEMS", "Master", "MasterConfig"]

LISTED_TEXT = 2 * 2**20  # characters of task names and messages a snapshot lists at most
# seconds between looks at the principals file: a principal removed is cut off within
# this and a tick (the README promises 2 s)
PRINCIPALS_RELOAD = 0.5
PROBE_INTERVAL = 1.0  # seconds between lag probes (master.lag_probe)
STATE_SHARE = 0.1  # of the loop's time, at most, spent publishing the state snapshot
SLAVE_CHECK_INTERVAL = 1.0  # seconds between looks for silent slaves (50,000: a few ms each)
PRINCIPAL_REMOVED = "principal-removed"  # the Error a framework hears as it is cut off
ROLE_REFUSED = "role-refused"  # (and as its principal lost its role: as at Subscribe)


def _no_round() -> None:
    """A task's end asks for no round (`MasterConfig.allocate_on_free` off): what it
    freed waits for the next allocation interval."""


def policy_of(config: MasterConfig) -> tuple[Allocator, RolesFile]:
    """The allocator as configured (weights, and the roles file's weights, orderings and
    quotas), and the roles file (kept up to date by the operators' calls). A bad roles
    file stops the master here, saying why."""
    allocator = Allocator(
        config.policy,
        quota_headroom=config.quota_headroom,
        min_allocatable=config.min_allocatable,
    )
    for role, weight in config.role_weights.items():
        allocator.roles.set_weight(role, weight)
    roles = RolesFile()
    if config.roles is not None:
        roles = load_roles(config.roles)
        try:
            allocator.roles.apply(roles.roles)
        except AllocatorError as e:
            raise RolesError(f"{config.roles}: {e}") from None
    return allocator, roles


class Master:
    """The master: the books, the allocation rounds, and every handler on the bus (see the
    module's docstring for its parts)."""

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
        """`registry`: what must survive this master (see master.ha.registry), read before
        `start`; `epoch`: this master's term (see master.ha.leadership)."""
        config = self.config = config or MasterConfig()
        self.bus, self.topics = bus, topics
        self.master_id = master_id or f"master-{uuid.uuid4().hex[:12]}"
        self.registry = registry or Registry(MemoryStore())
        # a master started on its own (tests, the demo) still has a term of its own
        self.epoch = epoch or next_epoch(0)
        if not bus.epoch:
            bus.epoch = self.epoch
        self.info = MasterInfo(self.master_id, self.epoch, config.heartbeat_interval)
        self._announced: Leader | None = None  # (its beat sends it again: _timer_loop)
        log = self.log = logs.get("master", master_id=self.master_id)

        # what is known
        books = self.books = Books()
        self.allocator, roles = policy_of(config)
        allocator = self.allocator
        # the round, declines, suppress and revive, offer timeouts and preemption's check
        cycle = self.cycle = OfferCycle(allocator, CycleBooks(books), config.cycle())
        self.acl = RoleACL(config.principals)
        self.framework_ids = FrameworkIds.of_store(config.principals)
        self.listeners = Listeners()  # who else hears of tasks ended, frameworks gone
        # what is counted
        self.messages = MessageCounts()  # received, and what became of them, by type
        self.churn = SlaveChurn()  # slaves registered, re-registered, removed
        self.lag = LagProbe(loop_time)  # how long calls wait to be read (master.lag_probe)
        # what is said
        outbox = self.outbox = Outbox(bus, topics, books.slave_owners, self.messages, log)
        self.feed = LiveFeed()  # the web UI's pages (master.http.api)
        outbox.changes.listen(self.feed.event, wanted=self.feed.watched)
        # what changes the books beside the handlers, and when
        recorder = Recorder(self.registry, outbox, log)
        self.offers = OfferBook(books, allocator, outbox)
        self.offer_rounds = Rounds(
            cycle, self.offers, log, interval=config.allocation_interval, batch=config.round_batch
        )
        request_round = self.offer_rounds.request
        updates = self.updates = TaskUpdates(
            books,
            allocator,
            outbox,
            self.listeners,
            request_round if config.allocate_on_free else _no_round,
            status_retry=config.status_retry,
        )
        self.removals = Removals(
            books,
            allocator,
            self.offers,
            updates,
            outbox,
            recorder,
            listeners=self.listeners,
            churn=self.churn,
            request_round=request_round,
            log=log,
            max_failover=config.max_failover_timeout,
        )
        self.preemptor = Preemptor(
            books,
            cycle,
            outbox,
            request_round,
            log,
            policy=config.policy,
            interval=config.allocation_interval,
        )
        self.recovery = Recovery(
            books,
            allocator,
            self.registry,
            self.churn,
            log,
            epoch=self.epoch,
            reregister_timeout=config.slave_reregister_timeout,
            slave_gone=self.removals.slave_removed,
        )
        self.listeners.task_ended.append(self.preemptor.task_ended)
        self.listeners.framework_gone.append(lambda fid: cycle.forget(fid, loop_time()))
        self.listeners.slave_removed.append(cycle.slave_removed)
        # the call handlers
        self.subscriptions = Subscriptions(
            books,
            allocator,
            cycle,
            outbox,
            updates,
            recorder,
            self.offers,
            topics=topics,
            acl=self.acl,
            ids=self.framework_ids,
            config=config,
            info=self.info,
            request_round=request_round,
            log=log,
        )
        self.framework_updates = FrameworkUpdates(
            books, allocator, self.subscriptions, recorder, outbox, self.acl, log=log
        )
        self.resource_operations = ResourceOperations(
            books,
            allocator,
            outbox,
            self.offers,
            in_use=books.resource_in_use,
            may=self.acl.may,
            request_round=request_round,
            log=log,
        )
        self.framework_calls = FrameworkCalls(
            books,
            allocator,
            cycle,
            self.offers,
            outbox,
            updates,
            self.removals,
            ids=self.framework_ids,
            operations=self.resource_operations,
            request_round=request_round,
            log=log,
        )
        self.accepts = Accepts(
            books,
            allocator,
            cycle,
            self.offers,
            outbox,
            updates,
            ids=self.framework_ids,
            operations=self.resource_operations,
            decline=self.framework_calls.decline,
            request_round=request_round,
            log=log,
        )
        self.partitions = Partitions(books, allocator, outbox, updates, self.removals, log)
        self.slave_calls = SlaveCalls(
            books,
            allocator,
            outbox,
            updates,
            self.removals,
            recorder,
            partitions=self.partitions,
            status_updates=StatusUpdates(books, outbox, updates, log),
            churn=self.churn,
            messages=self.messages,
            info=self.info,
            listeners=self.listeners,
            ids=self.framework_ids,
            request_round=request_round,
            log=log,
        )
        # slaves taken out of the offers and drained for maintenance
        self.drains = Drains(
            books,
            allocator,
            self.offers,
            outbox,
            recorder,
            self.removals,
            request_round=request_round,
            ack_wait=config.drain_ack_wait,
            log=log,
        )
        self.listeners.slave_admitted.append(self.drains.slave_admitted)
        # a reconciliation ask about a task on a slave still recovering is answered when
        # it is back, or removed (`reconcile_waits`)
        self.listeners.slave_admitted.append(lambda slave: self._answer_kept(slave.slave_id))
        self.listeners.slave_removed.append(self._answer_kept)
        self.listeners.framework_gone.append(self.framework_calls.waits.forget)
        self.operator = OperatorCalls(  # quota and weights at run time
            allocator, recorder, outbox, roles, config.roles, request_round=request_round, log=log
        )
        self.files = FileRequests(books, outbox)  # tasks' stdout and stderr, from their slaves
        # who may send what, and how much: every call's way in
        limits = config.rate_limits or RateLimits.defaults(None, None)
        self.queues = PrincipalQueues(limits)  # each principal's, at its rate limit
        # why a framework is offered nothing: one answer for the bus, HTTP and Mesos's API
        self.why = WhyAnswers(books, cycle, self.queues, self.acl, loop_time)
        self.why_calls = WhyCalls(self.why, outbox.refuse, outbox.send_topic)
        refusals = RateLimitRefusals(
            self.queues, outbox, self.messages, self.accepts.refused_accept
        )
        self.routes = self._routes()
        self.intake = CallIntake(
            bus,
            topics,
            self.queues,
            refusals,
            outbox,
            self.messages,
            books,
            self.acl,
            self.routes,
            self.slave_calls.on_gone,
        )
        # what is read
        self.views = ReadSide(
            books,
            allocator,
            self.preemptor,
            outbox,
            self.files,
            info=self.info,
            policy=config.policy,
            bus=bus,
            churn=self.churn,
            messages=self.messages,
            updates=updates,
            queues=self.queues,
            why=self.why,
            round_duration=self.offer_rounds.duration,
            feed=self.feed,
            backlog=self.backlog,
        )
        # other APIs served beside ours on --http: the composition root (master.cli) adds
        # Mesos's (master.mesos_api.doors), which reach this master's handlers themselves
        self.http_doors: list[DoorFactory] = []
        self.http: HttpApi | None = None
        self._tasks: list[asyncio.Task[None]] = []  # the loops below, while it serves

    @property
    def web_ui(self) -> str:
        """Where the HTTP API listens, once it does ("" before)."""
        return self.views.web_ui

    def _routes(self) -> Routes:
        """What each kind of principal may call (anything else is refused)."""
        f, s, o = self.framework_calls, self.slave_calls, self.operator
        return {
            "framework": {
                Subscribe: self.subscriptions.on_subscribe,
                UpdateFramework: self.framework_updates.on_update_framework,
                Accept: self.accepts.on_accept,
                Decline: f.on_decline,
                Revive: f.on_revive,
                Suppress: f.on_suppress,
                Request: f.on_request,
                Kill: f.on_kill,
                Acknowledge: f.on_acknowledge,
                Reconcile: f.on_reconcile,
                Message: f.on_message,
                Teardown: f.on_teardown,
                ReadTaskFile: self.files.on_read_task_file,
                AskWhy: self.why_calls.on_ask_why,
                Error: s.on_error,
            },
            "slave": {
                Register: s.on_register,
                Reregister: s.on_reregister,
                Heartbeat: s.on_heartbeat,
                Heartbeats: s.on_heartbeats,
                StatusUpdate: s.on_status_update,
                FrameworkMessage: s.on_executor_message,
                FrameworkShutDown: s.on_framework_shut_down,
                ExecutorExited: s.on_executor_exited,
                FileData: self.files.on_file_data,
                UsageReport: s.on_usage_report,
                Error: s.on_error,
            },
            "operator": {
                Teardown: f.on_teardown,
                SetQuota: o.on_set_quota,
                SetQuotas: o.on_set_quotas,
                MarkSlaveGone: self.partitions.on_mark_slave_gone,
                DrainSlave: self.drains.on_drain_slave,
                DeactivateSlave: self.drains.on_deactivate_slave,
                ReactivateSlave: self.drains.on_reactivate_slave,
                SetWeights: o.on_set_weights,
                OperateResources: self.resource_operations.on_operate,
                WatchEvents: o.on_watch_events,
                AskWhy: self.why_calls.on_ask_why,
            },
        }

    def _answer_kept(self, slave_id: str) -> None:
        """The reconciliation asks kept about a slave's tasks, answered now it is back or
        removed: each piece in its principal's queue, served in turn beside the others'."""
        for principal, work in self.framework_calls.kept_answers(slave_id):
            self.intake.later("framework", principal, work)

    async def start(self) -> None:
        self.recovery.recover()
        if self.config.http is not None:  # (taken since the standby let it go: said, and on)
            from master.http.api import HttpApi

            api = HttpApi(self.views, self.config.http, self.http_doors)
            try:
                self.views.web_ui = await api.start()
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
        self._warn_unknown_limits()

    def _warn_unknown_limits(self) -> None:
        """A rate limit for a principal the credentials store does not know limits nobody
        (a misspelt name, or one not added yet): said once, at start, as Mesos says
        nothing."""
        limits = self.config.rate_limits
        if limits is None or self.config.principals is None:
            return
        unknown = sorted(p for p in limits.listed() if not self.acl.knows(p))
        if unknown:
            self.log.warning(
                "master.rate_limits_unknown_principals",
                principals=unknown,
                detail="no principal of the credentials store has these names (yet): "
                "their limits hold nobody until one is added",
            )

    async def connection_gone(self, caller: Caller, gone: Gone) -> None:
        """That transport's connection for `caller` closed: as the bus's Last Will."""
        await self.slave_calls.on_gone(gone, caller)

    def announce_leader(self) -> None:
        """Retained, so a party that connects later learns who leads at once."""
        self._announced = Leader(
            master_id=self.master_id, epoch=self.epoch, http=self.web_ui, elected_at=time.time()
        )
        self.bus.post(self.topics.leader, self._announced, retain=True)

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
                self.queues.sent_by(time.monotonic() - lag)
            return
        parts = topic.split("/")
        if len(parts) != 5 or parts[3] not in ("slave", "framework"):
            return
        self.intake.arrive_gone(parts[3], parts[4], payload)

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
        queues = self.queues
        ages = (max(bus_oldest, queues.oldest_age()), last)
        return backlog_of(self.bus.backlog() + queues.backlog(), ages, self.lag)

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        await self.queues.close()
        await self.preemptor.stop_fair_shares()
        self.log.info("master.stopped", rounds=self.offer_rounds.count, **self.bus.stats)

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
        (the intake); added back, it may re-subscribe. A principal that lost a role its
        framework is in has that framework disconnected the same way: offered nothing of
        the role from now (it may subscribe again in a role it has)."""
        for fw in list(self.books.frameworks.values()):
            if not fw.connected:
                continue
            if why := self.acl.unknown(fw.principal):
                code = PRINCIPAL_REMOVED
            elif why := self.acl.check_roles(fw.principal, fw.all_roles()):
                code = ROLE_REFUSED
            else:
                continue
            self.outbox.send_framework(fw, Error(message=why, code=code, about=fw.framework_id))
            self.removals.disconnect_framework(fw, why)

    async def _timer_loop(self) -> None:
        tick = min(0.25, self.config.state_interval)
        next_heartbeat = next_state = next_slave_check = loop_time()
        next_acl = loop_time() + PRINCIPALS_RELOAD
        while True:
            now = loop_time()
            try:
                if now >= next_acl:  # `drfmesos auth add` reaches a running master
                    next_acl = now + PRINCIPALS_RELOAD
                    if await self.acl.refresh():
                        self._disconnect_removed_principals()
                if now >= next_slave_check:
                    next_slave_check = now + SLAVE_CHECK_INTERVAL
                    self._expire_slaves(now)
                self.removals.expire_frameworks(now)
                self._expire_offers(now)
                self.recovery.expire_recovering(now)
                self.updates.resend_due(now)
                self.preemptor.preemption_tick(now)
                self.drains.check()
                self.outbox.flush_refused()
                if now >= next_heartbeat:
                    next_heartbeat = now + self.config.heartbeat_interval
                    for fw in self.books.frameworks.values():
                        if fw.connected:
                            self.outbox.send_framework(fw, Heartbeat(source=self.master_id))
                    # and its announcement again on the leader topic, not retained, for
                    # every slave process's bus: how a slave knows its master is still
                    # there (protocol.master_silence). A Leader, not a Heartbeat: a party
                    # of an earlier release takes it as the same leader again, quietly
                    if self._announced is not None:
                        self.bus.post(self.topics.leader, self._announced, qos=0)
                if now >= next_state and self.outbox.take_stale():
                    took = time.perf_counter()
                    self.publish_state()
                    took = time.perf_counter() - took
                    # (it walks every task: 200,000 take the loop some 0.1 s, which is
                    # not to be spent twice a second while a failover's slaves come back)
                    next_state = now + max(self.config.state_interval, took / STATE_SHARE)
            except Exception:
                self.log.exception("timers.failed")
            await asyncio.sleep(tick)

    def _expire_slaves(self, now: float) -> None:
        """Slaves silent past the timeout, from what this master could have read."""
        behind, timeout = self.backlog().oldest_wait, self.config.slave_timeout
        for slave in silent(self.books.slaves.values(), now, timeout, behind, PROBE_INTERVAL):
            self.removals.remove_slave(slave, f"no heartbeat for {timeout}s")

    def _expire_offers(self, now: float) -> None:
        for timed_out in self.cycle.expired(now):  # (back in the pool, filtered)
            self.offers.rescind(self.books.offers[timed_out.offer_id], recover=False)
            self.offer_rounds.request()

    def publish_state(self) -> None:
        """The books' snapshot, retained on the bus for the tools, and the live feed's tick."""
        state = self.views.state(include_tasks=len(self.books.slaves) < 200)
        if (state.tasks or state.offers) and (
            sum(len(t.name) + len(t.message) for t in state.tasks) > LISTED_TEXT
            or len(encode(state)) > MAX_PAYLOAD
        ):
            # tenants' tasks (their number, ids, names, their executors' messages) would
            # outgrow the broker's limit (the snapshot unpublishable, tools left with a
            # stale one): counted, not listed. (Measured only where tasks are listed, on
            # a small cluster, and its interval is stretched by what publishing takes.)
            state = state.model_copy(update={"tasks": [], "offers": []})
        self.bus.post(self.topics.state, state, retain=True)
        self.feed.tick(state)
