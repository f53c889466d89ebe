"""The master's shell: its state and the changes to it that several kinds of message share.

`MasterShell` holds the books (`master.books`), the allocator
(`master.allocation.allocator`) with the offer cycle around it (`master.cycle`), and the
bus, and the steps every handler builds on: telling a framework or a slave something,
refusing bad input, rescinding offers, ending tasks, and removing frameworks and slaves.
These steps are its public interface: the handlers in `master.calls` are collaborators
constructed with the shell, not subclasses of it. `master.Master` composes them with the
allocation rounds (`master.rounds`) and timers, and its other collaborators: preemption
(`master.preemptor`, told of ends and removals through `master.listeners`) and
recovery (`master.ha.recovery`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.allocation.preemption import PreemptionConfig
from master.authz import Caller, RoleACL
from master.books import Books, Framework, OfferRecord, PendingUpdate, Slave, Task
from master.changes import TASK_ADDED, TASK_UPDATED, Changes
from master.counters import MessageCounts, SlaveChurn
from master.cycle import ROUND_BATCH, CycleConfig, OfferCycle
from master.cycle_books import CycleBooks
from master.framework_ids import FrameworkIds
from master.ha.leadership import next_epoch
from master.ha.registry import MemoryStore, Registry
from master.http.config import HttpConfig
from master.http.live_feed import LiveFeed
from master.lag_probe import LagProbe
from master.listeners import Listeners
from master.rate_limits import RateLimits
from master.refusal_sampling import RefusalSampling
from master.roles_file import RolesError, RolesFile, load_roles
from master.task_states import as_seen
from master.throttle import Throttle
from protocol import logs
from protocol.transport.base import Transport
from protocol.wire.messages import (
    ClusterEvent,
    Error,
    Failure,
    Reason,
    Rescind,
    ShutdownFramework,
    Source,
    StatusAck,
    TaskState,
    TaskStatus,
    Update,
    Wire,
    new_id,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

MAX_RETRY_BACKOFF = 30.0
STAGING_GRACE = 10.0  # a task this young may not have reached its slave yet
MAX_ERROR_TEXT = 8192  # characters of a refusal's reason sent back (1000 tasks' reasons)
PRINCIPAL_REMOVED = "principal-removed"  # the Error a framework hears as it is cut off


@dataclass
class MasterConfig:
    policy: str = "hdrf"
    allocation_interval: float = 1.0
    round_batch: float = ROUND_BATCH  # frees within this window share one round
    offer_timeout: float | None = None  # off by default, as in Mesos
    slave_timeout: float = 15.0
    heartbeat_interval: float = 5.0  # to frameworks, and asked of slaves
    state_interval: float = 0.5
    status_retry: float = 1.0  # first re-send of an unacknowledged update
    role_weights: dict[str, float] = field(default_factory=dict)
    principals: Path | None = None  # the credentials store's principals.json (role ACLs)
    rate_limits: RateLimits | None = None  # per principal (master.rate_limits); None: none
    roles: Path | None = None  # the roles file: weights, orderings, quotas (kept up to date)
    # preemption (off unless a timeout is set): see master.preemptor
    preemption_timeout: float | None = None  # starving this long below the threshold
    preemption_threshold: float = 0.5  # x the fair share (YARN's fairSharePreemptionThreshold)
    preemption_notice: float = 2.0  # from the warning to the kill
    preemption_victims: str = "youngest"  # or "oldest" (to compare the work thrown away)
    guarantee_timeout: float | None = None  # a role below its quota guarantee this long
    quota_headroom: str = (
        "all"  # whose unmet guarantees are kept free (master.allocation.allocator)
    )
    # the least an offer holds, one of these (Mesos's --min_allocatable_resources); None
    # is Mesos's default (cpus 0.01 or mem 32), [] anything; a framework's own replace it
    min_allocatable: list[Resources] | None = None
    http: HttpConfig | None = None  # the API, metrics and web UI (master.http.api)
    # after a failover, slaves of the registry have this long to re-register; then their
    # tasks are reported lost
    slave_reregister_timeout: float = 30.0
    max_failover_timeout: float | None = None  # what frameworks ask for is cut to this
    max_frameworks_per_principal: int = 200  # registered at once (0: no most)

    def cycle(self) -> CycleConfig:
        """What the offer cycle (master.cycle) is told of this configuration."""
        return CycleConfig(
            policy=self.policy,
            allocation_interval=self.allocation_interval,
            offer_timeout=self.offer_timeout,
            preemption=PreemptionConfig(
                timeout=self.preemption_timeout,
                threshold=self.preemption_threshold,
                notice=self.preemption_notice,
                victims=self.preemption_victims,
                guarantee_timeout=self.guarantee_timeout,
            ),
        )


class MasterShell:
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
        self.bus = bus
        self.topics = topics
        self.config = config or MasterConfig()
        self.master_id = master_id or f"master-{uuid.uuid4().hex[:12]}"
        self.registry = registry or Registry(MemoryStore())
        # a master started on its own (tests, the demo) still has a term of its own
        self.epoch = epoch or next_epoch(0)
        if not bus.epoch:
            bus.epoch = self.epoch
        self._writes: set[asyncio.Task[None]] = set()  # registry writes nobody waits for
        self.books = Books()
        self.allocator = Allocator(
            self.config.policy,
            quota_headroom=self.config.quota_headroom,
            min_allocatable=self.config.min_allocatable,
        )
        for role, weight in self.config.role_weights.items():
            self.allocator.set_role_weight(role, weight)
        self.roles = RolesFile()
        if self.config.roles is not None:  # a bad file stops the master here, saying why
            self.roles = load_roles(self.config.roles)
            try:
                self.allocator.apply_roles(self.roles.roles)
            except AllocatorError as e:
                raise RolesError(f"{self.config.roles}: {e}") from None
        # the round, declines, suppress and revive, offer timeouts and preemption's check
        self.cycle = OfferCycle(self.allocator, CycleBooks(self.books), self.config.cycle())
        self.log = logs.get("master", master_id=self.master_id)
        self.roles_acl = RoleACL(self.config.principals)
        self.framework_ids = FrameworkIds.of_store(self.config.principals)
        limits = self.config.rate_limits or RateLimits.defaults(None, None)
        self.throttle = Throttle(limits, self.now)  # framework and operator calls
        self.refused: Counter[str] = Counter()  # calls refused, by reason code
        self.messages = MessageCounts()  # received, and what became of them, by type
        self.churn = SlaveChurn()  # slaves registered, re-registered, removed
        self.lag = LagProbe(self.now)  # how long calls wait to be read (master.lag_probe)
        self.sampling = RefusalSampling()  # refusals' log lines and answers, per principal
        self.listeners = Listeners()  # who else hears of tasks ended, frameworks gone
        self.round_wanted = asyncio.Event()
        self.state_dirty = True
        self.web_ui = ""  # where the HTTP API listens, once it does
        # what the event stream said, counted (the metrics read these)
        self.event_counts: Counter[str] = Counter()
        self.tasks_ended: Counter[str] = Counter()  # by terminal state
        self.recent_events: deque[ClusterEvent] = deque(maxlen=200)
        # the bus's event stream goes out until then (loop time): an operator's lease
        self.events_watched_until = 0.0
        self.feed = LiveFeed()  # the web UI's pages (master.http.api)
        self.changes = Changes()  # who hears of each change (master.changes)
        self.changes.listen(self.feed.event)
        self.update_resends = 0
        # topics served by another transport (a Mesos HTTP stream: master.mesos_api):
        # what the master says there goes to that sink, not to the bus
        self.framework_sinks: dict[str, Callable[[Wire], None]] = {}

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def record_or_refuse(
        self, write: Coroutine[Any, Any, None], caller: Caller, about: str
    ) -> bool:
        """Write to the registry before acknowledging `about`: it must survive a failover.
        If the registry cannot take it, the call is refused and nothing changes."""
        try:
            await write
        except Exception as e:
            self.log.error("registry.write_failed", about=about, error=repr(e))
            self.refuse(caller, "the registry is unavailable: try again", "unavailable", about)
            return False
        return True

    def persist_in_background(
        self, write: Coroutine[Any, Any, None], what: str, **ids: Any
    ) -> None:
        """A registry write whose caller cannot wait (a removal): logged if it fails."""

        async def guarded() -> None:
            try:
                await write
            except Exception as e:
                self.log.error("registry.write_failed", what=what, error=repr(e), **ids)

        task = asyncio.create_task(guarded())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def send_framework(self, fw: Framework, message: Wire) -> None:
        if not fw.inbox:
            return  # recovered from the registry, not re-subscribed yet: nowhere to send
        self.post_to_framework_topic(self.topics.framework(fw.principal, fw.inbox), message)

    def post_to_framework_topic(self, topic: str, message: Wire) -> None:
        sink = self.framework_sinks.get(topic)
        if sink is not None:
            sink(message)
        else:
            self.bus.post(topic, message)

    def send_slave(self, slave_id: str, message: Wire) -> None:
        principal = self.books.slave_owners.get(slave_id)
        if principal is not None:
            self.bus.post(self.topics.slave(principal, slave_id), message)

    def refuse(
        self,
        caller: Caller | None,
        message: str,
        code: str,
        about: str,
        *,
        tell: bool = True,
        **ids: Any,
    ) -> None:
        """Refuse a call: an Error to its sender, a log line with who, a count; no change.
        Without `tell` no Error: the sender hears it otherwise (a task's update)."""
        self.refused[code] += 1
        self.messages.refused(about, code)
        if caller is not None and caller.refused is not None:
            caller.refused(code, message)
        principal = caller.principal if caller else ""
        now = self.now()
        # A flood of bad calls must not become a flood of log lines or answers: each
        # principal gets a few lines a second (with how many were left out) and a few
        # hundred answers.
        sampled = self.sampling.line(principal, code, now)
        if sampled is not None:
            who = {"kind": caller.kind, "principal": principal} if caller else {}
            self.log.warning(
                "master.refused",
                reason=logs.clip(message),
                code=code,
                about=about,
                **sampled,
                **who,
                **ids,
            )
        answer = tell and caller is not None and caller.reply_to
        if answer and caller is not None and self.sampling.answer(principal, now):
            assert caller.reply_to is not None
            self.post_to_framework_topic(
                caller.reply_to,
                Error(message=logs.clip(message, MAX_ERROR_TEXT), code=code, about=about),
            )

    def emit_event(self, kind: str, **fields: Any) -> None:
        # (validated as built: pydantic-core's validation is several times quicker than
        # `model_construct`, whose default factories (the timestamp's, resources') cost
        # an `inspect.signature` each; two a task)
        event = ClusterEvent(kind=kind, **fields)
        if self.events_watched_until and self.now() < self.events_watched_until:
            self.bus.post(self.topics.events, event, qos=0, lazy=True)
        self.event_counts[kind] += 1
        if kind == "release" and event.state is not None:
            self.tasks_ended[event.state.value] += 1
        self.recent_events.append(event)
        self.changes.emit(event)
        self.state_dirty = True

    def watch_events(self, seconds: float) -> None:
        """Publish the event stream for (at least) the next `seconds` (WatchEvents)."""
        self.events_watched_until = max(self.events_watched_until, self.now() + seconds)

    def task_changed(self, task: Task, *, added: bool = False) -> None:
        """A task's state changed (or it became known) where no event says so: told to
        the change listeners that want tasks, not to the bus's event stream."""
        if self.changes.tasks_wanted:
            self.changes.emit(
                ClusterEvent(
                    kind=TASK_ADDED if added else TASK_UPDATED,
                    framework_id=task.framework_id,
                    slave_id=task.slave_id,
                    task_id=task.task_id,
                    state=task.state,
                )
            )

    def state_changed(self) -> None:
        """The published state is stale: the next state tick publishes it again."""
        self.state_dirty = True

    def request_round(self) -> None:
        """Ask for an allocation round soon (frees within `round_batch` share one)."""
        self.round_wanted.set()

    def framework_of_caller(
        self, framework_id: str, caller: Caller, about: str
    ) -> Framework | None:
        """The framework a call names, if the caller may act on it (else refused). Another
        principal's framework is refused as an unknown one is: in one answer, so that no
        principal learns which ids exist."""
        fw = self.books.frameworks.get(framework_id)
        if fw is not None and caller.kind == "operator" and about == "Teardown":
            return fw  # operators may tear down any framework
        if fw is not None and caller.kind == "framework" and fw.principal == caller.principal:
            return fw
        removed = self.books.removed.get(framework_id)
        if fw is None and removed is not None and removed[0] == caller.principal:
            self.refuse(
                caller,
                f"Framework has been removed: {removed[1]}",
                "framework-removed",
                about,
                framework_id=framework_id,
            )
            return None
        hint = "" if caller.kind == "operator" else ": subscribe first"
        self.refuse(
            caller,
            f"unknown framework {framework_id}{hint}",
            "unknown-framework",
            about,
            framework_id=framework_id,
            owner=fw.principal if fw is not None else None,  # (the log's, not theirs)
        )
        return None

    def drop_offer(self, record: OfferRecord) -> None:
        self.books.offers.pop(record.offer_id, None)
        fw = self.books.frameworks.get(record.framework_id)
        if fw is not None:
            fw.offers.discard(record.offer_id)
        slave = self.books.slaves.get(record.slave_id)
        if slave is not None:
            slave.offers.discard(record.offer_id)

    def rescind_offer(self, record: OfferRecord, *, recover: bool = True) -> None:
        self.drop_offer(record)
        fw = self.books.frameworks.get(record.framework_id)
        if recover:
            self.allocator.recover(record.framework_id, record.slave_id, record.resources)
        if fw is not None and fw.connected:
            self.send_framework(fw, Rescind(offer_id=record.offer_id))
        self.emit_event(
            "rescind",
            framework_id=record.framework_id,
            slave_id=record.slave_id,
            offer_id=record.offer_id,
            resources=record.resources,
        )

    def finish_task(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        """A task ended: its resources go back to the pool (unless its slave's latest
        state freed them already) and a round follows."""
        fw.complete(task, status)
        self.listeners.tell_task_ended(fw, task, status)
        slave = self.books.slaves.get(task.slave_id)
        if slave is not None:
            slave.tasks.discard((fw.framework_id, task.task_id))
        if task.freed:  # (the release was told then; its end is news now)
            self.task_changed(task)
        else:
            self.free_task(fw, task, status.state)

    def free_task(self, fw: Framework, task: Task, state: TaskState) -> None:
        """A task's resources go back to the pool, once: when it ends, or as soon as its
        slave's latest state says it ended (its terminal update still to come)."""
        if task.freed:
            return
        task.freed = True
        if task.slave_id in self.books.slaves:
            self.allocator.recover(fw.framework_id, task.slave_id, task.resources)
        self.emit_event(
            "release",
            framework_id=fw.framework_id,
            slave_id=task.slave_id,
            task_id=task.task_id,
            resources=task.resources,
            state=state,
        )
        self.request_round()

    def ack_slave_update(self, slave_id: str, framework_id: str, status: TaskStatus) -> None:
        """The slave may forget this update now: its framework has it (or never will)."""
        if status.uuid:
            self.send_slave(
                slave_id,
                StatusAck(
                    slave_id=slave_id,
                    framework_id=framework_id,
                    task_id=status.task_id,
                    uuid=status.uuid,
                ),
            )

    def send_master_update(
        self,
        fw: Framework,
        task_id: str,
        slave_id: str,
        state: TaskState,
        reason: Reason,
        message: str,
        *,
        ack: bool = True,
    ) -> None:
        """A status the master itself decides (LOST, ERROR, ...), sent like a slave's. The
        state is the fine one: a framework not partition-aware hears TASK_LOST for it."""
        state, seen_reason = as_seen(state, reason, fw.partition_aware)
        status = TaskStatus(
            task_id=task_id,
            state=state,
            slave_id=slave_id,
            reason=seen_reason,
            source=Source.MASTER,
            message=message,
            uuid=new_id() if ack else None,
        )
        task = fw.tasks.get(task_id)
        if task is not None and task.slave_id == slave_id:
            task.state, task.status = state, status
            if state.terminal:
                self.finish_task(fw, task, status)
            else:
                self.task_changed(task)
        self.forward_update(fw, Update(status=status), slave_id)

    def resend_update(self, fw: Framework, pending: PendingUpdate, now: float) -> None:
        """Send an owed update again; the next try waits twice as long (at most
        MAX_RETRY_BACKOFF)."""
        self.send_framework(fw, pending.update)
        self.update_resends += 1
        pending.backoff = min(pending.backoff * 2, MAX_RETRY_BACKOFF)
        pending.next_attempt = now + pending.backoff

    def forward_update(
        self, fw: Framework, update: Update, slave_id: str, relayed: bool = False
    ) -> None:
        if update.status.uuid:
            fw.pending[update.status.uuid] = PendingUpdate(
                update,
                slave_id,
                self.now() + self.config.status_retry,
                self.config.status_retry,
                relayed,
            )
        if fw.connected:
            self.send_framework(fw, update)

    def disconnect_framework(self, fw: Framework, why: str) -> None:
        if not fw.connected:
            return
        fw.connected = False
        fw.disconnected_at = self.now()
        self.allocator.deactivate(fw.framework_id)
        for offer_id in list(fw.offers):
            self.rescind_offer(self.books.offers[offer_id])
        self.log.info(
            "framework.disconnected",
            framework_id=fw.framework_id,
            why=why,
            failover_timeout=fw.failover_timeout,
        )
        self.emit_event("disconnected", framework_id=fw.framework_id, detail=why)
        if fw.failover_timeout <= 0:
            self.remove_framework(fw, "disconnected with no failover timeout")
        self.request_round()

    def remove_framework(self, fw: Framework, why: str) -> None:
        """Tell it, kill its tasks, give back everything it holds, and forget it."""
        if fw.connected:  # as Mesos: ERROR "Framework has been removed"
            self.send_framework(
                fw,
                Error(
                    message=f"Framework has been removed: {why}",
                    code="framework-removed",
                    about=fw.framework_id,
                ),
            )
        for offer_id in list(fw.offers):
            self.rescind_offer(self.books.offers[offer_id], recover=False)
        slaves: set[str] = set(fw.slaves_used)  # its executors may outlive its tasks
        for task in fw.tasks.values():
            slaves.add(task.slave_id)
            slave = self.books.slaves.get(task.slave_id)
            if slave is not None:
                slave.tasks.discard((fw.framework_id, task.task_id))
        for slave_id in slaves:
            if slave_id in self.books.slaves:
                self.send_slave(slave_id, ShutdownFramework(framework_id=fw.framework_id))
        self.allocator.remove_framework(fw.framework_id)  # releases tasks and offers alike
        killed = len(fw.tasks)
        self.books.forget_framework(fw, why)
        self.persist_in_background(
            self.registry.remove_framework(fw.framework_id),
            "remove framework",
            framework_id=fw.framework_id,
        )
        self.listeners.tell_framework_gone(fw.framework_id)
        self.log.info(
            "framework.removed", framework_id=fw.framework_id, why=why, tasks_killed=killed
        )
        self.emit_event("removed", framework_id=fw.framework_id, detail=why)
        self.request_round()

    def remove_slave(self, slave: Slave, why: str, *, gone: bool = False) -> None:
        """As Mesos 1.x: a slave out of touch past its timeout is unreachable, its tasks
        TASK_UNREACHABLE (they may still run, and come back with it); one an operator
        marked `gone` ends its tasks TASK_GONE_BY_OPERATOR. Frameworks not partition-aware
        hear TASK_LOST either way (reason: slave removed)."""
        for offer_id in list(slave.offers):
            self.rescind_offer(self.books.offers[offer_id], recover=False)
        state, reason = (
            (TaskState.GONE_BY_OPERATOR, Reason.SLAVE_REMOVED_BY_OPERATOR)
            if gone
            else (TaskState.UNREACHABLE, Reason.SLAVE_REMOVED)
        )
        affected: set[str] = set()
        for framework_id, task_id in list(slave.tasks):
            fw = self.books.frameworks.get(framework_id)
            if fw is None:
                continue
            affected.add(framework_id)
            self.send_master_update(
                fw, task_id, slave.slave_id, state, reason, f"slave {slave.slave_id} removed: {why}"
            )
            task = fw.tasks.get(task_id)
            if task is not None and task.state == TaskState.UNREACHABLE:
                del fw.tasks[task_id]  # out of the books until its slave is back
                fw.unreachable[task_id] = task
        for orphans in self.books.orphans.values():
            orphans[:] = [o for o in orphans if o.slave_id != slave.slave_id]
        self.allocator.remove_slave(slave.slave_id)
        for fw in self.books.frameworks.values():  # its executors went with it
            for key in [k for k in fw.executors if k[0] == slave.slave_id]:
                del fw.executors[key]
        del self.books.slaves[slave.slave_id]
        cause = "operator" if gone else "unreachable"
        self.mark_slave_removed(
            slave.slave_id, why, gone=gone, cause=cause, frameworks_affected=len(affected)
        )
        self.request_round()

    def mark_slave_removed(
        self, slave_id: str, why: str, *, gone: bool = False, cause: str = "", **fields: Any
    ) -> None:
        """A slave is removed (timed out, not back after a failover, or marked gone): out
        of the registry, every framework told it is lost, and reconciling a task there
        answers TASK_UNREACHABLE (or TASK_GONE_BY_OPERATOR; TASK_LOST to frameworks not
        partition-aware) from now on (no update of its can still be on the way)."""
        if gone:
            self.books.removed_slaves.discard(slave_id)
            self.books.gone_slaves.add(slave_id)
        else:
            self.books.removed_slaves.add(slave_id)
        self.books.ending = {k: s for k, s in self.books.ending.items() if s != slave_id}
        self.churn.removals[cause or ("operator" if gone else "unreachable")] += 1
        self.persist_in_background(
            self.registry.remove_slave(slave_id), "remove slave", slave_id=slave_id
        )
        for fw in self.books.frameworks.values():
            if fw.connected:
                self.send_framework(fw, Failure(slave_id=slave_id))
        self.log.warning("slave.removed", slave_id=slave_id, why=why, **fields)
        self.emit_event("slave-removed", slave_id=slave_id, detail=why)
