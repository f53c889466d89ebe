"""What the master does with a framework's calls once it subscribed: accept, decline, kill,
reconcile, ... (Subscribe itself: master.calls.subscribe)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from master.allocation.allocator import Allocator
from master.authz import Caller
from master.books import Books, Framework
from master.calls.resource_operations import ResourceOperations
from master.calls.status_updates import heard_state
from master.cycle import OfferCycle
from master.framework_ids import FrameworkIds
from master.intake.queues import Work
from master.offers import OfferBook
from master.outbox import Outbox
from master.reconcile_waits import ReconcileWaits
from master.removals import Removals
from master.task_states import as_seen, unknown_task
from master.updates import TaskUpdates
from protocol.transport.aio import loop_time
from protocol.wire.messages import (
    Acknowledge,
    Decline,
    FrameworkMessage,
    Kill,
    KillTask,
    Message,
    Reason,
    Reconcile,
    Request,
    Revive,
    Source,
    Suppress,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
)

# asks answered in one turn of the loop: a Reconcile's list, and the asks kept for a slave
# that is back (each piece of those waits in its principal's queue)
ANSWERS_A_TURN = 256

FAILED_OVER = "failed-over"  # a call of a scheduler another took its framework over from


def from_its_scheduler(outbox: Outbox, fw: Framework, caller: Caller) -> bool:
    """Whether a call of `fw`'s principal may act for it: not one from a scheduler another
    took it over from (Mesos's failover fence). A call names where its answers go, its
    connection's inbox (the SDK's driver's; a Mesos API call's, the stream its
    Mesos-Stream-Id names): one naming an inbox of the principal's other than the one the
    framework subscribed with last comes from a deposed scheduler (the new one's inbox is
    its own, a new random id, which the old one never heard). The broker vouches for the
    principal alone, so this fences schedulers, not the principal: a process of it that
    names no inbox acts as before, as it could take the framework over by subscribing
    with its id anyway. A framework back from the registry and not subscribed yet has no
    inbox: any of its principal's calls."""
    reply_to = caller.reply_to
    if not fw.inbox or reply_to is None:
        return True
    topics = outbox.topics
    inbox = reply_to.removeprefix(topics.outbox("framework", fw.principal) + "/")
    return inbox == reply_to or inbox == fw.inbox


def framework_of_caller(
    books: Books, outbox: Outbox, framework_id: str, caller: Caller, about: str
) -> Framework | None:
    """The framework a call names, if the caller may act on it (else refused). Another
    principal's framework is refused as an unknown one is: in one answer, so that no
    principal learns which ids exist."""
    fw = books.frameworks.get(framework_id)
    if fw is not None and caller.kind == "operator" and about == "Teardown":
        return fw  # operators may tear down any framework
    if fw is not None and caller.kind == "framework" and fw.principal == caller.principal:
        if from_its_scheduler(outbox, fw, caller):
            return fw
        outbox.refuse(
            caller,
            f"Framework failed over: framework {framework_id} is served by the scheduler "
            "that subscribed with its id last; this one's calls are ignored",
            FAILED_OVER,
            about,
            framework_id=framework_id,
        )
        return None
    removed = books.removed.get(framework_id)
    if fw is None and removed is not None and removed[0] == caller.principal:
        outbox.refuse(
            caller,
            f"Framework has been removed: {removed[1]}",
            "framework-removed",
            about,
            framework_id=framework_id,
        )
        return None
    hint = "" if caller.kind == "operator" else ": subscribe first"
    outbox.refuse(
        caller,
        f"unknown framework {framework_id}{hint}",
        "unknown-framework",
        about,
        framework_id=framework_id,
        owner=fw.principal if fw is not None else None,  # (the log's, not theirs)
    )
    return None


class FrameworkCalls:
    """A subscribed framework's calls, against the books, the offer cycle and the offers
    outstanding; what they end (tasks' updates, removals) through those collaborators."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        cycle: OfferCycle,
        offers: OfferBook,
        outbox: Outbox,
        updates: TaskUpdates,
        removals: Removals,
        *,
        ids: FrameworkIds,
        operations: ResourceOperations,
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        """`ids`: whether the cluster proves whose a framework is (then a launch says
        whose its tasks are). `operations`: an Accept's RESERVE, CREATE and the like."""
        self.books, self.allocator, self.cycle, self.offers = books, allocator, cycle, offers
        self.outbox, self.updates, self.removals = outbox, updates, removals
        self.ids, self.request_round, self.log = ids, request_round, log
        self.operations = operations
        # asks about tasks on slaves still recovering after a failover (`kept_answers`)
        self.waits = ReconcileWaits()

    def _framework(self, framework_id: str, caller: Caller, about: str) -> Framework | None:
        return framework_of_caller(self.books, self.outbox, framework_id, caller, about)

    async def on_decline(self, msg: Decline, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Decline")
        if fw is not None:
            self.decline(fw, msg, caller)

    def decline(self, fw: Framework, msg: Decline, caller: Caller) -> None:
        now = loop_time()
        records, problems = self.offers.own(fw, msg.offer_ids)
        self.cycle.answered(fw.framework_id)
        refuse, fid = msg.filters.refuse_seconds, fw.framework_id
        for record in records:
            self.offers.drop(record)
            self.cycle.decline(
                fid, record.slave_id, record.resources, refuse, now, record.role, whole=True
            )
            self.outbox.emit(
                "decline",
                framework_id=fw.framework_id,
                slave_id=record.slave_id,
                offer_id=record.offer_id,
                resources=record.resources,
            )
        if problems:  # as Mesos: an offer that is gone needs no declining (logged only)
            self.outbox.refuse(
                caller,
                "; ".join(problems),
                "invalid-offers",
                "Decline",
                tell=False,
                framework_id=fw.framework_id,
            )
        if records:
            self.request_round()

    async def on_revive(self, msg: Revive, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Revive")
        if fw is not None and self._roles_of(fw, msg.roles, caller, "Revive"):
            roles = self._roles_named(fw, msg.roles)
            self.cycle.revive(fw.framework_id, roles, loop_time())
            self.outbox.state_changed()
            self.request_round()

    async def on_suppress(self, msg: Suppress, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Suppress")
        if fw is not None and self._roles_of(fw, msg.roles, caller, "Suppress"):
            if not msg.roles or set(msg.roles) == set(fw.all_roles()):
                fw.demand = []  # wants nothing more, until it says so again
            self.cycle.suppress(fw.framework_id, self._roles_named(fw, msg.roles))
            self.outbox.state_changed()

    def _roles_of(self, fw: Framework, roles: list[str], caller: Caller, about: str) -> bool:
        """Whether every role a Suppress or Revive names is the framework's (else it is
        refused whole, as Mesos refuses it: an invalid call, which costs the framework
        nothing else, so not `role-refused`, after which the master serves it no more)."""
        others = sorted(set(roles) - set(fw.all_roles()))
        if others:
            self.outbox.refuse(
                caller,
                f"{about} names roles framework {fw.framework_id} is not in: "
                f"{', '.join(others)} (its roles: {', '.join(fw.all_roles())})",
                "invalid-roles",
                about,
                framework_id=fw.framework_id,
            )
        return not others

    @staticmethod
    def _roles_named(fw: Framework, roles: list[str]) -> list[str]:
        """The roles the allocator is told of: a multi-role framework's (a framework of
        one role is in its role alone: all of it)."""
        return roles if fw.roles is not None else []

    async def on_request(self, msg: Request, caller: Caller) -> None:
        """What the framework still wants: replaces what it declared before."""
        fw = self._framework(msg.framework_id, caller, "Request")
        if fw is None:
            return
        unknown = sorted({n for r in msg.requests for n in r.resources} - set(self.allocator.total))
        if unknown and self.allocator.total:
            self.outbox.refuse(
                caller,
                f"Request refused: no slave has {', '.join(unknown)}",
                "invalid-request",
                "Request",
                framework_id=fw.framework_id,
            )
            return
        fw.demand = [r.model_copy() for r in msg.requests]
        self.outbox.state_changed()
        self.log.debug(
            "framework.request",
            framework_id=fw.framework_id,
            tasks=sum(r.count for r in msg.requests),
        )

    async def on_kill(self, msg: Kill, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Kill")
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
                self.outbox.send_framework(fw, Update(status=status))
            return
        kill = KillTask(
            framework_id=fw.framework_id,
            task_id=task.task_id,
            kill_policy=msg.kill_policy,
            killing=fw.task_killing,
        )
        task.kill = kill  # (sent again if its slave re-registers: SlaveCalls)
        self.outbox.send_slave(task.slave_id, kill)

    async def on_acknowledge(self, msg: Acknowledge, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Acknowledge")
        if fw is None:
            return
        pending = fw.pending.pop(msg.uuid, None)
        if pending is None:
            self.log.debug("ack.unknown", framework_id=fw.framework_id, uuid=msg.uuid)
        elif pending.relayed:  # as Mesos: the slave keeps (and re-sends) it until now
            self.updates.ack_slave(pending.slave_id, fw.framework_id, pending.update.status)

    async def on_reconcile(self, msg: Reconcile, caller: Caller) -> None:
        """As Mesos's _reconcileTasks: a known task's latest state; for one the master does
        not know, what it knows of the slave named (see master.task_states.unknown_task)."""
        fw = self._framework(msg.framework_id, caller, "Reconcile")
        if fw is None:
            return
        if not msg.tasks:  # implicit: everything the master knows to be live
            asked: list[tuple[str, str | None]] = [
                (t.task_id, t.slave_id) for t in (*fw.tasks.values(), *fw.unreachable.values())
            ]
        else:
            asked = [(t.task_id, t.slave_id) for t in msg.tasks]
        for i, (task_id, slave_id) in enumerate(asked):
            if i and not i % ANSWERS_A_TURN:  # a long list lets the loop breathe (health, rounds)
                await asyncio.sleep(0)
                if fw.framework_id not in self.books.frameworks:
                    return  # removed meanwhile
            status = self._reconciled(fw, task_id, slave_id)
            if status is not None:
                self.outbox.send_framework(fw, Update(status=status))

    def _reconciled(self, fw: Framework, task_id: str, slave_id: str | None) -> TaskStatus | None:
        """What reconciling one task answers (None: nothing yet, ask again later)."""
        task = fw.tasks.get(task_id) or fw.unreachable.get(task_id)
        if task is not None:
            # as Mesos: the state its updates made it, not the master's own KILLING mark
            # of a preemption's victim (no update said it: TASK_KILLING is for frameworks
            # with TASK_KILLING_STATE, and their slaves' updates tell them)
            state = heard_state(task) if task.state == TaskState.KILLING else task.state
            return TaskStatus(
                task_id=task_id,
                state=state,
                slave_id=task.slave_id,
                reason=Reason.RECONCILIATION,
                source=Source.MASTER,
                message=task.status.message if task.status else "",
                healthy=task.status.healthy if task.status else None,  # (as Mesos's latest)
            )
        if task_id in fw.completed:
            return fw.completed[task_id].model_copy(
                update={"uuid": None, "reason": Reason.RECONCILIATION, "source": Source.MASTER}
            )
        if (fw.framework_id, task_id) in self.books.ending:
            return None  # it ended on its slave; the update saying how is on its way
        if slave_id in self.books.recovering:  # as Mesos: no answer until it is back, or
            self.waits.keep(slave_id, fw.framework_id, fw.principal, task_id)  # removed: then
            return None
        if slave_id is None and self.books.recovering:
            return None  # (no slave named: asked again by the framework, as Mesos)
        state, message = unknown_task(
            slave_id,
            registered=slave_id in self.books.slaves,
            unreachable=slave_id in self.books.removed_slaves,
            gone=slave_id in self.books.gone_slaves,
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

    def kept_answers(self, slave_id: str) -> Iterator[tuple[str, Work]]:
        """The slave re-registered, or was removed: the asks kept about its tasks while it
        was recovering, answered as an ask now would be, in pieces of ANSWERS_A_TURN each
        with the principal whose queue it is to wait in. A tenant may have kept 250,000:
        answered in one go they held the master's loop for seconds (attack 83)."""
        for framework_id, task_ids in self.waits.take(slave_id).items():
            fw = self.books.frameworks.get(framework_id)
            if fw is None:
                continue
            ordered = sorted(task_ids)
            for i in range(0, len(ordered), ANSWERS_A_TURN):
                asks = ordered[i : i + ANSWERS_A_TURN]
                yield fw.principal, partial(self._answer_kept, framework_id, slave_id, asks)

    async def _answer_kept(self, framework_id: str, slave_id: str, task_ids: list[str]) -> None:
        fw = self.books.frameworks.get(framework_id)
        if fw is None:
            return  # (gone meanwhile: answered to nobody)
        for task_id in task_ids:
            status = self._reconciled(fw, task_id, slave_id)
            if status is not None:
                self.outbox.send_framework(fw, Update(status=status))

    async def on_message(self, msg: Message, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Message")
        if fw is None:
            return
        if msg.slave_id not in self.books.slaves:
            self.outbox.refuse(
                caller,
                f"unknown slave {msg.slave_id}",
                "unknown-slave",
                "Message",
                framework_id=fw.framework_id,
            )
            return
        if (msg.slave_id, msg.executor_id) not in fw.executors:
            # its slave would drop it (as a Mesos agent drops a message for an executor it
            # does not run): refused here, so that nobody's megabytes fill the topic of a
            # slave where they have nothing, ahead of other tenants' launches and kills
            self.outbox.refuse(
                caller,
                f"framework {fw.framework_id} has no executor {msg.executor_id} on slave "
                f"{msg.slave_id}",
                "unknown-executor",
                "Message",
                framework_id=fw.framework_id,
            )
            return
        self.outbox.send_slave(
            msg.slave_id,
            FrameworkMessage(
                framework_id=fw.framework_id,
                slave_id=msg.slave_id,
                executor_id=msg.executor_id,
                data=msg.data,
            ),
        )

    async def on_teardown(self, msg: Teardown, caller: Caller) -> None:
        books = self.books
        if (
            caller.kind == "operator"
            and msg.framework_id not in books.frameworks
            and books.orphans.of(msg.framework_id)
        ):  # known only by its tasks slaves brought back: as Mesos's recovered frameworks
            why = f"torn down by an operator ({caller.principal})"
            self.removals.remove_orphans(msg.framework_id, why)
            return
        fw = self._framework(msg.framework_id, caller, "Teardown")
        if fw is not None:
            who = "by an operator" if caller.kind == "operator" else "by its scheduler"
            self.log.info(
                "framework.teardown",
                framework_id=fw.framework_id,
                owner=fw.principal,
                by=f"{caller.kind}:{caller.principal}",
            )
            self.removals.remove_framework(fw, f"torn down {who} ({caller.principal})")
