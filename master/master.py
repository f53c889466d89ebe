"""The master: keeps the cluster's books and runs the offer loop over the bus.

This is the imperative shell around `master.allocator` (the policy) and `master.books`
(the records): it decodes calls from frameworks and slaves, checks them against the books,
changes the books, and says what happened to whom. Bad input is answered with an `Error`
(and `TASK_ERROR` for refused tasks) and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from master.allocator import Allocator
from master.books import Books, Framework, OfferRecord, Orphan, PendingUpdate, Slave, Task, snapshot
from protocol import logs
from protocol.bus import Bus, Dispatcher, cancel_and_wait
from protocol.messages import (
    Accept,
    Acknowledge,
    ClusterEvent,
    Decline,
    Error,
    ExecutorExited,
    Failure,
    FrameworkMessage,
    Gone,
    Heartbeat,
    Kill,
    KillTask,
    Message,
    Offer,
    Offers,
    Reason,
    Reconcile,
    Register,
    Registered,
    Reregister,
    Rescind,
    Revive,
    RunningTask,
    RunTask,
    ShutdownFramework,
    StatusAck,
    StatusUpdate,
    Subscribe,
    Subscribed,
    Suppress,
    TaskInfo,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
    Wire,
    new_id,
)
from protocol.resources import Resources
from protocol.topics import Topics, check_segment

MAX_RETRY_BACKOFF = 30.0
STAGING_GRACE = 10.0  # a task this young may not have reached its slave yet


@dataclass
class MasterConfig:
    policy: str = "drf"
    allocation_interval: float = 1.0
    round_batch: float = 0.005  # frees within this window share one round
    offer_timeout: float | None = None  # off by default, as in Mesos
    slave_timeout: float = 15.0
    heartbeat_interval: float = 5.0  # to frameworks, and asked of slaves
    state_interval: float = 0.5
    status_retry: float = 1.0  # first re-send of an unacknowledged update
    role_weights: dict[str, float] = field(default_factory=dict)
    seed: int | None = None


class Master:
    def __init__(self, bus: Bus, topics: Topics, config: MasterConfig | None = None) -> None:
        self.bus = bus
        self.topics = topics
        self.config = config or MasterConfig()
        self.master_id = f"master-{uuid.uuid4().hex[:12]}"
        self.books = Books()
        self.allocator = Allocator(self.config.policy, seed=self.config.seed)
        for role, weight in self.config.role_weights.items():
            self.allocator.set_role_weight(role, weight)
        self.log = logs.get("master", master_id=self.master_id)
        self._round_wanted = asyncio.Event()
        self._state_dirty = True
        self._tasks: list[asyncio.Task[None]] = []
        self.rounds = 0  # allocation rounds run (for tests and logs)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        d = Dispatcher(self.bus, "master")
        routes: dict[type[Wire], Callable[[Any, str | None], Awaitable[None]]] = {
            Subscribe: self._on_subscribe,
            Accept: self._on_accept,
            Decline: self._on_decline,
            Revive: self._on_revive,
            Suppress: self._on_suppress,
            Kill: self._on_kill,
            Acknowledge: self._on_acknowledge,
            Reconcile: self._on_reconcile,
            Message: self._on_message,
            Teardown: self._on_teardown,
            Register: self._on_register,
            Reregister: self._on_reregister,
            Heartbeat: self._on_heartbeat,
            StatusUpdate: self._on_status_update,
            FrameworkMessage: self._on_executor_message,
            ExecutorExited: self._on_executor_exited,
            Error: self._on_error,
        }
        for kind, handler in routes.items():
            d.on(kind, handler)
        await self.bus.subscribe(self.topics.master, d)
        gone = Dispatcher(self.bus, "master")
        gone.on(Gone, self._on_gone)
        await self.bus.subscribe(self.topics.gone_all, gone)
        self._tasks = [
            asyncio.create_task(self._round_loop(), name="master-rounds"),
            asyncio.create_task(self._timer_loop(), name="master-timers"),
        ]
        self.log.info("master.started", policy=self.config.policy, topic=self.topics.master)

    async def stop(self) -> None:
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        self.log.info("master.stopped", rounds=self.rounds, **self.bus.stats)

    async def run(self) -> None:
        """Start, and serve until cancelled."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    # -- helpers for talking -----------------------------------------------------------------
    def _send_framework(self, fw: Framework, message: Wire) -> None:
        self.bus.post(self.topics.framework(fw.inbox), message)

    def _send_slave(self, slave_id: str, message: Wire) -> None:
        self.bus.post(self.topics.slave(slave_id), message)

    def _refuse(
        self, reply_to: str | None, message: str, code: str, about: str, **ids: Any
    ) -> None:
        self.log.warning("master.refused", reason=message, code=code, about=about, **ids)
        self.bus.reply_error(reply_to, message, code=code, about=about)

    def _event(self, kind: str, **fields: Any) -> None:
        self.bus.post(self.topics.events, ClusterEvent(kind=kind, **fields), qos=0)
        self._state_dirty = True

    def request_round(self) -> None:
        """Ask for an allocation round soon (frees within `round_batch` share one)."""
        self._round_wanted.set()

    def _framework_for(
        self, framework_id: str, reply_to: str | None, about: str
    ) -> Framework | None:
        fw = self.books.frameworks.get(framework_id)
        if fw is None:
            self._refuse(
                reply_to,
                f"unknown framework {framework_id}: subscribe first",
                "unknown-framework",
                about,
                framework_id=framework_id,
            )
        return fw

    # -- frameworks ----------------------------------------------------------------------------
    async def _on_subscribe(self, msg: Subscribe, reply_to: str | None) -> None:
        try:
            check_segment(msg.inbox, "inbox")
            if msg.framework_id:
                check_segment(msg.framework_id, "framework_id")
        except ValueError as e:
            self._refuse(reply_to, str(e), "invalid", "Subscribe")
            return
        now = self._now()
        fw = self.books.frameworks.get(msg.framework_id or "")
        if fw is None and msg.framework_id is None:
            # the same inbox asking again (its first answer crossed a retry): same framework
            fw = self.books.frameworks.get(self.books.inboxes.get(msg.inbox, ""))
        if fw is not None:
            self.books.inboxes.pop(fw.inbox, None)
            fw.inbox, fw.incarnation = msg.inbox, msg.incarnation
            fw.connected, fw.disconnected_at = True, None
            fw.failover_timeout = msg.failover_timeout
            self.books.inboxes[fw.inbox] = fw.framework_id
            self.allocator.activate(fw.framework_id)
            for pending in fw.pending.values():  # owed updates go out again at once
                pending.next_attempt = now
            resubscribed = True
        else:
            framework_id = msg.framework_id or f"fw-{new_id()[:16]}"
            fw = Framework(
                framework_id=framework_id,
                name=msg.name,
                role=msg.role,
                weight=msg.weight,
                inbox=msg.inbox,
                incarnation=msg.incarnation,
                failover_timeout=msg.failover_timeout,
                registered_at=time.time(),
            )
            self.books.frameworks[framework_id] = fw
            self.books.inboxes[fw.inbox] = framework_id
            self.allocator.add_framework(framework_id, msg.role, msg.weight)
            self._adopt_orphans(fw)
            resubscribed = bool(msg.framework_id)
        self._send_framework(
            fw,
            Subscribed(
                framework_id=fw.framework_id,
                heartbeat_interval_seconds=self.config.heartbeat_interval,
                master_id=self.master_id,
                resubscribed=resubscribed,
            ),
        )
        self.log.info(
            "framework.subscribed",
            framework_id=fw.framework_id,
            name=fw.name,
            role=fw.role,
            weight=fw.weight,
            resubscribed=resubscribed,
        )
        self._event("subscribed", framework_id=fw.framework_id, detail=fw.name)
        self.request_round()

    def _adopt_orphans(self, fw: Framework) -> None:
        for orphan in self.books.orphans.pop(fw.framework_id, []):
            slave = self.books.slaves.get(orphan.slave_id)
            if slave is None:
                continue
            task = Task(orphan.task, fw.framework_id, orphan.slave_id, orphan.state)
            fw.tasks[task.task_id] = task
            self.allocator.adopt(fw.framework_id, orphan.slave_id, task.resources)

    async def _on_accept(self, msg: Accept, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Accept")
        if fw is None:
            return
        now = self._now()
        records, problems = self._own_offers(fw, msg.offer_ids)
        slave_ids = {r.slave_id for r in records}
        if len(slave_ids) > 1:
            problems.append(f"offers span several slaves ({', '.join(sorted(slave_ids))})")
        if problems:
            for record in records:  # the valid ones go back to the pool, unfiltered
                self._drop_offer(record)
                self.allocator.recover(fw.framework_id, record.slave_id, record.resources)
            reason = "; ".join(problems)
            for task in msg.tasks:
                self._master_update(
                    fw,
                    task.task_id,
                    task.slave_id,
                    TaskState.ERROR,
                    Reason.INVALID_OFFERS,
                    reason,
                    ack=False,
                )
            self._refuse(
                reply_to,
                f"accept refused: {reason}",
                "invalid-offers",
                "Accept",
                framework_id=fw.framework_id,
            )
            self.request_round()
            return

        slave_id = records[0].slave_id
        remaining = sum((r.resources for r in records), Resources())
        for record in records:
            self._drop_offer(record)
        refused: list[str] = []
        seen: set[str] = set()
        for task in msg.tasks:
            problem = self._task_problem(fw, task, slave_id, remaining, seen)
            seen.add(task.task_id)
            if problem:
                refused.append(problem)
                self._master_update(
                    fw,
                    task.task_id,
                    task.slave_id,
                    TaskState.ERROR,
                    Reason.TASK_INVALID,
                    problem,
                    ack=False,
                )
                continue
            remaining = remaining - task.resources
            self._launch(fw, task, slave_id, now)
        if remaining:
            self.allocator.recover(
                fw.framework_id,
                slave_id,
                remaining,
                refuse_seconds=msg.filters.refuse_seconds,
                now=now,
            )
            self.request_round()
        if refused:
            self._refuse(
                reply_to,
                f"{len(refused)} of {len(msg.tasks)} tasks refused: " + "; ".join(refused),
                "invalid-tasks",
                "Accept",
                framework_id=fw.framework_id,
            )

    def _own_offers(
        self, fw: Framework, offer_ids: list[str]
    ) -> tuple[list[OfferRecord], list[str]]:
        records: list[OfferRecord] = []
        problems: list[str] = []
        for offer_id in dict.fromkeys(offer_ids):  # a repeated id counts once
            record = self.books.offers.get(offer_id)
            if record is None:
                problems.append(f"offer {offer_id} is not outstanding (unknown, used or rescinded)")
            elif record.framework_id != fw.framework_id:
                problems.append(f"offer {offer_id} belongs to another framework")
            else:
                records.append(record)
        return records, problems

    def _task_problem(
        self, fw: Framework, task: TaskInfo, slave_id: str, remaining: Resources, seen: set[str]
    ) -> str | None:
        tid = task.task_id
        if tid in seen or tid in fw.tasks:
            return f"task {tid}: the task id is already in use"
        if task.slave_id != slave_id:
            return f"task {tid}: slave_id {task.slave_id} is not the offer's slave {slave_id}"
        if not task.resources:
            return f"task {tid}: asks for no resources"
        if not remaining.contains(task.resources):
            return f"task {tid}: needs {task.resources} but only {remaining} is left of the offer"
        return None

    def _launch(self, fw: Framework, info: TaskInfo, slave_id: str, now: float) -> None:
        task = Task(info, fw.framework_id, slave_id, TaskState.STAGING, launched_at=now)
        fw.tasks[task.task_id] = task
        fw.slaves_used.add(slave_id)
        self.books.slaves[slave_id].tasks.add((fw.framework_id, task.task_id))
        self._send_slave(
            slave_id, RunTask(framework_id=fw.framework_id, framework_name=fw.name, task=info)
        )
        self._event(
            "launch",
            framework_id=fw.framework_id,
            slave_id=slave_id,
            task_id=task.task_id,
            resources=info.resources,
        )

    def _drop_offer(self, record: OfferRecord) -> None:
        self.books.offers.pop(record.offer_id, None)
        fw = self.books.frameworks.get(record.framework_id)
        if fw is not None:
            fw.offers.discard(record.offer_id)
        slave = self.books.slaves.get(record.slave_id)
        if slave is not None:
            slave.offers.discard(record.offer_id)

    def _rescind(self, record: OfferRecord, *, recover: bool = True) -> None:
        self._drop_offer(record)
        fw = self.books.frameworks.get(record.framework_id)
        if recover:
            self.allocator.recover(record.framework_id, record.slave_id, record.resources)
        if fw is not None and fw.connected:
            self._send_framework(fw, Rescind(offer_id=record.offer_id))
        self._event(
            "rescind",
            framework_id=record.framework_id,
            slave_id=record.slave_id,
            offer_id=record.offer_id,
            resources=record.resources,
        )

    async def _on_decline(self, msg: Decline, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Decline")
        if fw is None:
            return
        now = self._now()
        records, problems = self._own_offers(fw, msg.offer_ids)
        for record in records:
            self._drop_offer(record)
            self.allocator.recover(
                fw.framework_id,
                record.slave_id,
                record.resources,
                refuse_seconds=msg.filters.refuse_seconds,
                now=now,
            )
            self._event(
                "decline",
                framework_id=fw.framework_id,
                slave_id=record.slave_id,
                offer_id=record.offer_id,
                resources=record.resources,
            )
        if problems:
            self._refuse(
                reply_to,
                "; ".join(problems),
                "invalid-offers",
                "Decline",
                framework_id=fw.framework_id,
            )
        if records:
            self.request_round()

    async def _on_revive(self, msg: Revive, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Revive")
        if fw is not None:
            fw.suppressed = False
            self.allocator.revive(fw.framework_id)
            self._state_dirty = True
            self.request_round()

    async def _on_suppress(self, msg: Suppress, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Suppress")
        if fw is not None:
            fw.suppressed = True
            self.allocator.suppress(fw.framework_id)
            self._state_dirty = True

    async def _on_kill(self, msg: Kill, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Kill")
        if fw is None:
            return
        task = fw.tasks.get(msg.task_id)
        if task is None:
            # As Mesos: the framework learns the task's fate from an update, not an error.
            last = fw.completed.get(msg.task_id)
            status = last or TaskStatus(
                task_id=msg.task_id,
                state=TaskState.LOST,
                slave_id=msg.slave_id,
                reason=Reason.TASK_UNKNOWN,
                message="no such task to kill",
            )
            self._send_framework(fw, Update(status=status.model_copy(update={"uuid": None})))
            return
        self._send_slave(
            task.slave_id, KillTask(framework_id=fw.framework_id, task_id=task.task_id)
        )

    async def _on_acknowledge(self, msg: Acknowledge, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Acknowledge")
        if fw is not None and fw.pending.pop(msg.uuid, None) is None:
            self.log.debug("ack.unknown", framework_id=fw.framework_id, uuid=msg.uuid)

    async def _on_reconcile(self, msg: Reconcile, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Reconcile")
        if fw is None:
            return
        if not msg.tasks:  # implicit: everything the master knows to be live
            asked: list[tuple[str, str | None]] = [
                (t.task_id, t.slave_id) for t in fw.tasks.values()
            ]
        else:
            asked = [(t.task_id, t.slave_id) for t in msg.tasks]
        for task_id, slave_id in asked:
            task = fw.tasks.get(task_id)
            if task is not None:
                status = TaskStatus(
                    task_id=task_id,
                    state=task.state,
                    slave_id=task.slave_id,
                    reason=Reason.RECONCILIATION,
                    message=task.status.message if task.status else "",
                )
            elif task_id in fw.completed:
                status = fw.completed[task_id].model_copy(
                    update={"uuid": None, "reason": Reason.RECONCILIATION}
                )
            else:
                status = TaskStatus(
                    task_id=task_id,
                    state=TaskState.LOST,
                    slave_id=slave_id,
                    reason=Reason.RECONCILIATION,
                    message="the master knows no such task",
                )
            self._send_framework(fw, Update(status=status))

    async def _on_message(self, msg: Message, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Message")
        if fw is None:
            return
        if msg.slave_id not in self.books.slaves:
            self._refuse(
                reply_to,
                f"unknown slave {msg.slave_id}",
                "unknown-slave",
                "Message",
                framework_id=fw.framework_id,
            )
            return
        self._send_slave(
            msg.slave_id,
            FrameworkMessage(
                framework_id=fw.framework_id,
                slave_id=msg.slave_id,
                executor_id=msg.executor_id,
                data=msg.data,
            ),
        )

    async def _on_teardown(self, msg: Teardown, reply_to: str | None) -> None:
        fw = self._framework_for(msg.framework_id, reply_to, "Teardown")
        if fw is not None:
            self.remove_framework(fw, "teardown")

    def disconnect_framework(self, fw: Framework, why: str) -> None:
        if not fw.connected:
            return
        fw.connected = False
        fw.disconnected_at = self._now()
        self.allocator.deactivate(fw.framework_id)
        for offer_id in list(fw.offers):
            self._rescind(self.books.offers[offer_id])
        self.log.info(
            "framework.disconnected",
            framework_id=fw.framework_id,
            why=why,
            failover_timeout=fw.failover_timeout,
        )
        self._event("disconnected", framework_id=fw.framework_id, detail=why)
        if fw.failover_timeout <= 0:
            self.remove_framework(fw, "disconnected with no failover timeout")
        self.request_round()

    def remove_framework(self, fw: Framework, why: str) -> None:
        """Kill its tasks, give back everything it holds, and forget it."""
        for offer_id in list(fw.offers):
            self._rescind(self.books.offers[offer_id], recover=False)
        slaves: set[str] = set(fw.slaves_used)  # its executors may outlive its tasks
        for task in fw.tasks.values():
            slaves.add(task.slave_id)
            slave = self.books.slaves.get(task.slave_id)
            if slave is not None:
                slave.tasks.discard((fw.framework_id, task.task_id))
        for slave_id in slaves:
            if slave_id in self.books.slaves:
                self._send_slave(slave_id, ShutdownFramework(framework_id=fw.framework_id))
        self.allocator.remove_framework(fw.framework_id)  # releases tasks and offers alike
        del self.books.frameworks[fw.framework_id]
        self.books.inboxes.pop(fw.inbox, None)
        self.log.info(
            "framework.removed", framework_id=fw.framework_id, why=why, tasks_killed=len(fw.tasks)
        )
        self._event("removed", framework_id=fw.framework_id, detail=why)
        self.request_round()

    # -- slaves ------------------------------------------------------------------------------
    async def _on_register(self, msg: Register, reply_to: str | None) -> None:
        await self._admit_slave(
            msg.slave_id, msg.hostname, msg.resources, msg.attributes, msg.incarnation, [], reply_to
        )

    async def _on_reregister(self, msg: Reregister, reply_to: str | None) -> None:
        await self._admit_slave(
            msg.slave_id,
            msg.hostname,
            msg.resources,
            msg.attributes,
            msg.incarnation,
            msg.tasks,
            reply_to,
        )

    async def _admit_slave(
        self,
        slave_id: str,
        hostname: str,
        total: Resources,
        attributes: dict[str, str],
        incarnation: str,
        running: list[RunningTask],
        reply_to: str | None,
    ) -> None:
        try:
            check_segment(slave_id, "slave_id")
        except ValueError as e:
            self._refuse(reply_to, str(e), "invalid", "Register")
            return
        used = sum((r.task.resources for r in running), Resources())
        if not total.contains(used):
            self._refuse(
                reply_to,
                f"slave {slave_id} reports tasks using {used}, more than its total {total}",
                "invalid",
                "Reregister",
                slave_id=slave_id,
            )
            return
        now = self._now()
        slave = self.books.slaves.get(slave_id)
        if slave is None:
            slave = Slave(slave_id, hostname, total, attributes, incarnation, now)
            self.books.slaves[slave_id] = slave
            self.allocator.add_slave(slave_id, total, hostname=hostname, attributes=attributes)
            self.log.info(
                "slave.registered",
                slave_id=slave_id,
                hostname=hostname,
                resources=str(total),
                tasks=len(running),
            )
            self._event("slave-added", slave_id=slave_id, resources=total)
        else:
            slave.incarnation, slave.last_seen = incarnation, now
            self.log.info("slave.reregistered", slave_id=slave_id, tasks=len(running))
        if running or slave.tasks:
            self._reconcile_slave(slave, running, now)
        self._send_slave(
            slave_id,
            Registered(
                slave_id=slave_id,
                master_id=self.master_id,
                heartbeat_interval_seconds=self.config.heartbeat_interval,
            ),
        )
        self.request_round()

    def _reconcile_slave(self, slave: Slave, running: list[RunningTask], now: float) -> None:
        """Match what a (re-)registering slave runs against what the master believes."""
        reported = {(r.framework_id, r.task.task_id): r for r in running}
        for key in list(slave.tasks):
            if key in reported:
                continue
            task = self.books.task(*key)
            if task is None:
                slave.tasks.discard(key)
            elif task.state != TaskState.STAGING or now - task.launched_at > STAGING_GRACE:
                self._master_update(
                    self.books.frameworks[key[0]],
                    task.task_id,
                    slave.slave_id,
                    TaskState.LOST,
                    Reason.SLAVE_REMOVED,
                    "the slave no longer runs it",
                )
        for (framework_id, task_id), r in reported.items():
            if (framework_id, task_id) in slave.tasks:
                continue
            owner = self.books.frameworks.get(framework_id)
            if owner is not None:
                task = Task(r.task, framework_id, slave.slave_id, r.state)
                owner.tasks[task_id] = task
                slave.tasks.add((framework_id, task_id))
                self.allocator.allocate_existing(framework_id, slave.slave_id, r.task.resources)
            else:
                orphans = self.books.orphans.setdefault(framework_id, [])
                if not any(o.task.task_id == task_id for o in orphans):
                    orphans.append(Orphan(r.task, framework_id, slave.slave_id, r.state))
                    self.allocator.allocate_existing(framework_id, slave.slave_id, r.task.resources)

    async def _on_heartbeat(self, msg: Heartbeat, reply_to: str | None) -> None:
        slave = self.books.slaves.get(msg.source)
        if slave is None:
            # A slave we removed (or a master that restarted): it must register again.
            if msg.source:
                with contextlib.suppress(ValueError):
                    self._send_slave(
                        check_segment(msg.source),
                        Error(
                            message=f"unknown slave {msg.source}: re-register",
                            code="unknown-slave",
                            about="Heartbeat",
                        ),
                    )
            return
        slave.last_seen = self._now()
        if msg.incarnation:
            slave.incarnation = msg.incarnation

    async def _on_status_update(self, msg: StatusUpdate, reply_to: str | None) -> None:
        status = msg.status
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is None:
            # Not acknowledged: the slave keeps re-sending until the framework is back
            # (or is shut down there).
            self.log.info(
                "status.framework_unknown",
                framework_id=msg.framework_id,
                task_id=status.task_id,
                state=status.state,
            )
            return
        if status.uuid:
            self._send_slave(
                msg.slave_id,
                StatusAck(
                    slave_id=msg.slave_id,
                    framework_id=fw.framework_id,
                    task_id=status.task_id,
                    uuid=status.uuid,
                ),
            )
            if status.uuid in fw.pending:
                return  # a re-sent duplicate: already owed to the framework
        task = fw.tasks.get(status.task_id)
        if task is not None and task.slave_id == msg.slave_id:
            task.state, task.status = status.state, status
            if status.state.terminal:
                self._finish(fw, task, status)
        self._forward(fw, Update(status=status), msg.slave_id)
        self._state_dirty = True

    def _finish(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        """A task ended: its resources go back to the pool and a round follows."""
        fw.complete(task, status)
        slave = self.books.slaves.get(task.slave_id)
        if slave is not None:
            slave.tasks.discard((fw.framework_id, task.task_id))
            self.allocator.recover(fw.framework_id, task.slave_id, task.resources)
        self._event(
            "release",
            framework_id=fw.framework_id,
            slave_id=task.slave_id,
            task_id=task.task_id,
            resources=task.resources,
            state=status.state,
        )
        self.request_round()

    def _master_update(
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
        """A status the master itself decides (LOST, ERROR), sent like a slave's."""
        status = TaskStatus(
            task_id=task_id,
            state=state,
            slave_id=slave_id,
            reason=reason,
            message=message,
            uuid=new_id() if ack else None,
        )
        task = fw.tasks.get(task_id)
        if task is not None and task.slave_id == slave_id:
            task.state, task.status = state, status
            if state.terminal:
                self._finish(fw, task, status)
        self._forward(fw, Update(status=status), slave_id)

    def _forward(self, fw: Framework, update: Update, slave_id: str) -> None:
        if update.status.uuid:
            fw.pending[update.status.uuid] = PendingUpdate(
                update, slave_id, self._now() + self.config.status_retry, self.config.status_retry
            )
        if fw.connected:
            self._send_framework(fw, update)

    async def _on_executor_message(self, msg: FrameworkMessage, reply_to: str | None) -> None:
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is not None and fw.connected:
            self._send_framework(fw, msg)

    async def _on_executor_exited(self, msg: ExecutorExited, reply_to: str | None) -> None:
        fw = self.books.frameworks.get(msg.framework_id)
        self.log.info(
            "executor.exited",
            framework_id=msg.framework_id,
            slave_id=msg.slave_id,
            executor_id=msg.executor_id,
            status=msg.status,
        )
        if fw is not None and fw.connected:
            self._send_framework(
                fw, Failure(slave_id=msg.slave_id, executor_id=msg.executor_id, status=msg.status)
            )

    async def _on_error(self, msg: Error, reply_to: str | None) -> None:
        self.log.warning(
            "master.error_received",
            message=msg.message,
            code=msg.code,
            about=msg.about,
            sender=reply_to,
        )

    async def _on_gone(self, msg: Gone, reply_to: str | None) -> None:
        if msg.kind == "slave":
            slave = self.books.slaves.get(msg.id)
            if slave is not None and slave.incarnation == msg.incarnation:
                self.remove_slave(slave, "its connection was lost (last will)")
        elif msg.kind == "framework":
            framework_id = self.books.inboxes.get(msg.id)
            fw = self.books.frameworks.get(framework_id or "")
            if fw is not None and fw.incarnation == msg.incarnation:
                self.disconnect_framework(fw, "its connection was lost (last will)")

    def remove_slave(self, slave: Slave, why: str) -> None:
        for offer_id in list(slave.offers):
            self._rescind(self.books.offers[offer_id], recover=False)
        affected: set[str] = set()
        for framework_id, task_id in list(slave.tasks):
            fw = self.books.frameworks.get(framework_id)
            if fw is None:
                continue
            affected.add(framework_id)
            self._master_update(
                fw,
                task_id,
                slave.slave_id,
                TaskState.LOST,
                Reason.SLAVE_REMOVED,
                f"slave {slave.slave_id} removed: {why}",
            )
        for orphans in self.books.orphans.values():
            orphans[:] = [o for o in orphans if o.slave_id != slave.slave_id]
        self.allocator.remove_slave(slave.slave_id)
        del self.books.slaves[slave.slave_id]
        for other in self.books.frameworks.values():
            if other.connected:
                self._send_framework(other, Failure(slave_id=slave.slave_id))
        self.log.warning(
            "slave.removed", slave_id=slave.slave_id, why=why, frameworks_affected=len(affected)
        )
        self._event("slave-removed", slave_id=slave.slave_id, detail=why)
        self.request_round()

    # -- the allocation round ------------------------------------------------------------------
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
        allocations = self.allocator.allocate(now)
        self.rounds += 1
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

    # -- time-driven duties --------------------------------------------------------------------
    async def _timer_loop(self) -> None:
        tick = min(0.25, self.config.state_interval)
        next_heartbeat = self._now()
        next_state = self._now()
        while True:
            now = self._now()
            try:
                self._expire(now)
                self._retry_updates(now)
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
                    self._send_framework(fw, pending.update)
                    pending.backoff = min(pending.backoff * 2, MAX_RETRY_BACKOFF)
                    pending.next_attempt = now + pending.backoff

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
        )

    def publish_state(self) -> None:
        self._state_dirty = False
        self.bus.post(
            self.topics.state, self.state(include_tasks=len(self.books.slaves) < 200), retain=True
        )
