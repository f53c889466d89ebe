"""What the master does with calls from frameworks: subscribe, accept, decline, kill, ..."""

from __future__ import annotations

import asyncio
import time

from master.authz import Caller
from master.books import Framework, OfferRecord, Task
from master.calls.claims import FrameworkClaims
from master.ha.registry import FrameworkRecord
from master.shell import MasterShell
from master.task_states import as_seen, unknown_task
from protocol.wire.ids import check_id, shorten, task_problem
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Decline,
    FrameworkCapability,
    FrameworkMessage,
    Kill,
    KillTask,
    Message,
    Reason,
    Reconcile,
    Request,
    Revive,
    RunTasks,
    Source,
    Subscribe,
    Subscribed,
    Suppress,
    TaskInfo,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
    new_id,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import MAX_REPLY_TOPIC, check_segment


def check_segment_ok(value: str) -> bool:
    try:
        check_segment(value)
    except ValueError:
        return False
    return True


class FrameworkCalls:
    """A framework's calls, handled against the shell's books (constructed with the shell)."""

    def __init__(self, shell: MasterShell) -> None:
        self.shell = shell
        self.claims = FrameworkClaims(shell)  # whose a framework id is

    def _subscribe_problem(self, msg: Subscribe, caller: Caller) -> tuple[str, str] | None:
        """(code, why) if this Subscribe may not go ahead."""
        try:
            check_segment(msg.inbox, "inbox")
            if msg.framework_id:
                check_id(check_segment(msg.framework_id, "framework_id"), "framework_id")
        except ValueError as e:
            return "subscribe-refused", str(e)
        inbox = self.shell.topics.framework(caller.principal, msg.inbox)
        if len(inbox) > MAX_REPLY_TOPIC:  # (its calls name it as where answers go)
            return "subscribe-refused", (
                f"inbox topic {shorten(inbox)} is {len(inbox)} characters: at most "
                f"{MAX_REPLY_TOPIC}"
            )
        if not msg.name.isprintable():  # it reaches executors' environments
            return "subscribe-refused", "framework name must not contain control characters"
        if caller.kind != "framework":
            return "subscribe-refused", f"a {caller.kind} principal cannot register a framework"
        if why := self.shell.roles_acl.unknown(caller.principal):  # (removed: back for it)
            return "subscribe-refused", why
        if msg.framework_id and (claim := self.claims.problem(msg.framework_id, caller)):
            return claim
        fw = self.shell.books.frameworks.get(msg.framework_id or "")
        if fw is None:
            why = self.shell.allocator.role_problem(msg.role) or self.shell.roles_acl.check(
                caller.principal, msg.role
            )
            if why is not None:
                return "role-refused", why
            if why := self._one_too_many(msg, caller):
                return "too-many-frameworks", why
        return self._weight_problem(msg, fw.role if fw else msg.role)

    def _one_too_many(self, msg: Subscribe, caller: Caller) -> str | None:
        """A new framework past its principal's most (a tenant registering thousands slowed
        the master for every other: each stays, and is offered to, until it goes)."""
        most = self.shell.config.max_frameworks_per_principal
        books = self.shell.books
        if not most or (caller.principal, msg.inbox) in books.inboxes:  # (its retry)
            return None
        if books.principal_frameworks[caller.principal] < most:
            return None
        return (
            f"principal {caller.principal} has {most} frameworks registered, the most it "
            "may (the master's --max-frameworks-per-principal): tear one down first"
        )

    def _failover_timeout(self, msg: Subscribe) -> float:
        """What it asked for, no longer than the operator allows (a framework that goes
        away does not hold its tasks, and so its share, for as long as it likes)."""
        cap = self.shell.config.max_failover_timeout
        return msg.failover_timeout if cap is None else min(msg.failover_timeout, cap)

    def _weight_problem(self, msg: Subscribe, role: str) -> tuple[str, str] | None:
        """A framework takes its role's weight; it may not set it (weights are operators')."""
        configured = self.shell.allocator.role_weight(role)
        if msg.weight is None or msg.weight == configured:
            return None
        return "subscribe-refused", (
            f"weight {msg.weight:g} asked for role {role}, whose weight is {configured:g}: "
            "a role's weight is set by an operator (drfmesos weights set); ask an operator"
        )

    async def on_subscribe(self, msg: Subscribe, caller: Caller) -> None:
        problem = self._subscribe_problem(msg, caller)
        if problem is not None:
            code, why = problem
            # answered on the inbox it named, which the broker lets only this principal read
            inbox = self.shell.topics.framework(caller.principal, msg.inbox)
            if not caller.reply_to and check_segment_ok(msg.inbox):
                caller = Caller(caller.kind, caller.principal, inbox)
            self.shell.refuse(caller, why, code, "Subscribe", framework_id=msg.framework_id)
            return
        now = self.shell.now()
        fw = self.shell.books.frameworks.get(msg.framework_id or "")
        if fw is None and msg.framework_id is None:
            # the same inbox asking again (its first answer crossed a retry): same framework
            known = self.shell.books.inboxes.get((caller.principal, msg.inbox), "")
            fw = self.shell.books.frameworks.get(known)
        framework_id = fw.framework_id if fw else msg.framework_id
        framework_id = framework_id or self.shell.framework_ids.new(caller.principal)
        record = FrameworkRecord(
            principal=caller.principal,
            name=fw.name if fw else msg.name,
            role=fw.role if fw else msg.role,
            weight=self.shell.allocator.role_weight(fw.role if fw else msg.role),
            failover_timeout=self._failover_timeout(msg),
        )
        if not await self.shell.record_or_refuse(
            self.shell.registry.add_framework(framework_id, record), caller, "Subscribe"
        ):
            return
        fw = self.shell.books.frameworks.get(framework_id) or fw  # (it may have come meanwhile)
        if fw is not None:
            self.shell.books.inboxes.pop((fw.principal, fw.inbox), None)
            fw.inbox, fw.incarnation = msg.inbox, msg.incarnation
            fw.connected, fw.disconnected_at = True, None
            fw.failover_timeout = self._failover_timeout(msg)
            self.shell.books.inboxes[(fw.principal, fw.inbox)] = fw.framework_id
            self.shell.allocator.activate(fw.framework_id)
            self._set_offer_filters(fw.framework_id, msg)
            resubscribed = True
        else:
            fw = Framework(
                framework_id=framework_id,
                principal=caller.principal,
                name=msg.name,
                role=msg.role,
                weight=self.shell.allocator.role_weight(msg.role),
                inbox=msg.inbox,
                incarnation=msg.incarnation,
                failover_timeout=self._failover_timeout(msg),
                registered_at=time.time(),
            )
            self.shell.books.add_framework(fw)
            self.shell.books.inboxes[(fw.principal, fw.inbox)] = framework_id
            self.shell.allocator.add_framework(framework_id, msg.role)
            self._set_offer_filters(framework_id, msg)
            self.claims.adopt_orphans(fw)
            resubscribed = bool(msg.framework_id)
        fw.partition_aware = FrameworkCapability.PARTITION_AWARE in msg.capabilities
        fw.task_killing = FrameworkCapability.TASK_KILLING_STATE in msg.capabilities
        self.shell.send_framework(
            fw,
            Subscribed(
                framework_id=fw.framework_id,
                heartbeat_interval_seconds=self.shell.config.heartbeat_interval,
                master_id=self.shell.master_id,
                resubscribed=resubscribed,
                epoch=self.shell.epoch,
            ),
        )
        # What it is owed goes now, in the order it was made, right behind the answer: a
        # task's update made after this (its end) must not overtake an older one (its
        # RUNNING), as it would if these waited for the retry timer.
        for pending in fw.pending.values():
            self.shell.resend_update(fw, pending, now)
        self.shell.log.info(
            "framework.subscribed",
            framework_id=fw.framework_id,
            principal=fw.principal,
            name=fw.name,
            role=fw.role,
            weight=fw.weight,
            resubscribed=resubscribed,
        )
        self.shell.emit_event("subscribed", framework_id=fw.framework_id, detail=fw.name)
        self.shell.request_round()

    def _set_offer_filters(self, framework_id: str, msg: Subscribe) -> None:
        minimum = msg.offer_filters.min_allocatable if msg.offer_filters else []
        self.shell.allocator.set_min_allocatable(framework_id, [r for r in minimum if r])

    async def on_accept(self, msg: Accept, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Accept")
        if fw is None:
            return
        now = self.shell.now()
        records, problems = self._own_offers(fw, msg.offer_ids)
        self.shell.cycle.answered(fw.framework_id)
        if not records and launched_before(fw, msg.tasks):
            # MQTT delivers at least once: an Accept carried out before arrives again (a
            # broker restart before its PUBACK). Refused, its running tasks would be
            # reported TASK_LOST; its first delivery answered it already.
            self.shell.log.info("accept.again", framework_id=fw.framework_id)
            return
        slave_ids = {r.slave_id for r in records}
        if len(slave_ids) > 1:
            problems.append(f"offers span several slaves ({', '.join(sorted(slave_ids))})")
        if problems:
            for record in records:  # the valid ones go back to the pool, unfiltered
                self.shell.drop_offer(record)
                self.shell.cycle.decline(
                    fw.framework_id, record.slave_id, record.resources, None, now
                )
            reason = "; ".join(problems)
            # As Mesos: the task was fine and the offer was not, so TASK_DROPPED (TASK_LOST
            # to frameworks not partition-aware): launch it again. Not an Error: in Mesos
            # that means the framework is removed.
            for task in msg.tasks:
                why = f"Task launched with invalid offers: {reason}"
                self.refuse_launch(fw, task, TaskState.DROPPED, Reason.INVALID_OFFERS, why)
            self.shell.refuse(
                caller,
                f"accept refused: {reason}",
                "invalid-offers",
                "Accept",
                tell=False,
                framework_id=fw.framework_id,
                tasks=len(msg.tasks),
            )
            self.shell.request_round()
            return

        slave_id = records[0].slave_id
        remaining = sum((r.resources for r in records), Resources())
        for record in records:
            self.shell.drop_offer(record)
        refused: list[str] = []
        seen: set[str] = set()
        launched: list[TaskInfo] = []
        for task in msg.tasks:
            problem = self._task_problem(fw, task, slave_id, remaining, seen)
            seen.add(task.task_id)
            if problem:
                refused.append(problem)
                self.refuse_launch(fw, task, TaskState.ERROR, Reason.TASK_INVALID, problem)
                continue
            remaining = remaining - task.resources - self._start_executor(fw, task, slave_id)
            self._launch(fw, task, slave_id, now)
            launched.append(task)
        if launched:  # one message to the slave for all of them
            self.shell.send_slave(
                slave_id,
                RunTasks(
                    framework_id=fw.framework_id,
                    framework_name=fw.name,
                    tasks=launched,
                    launch_id=new_id(),
                    # whose tasks they are (the slave runs them as that principal's and
                    # reports it back): nobody's is proven on an insecure cluster
                    principal=fw.principal if self.shell.framework_ids.signed else "",
                    killing=fw.task_killing,
                ),
            )
        # the event stream hears of it after the slave is told (the task waits for that)
        for record in records:
            self.shell.emit_event(
                "accept",
                framework_id=fw.framework_id,
                slave_id=record.slave_id,
                offer_id=record.offer_id,
                resources=record.resources,
            )
        for task in launched:
            self.shell.emit_event(
                "launch",
                framework_id=fw.framework_id,
                slave_id=slave_id,
                task_id=task.task_id,
                resources=task.resources,
            )
        refuse = msg.filters.refuse_seconds  # (what it did not use: declined)
        if self.shell.cycle.decline(fw.framework_id, slave_id, remaining, refuse, now):
            self.shell.request_round()
        if refused:  # each heard TASK_ERROR already: that is the answer
            self.shell.refuse(
                caller,
                f"{len(refused)} of {len(msg.tasks)} tasks refused: " + "; ".join(refused),
                "invalid-tasks",
                "Accept",
                tell=False,
                framework_id=fw.framework_id,
            )

    def _own_offers(
        self, fw: Framework, offer_ids: list[str]
    ) -> tuple[list[OfferRecord], list[str]]:
        records: list[OfferRecord] = []
        problems: list[str] = []
        for offer_id in dict.fromkeys(offer_ids):  # a repeated id counts once
            record = self.shell.books.offers.get(offer_id)
            if record is None:
                problems.append(f"offer {offer_id} is not outstanding (unknown, used or rescinded)")
            elif record.framework_id != fw.framework_id:
                problems.append(f"offer {offer_id} belongs to another framework")
            else:
                records.append(record)
        return records, problems

    def refuse_launch(
        self, fw: Framework, task: TaskInfo, state: TaskState, reason: Reason, why: str
    ) -> None:
        """The update for a launch that never happened: TASK_ERROR for an invalid task,
        TASK_DROPPED (TASK_LOST to frameworks not partition-aware) for invalid offers. A
        live task of the same id (a reused id) is a different task: its record and
        resources are left alone, so this is not `_master_update`."""
        state, seen_reason = as_seen(state, reason, fw.partition_aware)
        status = TaskStatus(
            task_id=task.task_id,
            state=state,
            slave_id=task.slave_id,
            reason=seen_reason,
            source=Source.MASTER,
            message=why,
        )
        self.shell.forward_update(fw, Update(status=status), task.slave_id)

    def _task_problem(
        self, fw: Framework, task: TaskInfo, slave_id: str, remaining: Resources, seen: set[str]
    ) -> str | None:
        tid = task.task_id
        problem = task_problem(task)
        if problem is not None:
            return f"task {shorten(tid)}: {problem}"
        if tid in seen or tid in fw.tasks:
            return f"task {tid}: the task id is already in use by a live task"
        if task.slave_id != slave_id:
            return f"task {tid}: slave_id {task.slave_id} is not the offer's slave {slave_id}"
        if not task.resources:
            return f"task {tid}: asks for no resources"
        need = task.resources
        if task.executor is not None:  # as Mesos: a new executor's resources come out too
            eid = task.executor.executor_id
            held = fw.executors.get((slave_id, eid))
            if held is None:
                need = need + task.executor.resources
            elif held != task.executor.resources:
                return f"task {tid}: executor {eid} runs with {held}, not {task.executor.resources}"
        if not remaining.contains(need):
            return f"task {tid}: needs {need} but only {remaining} is left of the offer"
        return None

    def _start_executor(self, fw: Framework, task: TaskInfo, slave_id: str) -> Resources:
        """What a launch takes from its offer for the task's executor, besides the task:
        a custom executor's own resources, with its first task. They stay the framework's
        (in its allocation and dominant share) until the executor exits."""
        if task.executor is None or (slave_id, task.executor.executor_id) in fw.executors:
            return Resources()
        fw.executors[(slave_id, task.executor.executor_id)] = task.executor.resources
        return task.executor.resources

    def _launch(self, fw: Framework, info: TaskInfo, slave_id: str, now: float) -> None:
        task = Task(info, fw.framework_id, slave_id, TaskState.STAGING, launched_at=now)
        fw.tasks[task.task_id] = task
        fw.slaves_used.add(slave_id)
        fw.launched(info.resources)
        self.shell.books.slaves[slave_id].tasks.add((fw.framework_id, task.task_id))

    async def on_decline(self, msg: Decline, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Decline")
        if fw is None:
            return
        now = self.shell.now()
        records, problems = self._own_offers(fw, msg.offer_ids)
        self.shell.cycle.answered(fw.framework_id)
        refuse, fid = msg.filters.refuse_seconds, fw.framework_id
        for record in records:
            self.shell.drop_offer(record)
            self.shell.cycle.decline(fid, record.slave_id, record.resources, refuse, now)
            self.shell.emit_event(
                "decline",
                framework_id=fw.framework_id,
                slave_id=record.slave_id,
                offer_id=record.offer_id,
                resources=record.resources,
            )
        if problems:  # as Mesos: an offer that is gone needs no declining (logged only)
            self.shell.refuse(
                caller,
                "; ".join(problems),
                "invalid-offers",
                "Decline",
                tell=False,
                framework_id=fw.framework_id,
            )
        if records:
            self.shell.request_round()

    async def on_revive(self, msg: Revive, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Revive")
        if fw is not None:
            fw.suppressed = False
            self.shell.cycle.revive(fw.framework_id)
            self.shell.state_dirty = True
            self.shell.request_round()

    async def on_suppress(self, msg: Suppress, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Suppress")
        if fw is not None:
            fw.suppressed = True
            fw.demand = []  # wants nothing more, until it says so again
            self.shell.cycle.suppress(fw.framework_id)
            self.shell.state_dirty = True

    async def on_request(self, msg: Request, caller: Caller) -> None:
        """What the framework still wants: replaces what it declared before."""
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Request")
        if fw is None:
            return
        unknown = sorted(
            {n for r in msg.requests for n in r.resources} - set(self.shell.allocator.total)
        )
        if unknown and self.shell.allocator.total:
            self.shell.refuse(
                caller,
                f"Request refused: no slave has {', '.join(unknown)}",
                "invalid-request",
                "Request",
                framework_id=fw.framework_id,
            )
            return
        fw.demand = [r.model_copy() for r in msg.requests]
        self.shell.state_dirty = True
        self.shell.log.debug(
            "framework.request",
            framework_id=fw.framework_id,
            tasks=sum(r.count for r in msg.requests),
        )

    async def on_kill(self, msg: Kill, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Kill")
        if fw is None:
            return
        task = fw.tasks.get(msg.task_id)
        if task is None:
            # As Mesos: a task it cannot kill (unknown, ended, or on an unreachable slave)
            # is reconciled: the framework learns its fate from an update, not an error.
            if msg.task_id in fw.unreachable:  # killed when its slave is back (as Mesos)
                fw.kills_owed.add(msg.task_id)
            status = self._reconciled(fw, msg.task_id, msg.slave_id)
            if status is not None:
                self.shell.send_framework(fw, Update(status=status))
            return
        kill = KillTask(
            framework_id=fw.framework_id,
            task_id=task.task_id,
            kill_policy=msg.kill_policy,
            killing=fw.task_killing,
        )
        self.shell.send_slave(task.slave_id, kill)

    async def on_acknowledge(self, msg: Acknowledge, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Acknowledge")
        if fw is None:
            return
        pending = fw.pending.pop(msg.uuid, None)
        if pending is None:
            self.shell.log.debug("ack.unknown", framework_id=fw.framework_id, uuid=msg.uuid)
        elif pending.relayed:  # as Mesos: the slave keeps (and re-sends) it until now
            self.shell.ack_slave_update(pending.slave_id, fw.framework_id, pending.update.status)

    async def on_reconcile(self, msg: Reconcile, caller: Caller) -> None:
        """As Mesos's _reconcileTasks: a known task's latest state; for one the master does
        not know, what it knows of the slave named (see master.task_states.unknown_task)."""
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Reconcile")
        if fw is None:
            return
        if not msg.tasks:  # implicit: everything the master knows to be live
            asked: list[tuple[str, str | None]] = [
                (t.task_id, t.slave_id) for t in (*fw.tasks.values(), *fw.unreachable.values())
            ]
        else:
            asked = [(t.task_id, t.slave_id) for t in msg.tasks]
        for i, (task_id, slave_id) in enumerate(asked):
            if i and not i % 256:  # a long list lets the loop breathe (health, rounds)
                await asyncio.sleep(0)
                if fw.framework_id not in self.shell.books.frameworks:
                    return  # removed meanwhile
            status = self._reconciled(fw, task_id, slave_id)
            if status is not None:
                self.shell.send_framework(fw, Update(status=status))

    def _reconciled(self, fw: Framework, task_id: str, slave_id: str | None) -> TaskStatus | None:
        """What reconciling one task answers (None: nothing yet, ask again later)."""
        task = fw.tasks.get(task_id) or fw.unreachable.get(task_id)
        if task is not None:
            return TaskStatus(
                task_id=task_id,
                state=task.state,
                slave_id=task.slave_id,
                reason=Reason.RECONCILIATION,
                source=Source.MASTER,
                message=task.status.message if task.status else "",
            )
        if task_id in fw.completed:
            return fw.completed[task_id].model_copy(
                update={"uuid": None, "reason": Reason.RECONCILIATION, "source": Source.MASTER}
            )
        if (fw.framework_id, task_id) in self.shell.books.ending:
            return None  # it ended on its slave; the update saying how is on its way
        if slave_id in self.shell.books.recovering or (
            slave_id is None and self.shell.books.recovering
        ):
            return None  # as Mesos: no answer until its slave is back, or removed
        state, message = unknown_task(
            slave_id,
            registered=slave_id in self.shell.books.slaves,
            unreachable=slave_id in self.shell.books.removed_slaves,
            gone=slave_id in self.shell.books.gone_slaves,
        )
        state, _ = as_seen(state, None, fw.partition_aware)
        status = TaskStatus(
            task_id=task_id,
            state=state,
            slave_id=slave_id,
            reason=Reason.RECONCILIATION,
            source=Source.MASTER,
            message=message,
        )
        if state.terminal:  # a slave that brings it back has it killed
            fw.declare_ended(status)
        return status

    async def on_message(self, msg: Message, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Message")
        if fw is None:
            return
        if msg.slave_id not in self.shell.books.slaves:
            self.shell.refuse(
                caller,
                f"unknown slave {msg.slave_id}",
                "unknown-slave",
                "Message",
                framework_id=fw.framework_id,
            )
            return
        self.shell.send_slave(
            msg.slave_id,
            FrameworkMessage(
                framework_id=fw.framework_id,
                slave_id=msg.slave_id,
                executor_id=msg.executor_id,
                data=msg.data,
            ),
        )

    async def on_teardown(self, msg: Teardown, caller: Caller) -> None:
        fw = self.shell.framework_of_caller(msg.framework_id, caller, "Teardown")
        if fw is not None:
            who = "by an operator" if caller.kind == "operator" else "by its scheduler"
            self.shell.log.info(
                "framework.teardown",
                framework_id=fw.framework_id,
                owner=fw.principal,
                by=f"{caller.kind}:{caller.principal}",
            )
            self.shell.remove_framework(fw, f"torn down {who} ({caller.principal})")


def launched_before(fw: Framework, tasks: list[TaskInfo]) -> bool:
    """Every task already known to the framework's books (running, or recently ended) on
    the slave the launch names: this launch happened."""
    return bool(tasks) and all(fw.slave_of(t.task_id) == t.slave_id for t in tasks)
