"""What the master does with a framework's Accept: its offers checked as its own, its
operations applied, its tasks and task groups checked and launched (all of a group or
none), what it left declined; and, should that fail half way, what it took given back
(master.calls.accept_progress). FrameworkCalls hands its Accepts here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller
from master.books import Books, Framework, OfferRecord, Task
from master.calls.accept_progress import AcceptProgress
from master.calls.framework_calls import framework_of_caller, from_its_scheduler
from master.calls.resource_operations import OperationError, ResourceOperations
from master.cycle import OfferCycle
from master.framework_ids import FrameworkIds
from master.offers import OfferBook
from master.outbox import Outbox
from master.slave_values import in_use
from master.task_states import as_seen
from master.updates import TaskUpdates
from protocol import logs
from protocol.transport.aio import loop_time
from protocol.wire.discrete import Discrete
from protocol.wire.ids import shorten, task_problem
from protocol.wire.launches import OfferRoom, combined, group_shape_problem, uses_shared
from protocol.wire.messages import (
    Accept,
    Decline,
    GroupLaunch,
    Reason,
    RunTasks,
    Source,
    TaskGroup,
    TaskInfo,
    TaskState,
    TaskStatus,
    Update,
    new_id,
)
from protocol.wire.reservations import DESTROY, NON_SPECULATIVE, is_shared
from protocol.wire.resources import Resources
from protocol.wire.topics import check_segment

SHOWN_PROBLEMS = 2  # an Accept's problems named in its refusal; the rest are counted


class Accepts:
    """A subscribed framework's Accepts, against the books, the offer cycle and the offers
    outstanding; `decline`: how FrameworkCalls declines offers (a refused Accept's go back
    as a Decline of them would)."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        cycle: OfferCycle,
        offers: OfferBook,
        outbox: Outbox,
        updates: TaskUpdates,
        *,
        ids: FrameworkIds,
        operations: ResourceOperations,
        decline: Callable[[Framework, Decline, Caller], None],
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        self.books, self.allocator, self.cycle, self.offers = books, allocator, cycle, offers
        self.outbox, self.updates, self.ids, self.operations = outbox, updates, ids, operations
        self._decline, self.request_round, self.log = decline, request_round, log

    def _framework(self, framework_id: str, caller: Caller, about: str) -> Framework | None:
        return framework_of_caller(self.books, self.outbox, framework_id, caller, about)

    async def on_accept(self, msg: Accept, caller: Caller) -> None:
        fw = self._framework(msg.framework_id, caller, "Accept")
        if fw is None:
            return
        now = loop_time()
        records, problems = self.offers.own(fw, msg.offer_ids)
        self.cycle.answered(fw.framework_id)
        every_task = msg.all_tasks()  # (its groups' too)
        if not records and fw.accepted_before(msg.offer_ids, {t.task_id for t in every_task}):
            # MQTT delivers at least once: an Accept carried out before arrives again (a
            # broker restart before its PUBACK), known by its offers and tasks.
            # Refused, its running tasks would be reported TASK_LOST; its first delivery
            # answered it already.
            self.log.info("accept.again", framework_id=fw.framework_id)
            return
        slave_ids = {r.slave_id for r in records}
        if len(slave_ids) > 1:
            problems.append(f"offers span several slaves ({', '.join(sorted(slave_ids))})")
        roles = {r.role or fw.role for r in records}  # (a multi-role framework's offers)
        if len(roles) > 1:
            problems.append(f"offers of several roles ({', '.join(sorted(roles))})")
        if problems:
            # the valid ones go back as a Decline of them would (its filter, at least one
            # interval): else an Accept naming one bad offer beside a good one would have
            # the good one offered straight back, past what a Decline of 0 is kept
            refuse = msg.filters.refuse_seconds
            for record in records:
                self.offers.drop(record)
                fid, sid = fw.framework_id, record.slave_id
                self.cycle.decline(fid, sid, record.resources, refuse, now, record.role, whole=True)
            reason = _said(problems)
            # As Mesos: the task was fine and the offer was not, so TASK_DROPPED (TASK_LOST
            # to frameworks not partition-aware): launch it again. Not an Error: in Mesos
            # that means the framework is removed.
            for task in every_task:
                if fw.live(task.task_id):
                    # a live task has the id (an Accept delivered again with offers of
                    # another's too): a LOST would be a lie that invites a second launch
                    continue
                why = f"Task launched with invalid offers: {reason}"
                self.refuse_launch(fw, task, TaskState.DROPPED, Reason.INVALID_OFFERS, why)
            self.outbox.refuse(
                caller,
                f"accept refused: {reason}",
                "invalid-offers",
                "Accept",
                tell=False,
                framework_id=fw.framework_id,
                tasks=len(every_task),
            )
            self.request_round()
            return

        slave_id, role = records[0].slave_id, records[0].role  # (role: None for one role)
        values = Discrete.union(r.discrete for r in records)  # (its ports, ...)
        # (a shared volume two of its offers hold: one volume, and a copy goes back)
        offered, surplus = combined([r.resources for r in records])
        room = OfferRoom(
            slave_id,
            offered,
            {eid: fw.executors[(slave_id, eid)] for eid in fw.executors_on.get(slave_id, ())},
            values,
            in_use(self.books, self.books.slaves[slave_id]) if values else values,
        )
        progress = AcceptProgress(room)
        try:
            self._carry_out(fw, msg, caller, records, surplus, progress, now)
        except Exception as error:  # (a bug of ours: the call was checked before)
            self._accept_failed(fw, msg, caller, slave_id, role, progress, error, now)

    def _carry_out(
        self,
        fw: Framework,
        msg: Accept,
        caller: Caller,
        records: list[OfferRecord],
        surplus: Resources,
        progress: AcceptProgress,
        now: float,
    ) -> None:
        """An Accept whose offers are its own, of one slave and one role: its operations
        applied, its tasks and groups checked and launched, what it left declined; each
        step told to `progress`, which `_accept_failed` reads should one raise."""
        slave_id, role = records[0].slave_id, records[0].role
        room, every_task = progress.room, msg.all_tasks()
        task_ids = tuple(t.task_id for t in every_task)
        for record in records:
            self.offers.drop(record)
            fw.used(record.offer_id, task_ids)
        self.cycle.decline(fw.framework_id, slave_id, surplus, None, now, role)
        resized = Resources()  # what non-speculative operations made: offered again later
        operated = False  # (any operation carried out: an Accept of nothing declines)
        for operation in msg.operations:  # (before the tasks: they may use what it made)
            if (
                operation.type == DESTROY
                and room.left.contains(operation.resources)
                and self.operations.may_make(fw, operation, role or fw.role)
            ):  # (one it may not make, of a volume its offers do not hold, takes nobody's)
                self.operations.rescind_shared(slave_id, operation.resources)
            try:
                used, made = self.operations.on_offer(
                    fw, slave_id, operation, room.left, role or fw.role
                )
            except OperationError as e:  # dropped, as Mesos drops an invalid operation,
                # and its sender told why (the Mesos API's stream leaves it out: an ERROR
                # event ends a Mesos scheduler, and Mesos drops such an operation unsaid)
                self.outbox.refuse(
                    caller, f"{operation.type} refused: {e}", "invalid-operation", "Accept",
                    framework_id=fw.framework_id,
                )  # fmt: skip
                continue
            operated = True
            if operation.type in NON_SPECULATIVE:  # (what it made: offered again later)
                room.operated(used, Resources())
                resized = resized + made
            else:
                room.operated(used, made)
        refused: list[str] = []
        seen: set[str] = set()
        launched: list[TaskInfo] = []
        maps: list[dict[str, Any] | None] = []  # each as the Accept carried it (see RunTasks)
        for task, task_map in zip(msg.tasks, msg.task_maps(), strict=True):
            problem = self._task_problem(fw, task, room, seen, role or fw.role)
            seen.add(task.task_id)
            if problem:
                refused.append(problem)
                self.refuse_launch(fw, task, TaskState.ERROR, Reason.TASK_INVALID, problem)
                progress.refused(task.task_id)
                continue
            if role is not None and task.role is None:  # allocated to its offer's role
                task = task.model_copy(update={"role": role})
                task_map = None if task_map is None else {**task_map, "role": role}
            executor = room.take(task)
            new_executor = None if executor is None else (slave_id, executor.executor_id)
            progress.took([task], new_executor, executor.resources if executor else None)
            if executor is not None:  # its own resources stay the framework's until it exits
                fw.keeps_executor((slave_id, executor.executor_id), executor.resources, role)
            self._launch(fw, task, slave_id, now)
            launched.append(task)
            maps.append(task_map)
        groups: list[tuple[TaskGroup, list[TaskInfo], bool]] = []  # (group, tasks, starts)
        for group in msg.groups:  # each all or none (Mesos's LAUNCH_GROUP), on a trial room
            tried = room.trial()
            problem = self._group_problem(fw, group, tried, seen, role or fw.role)
            seen.update(t.task_id for t in group.tasks)
            if problem:  # every task of it TASK_ERROR, as Mesos's TASK_GROUP_INVALID
                refused.append(problem)
                for task in group.tasks:
                    self.refuse_launch(
                        fw, task, TaskState.ERROR, Reason.TASK_GROUP_INVALID, problem
                    )
                    progress.refused(task.task_id)
                continue
            key = (slave_id, group.executor_id)
            new = group.executor_id not in room.running  # (its room taken in `tried`)
            room = progress.room = tried  # (its room taken: its executor's, if new, each task's)
            progress.took(group.tasks, key if new else None, group.executor_resources)
            starts = fw.keeps_executor(key, group.executor_resources, role)
            fw.group_executors.add(key)
            tasks = [
                t.model_copy(update={"role": role}) if role is not None and t.role is None else t
                for t in group.tasks
            ]
            for task in tasks:
                self._launch(fw, task, slave_id, now)
            groups.append((group, tasks, starts))
        if room.copies:  # tasks sharing a volume: a copy each, past the offer's
            extra = Resources.from_millis(room.copies)
            try:
                self.allocator.add_copies(fw.framework_id, slave_id, extra, role)
            except AllocatorError as e:  # (OfferRoom counts copies whole: logged, not fatal)
                self.log.error("accept.copies_refused", framework_id=fw.framework_id, error=str(e))
        every_launched = [*launched, *(t for _, tasks, _ in groups for t in tasks)]
        if every_launched:
            used = Resources()
            for t in every_launched:
                used = used + t.resources
            self.cycle.launched(fw.framework_id, slave_id, used)
        for group, tasks, starts in groups:  # one message a group: run all or none
            runs = GroupLaunch(
                executor_id=group.executor_id, resources=group.executor_resources, starts=starts
            )
            self.outbox.send_slave(slave_id, self._run_tasks(fw, slave_id, tasks, runs))
            progress.sent(tasks)
        if launched:  # one message to the slave for all of them
            self.outbox.send_slave(
                slave_id, self._run_tasks(fw, slave_id, launched).with_wire_tasks(maps)
            )
            progress.sent(launched)
            if fw.executor_checks:  # (sent behind any CheckExecutors of their executors:
                # an answer is of before them, which run it again or say it did not start)
                for task in launched:
                    if task.executor is not None:
                        fw.executor_checks.pop((slave_id, task.executor.executor_id), None)
        # the event stream hears of it after the slave is told (the task waits for that)
        for record in records:
            self.outbox.emit(
                "accept",
                framework_id=fw.framework_id,
                slave_id=record.slave_id,
                offer_id=record.offer_id,
                resources=record.resources,
            )
        for task in every_launched:
            self.outbox.emit(
                "launch",
                framework_id=fw.framework_id,
                slave_id=slave_id,
                task_id=task.task_id,
                resources=task.resources,
            )
        refuse = msg.filters.refuse_seconds  # (what it did not use: declined)
        # (nothing launched nor made of its offers: a Decline, as Mesos reads it, filtered
        # as one: else an Accept of nothing with refuse 0 gets the room straight back)
        whole = not launched and not groups and not operated
        left = self.cycle.decline(
            fw.framework_id, slave_id, room.left, refuse, now, role, whole=whole
        )
        progress.declined = True
        # what a GROW_VOLUME or SHRINK_VOLUME made goes back unfiltered (the framework's
        # refuse_seconds are for what it left of its offers): offered to it again
        if self.cycle.decline(fw.framework_id, slave_id, resized, None, now, role) or left:
            self.request_round()
        if refused:  # each heard TASK_ERROR already: that is the answer
            self.outbox.refuse(
                caller,
                f"{len(refused)} of {len(msg.tasks)} tasks and {len(msg.groups)} groups "
                "refused: " + "; ".join(refused),
                "invalid-tasks",
                "Accept",
                tell=False,
                framework_id=fw.framework_id,
            )

    def _accept_failed(
        self,
        fw: Framework,
        msg: Accept,
        caller: Caller,
        slave_id: str,
        role: str | None,
        progress: AcceptProgress,
        error: Exception,
        now: float,
    ) -> None:
        """`_carry_out` raised: everything of the Accept that did not reach the slave is
        given back (master.calls.accept_progress), its sender told, the error logged."""
        self.log.error(
            "accept.failed",
            framework_id=fw.framework_id,
            slave_id=slave_id,
            error=logs.clip(repr(error), 300),
        )
        why = "the master failed to launch it (its error is in the master's log)"
        # a task taken out of the offers is in the books or not: `_task_problem` let no
        # id of a live task by, so a live one of its id is this one
        booked = {tid for tid in progress.taken if fw.live(tid)}
        held = {
            key
            for task in msg.all_tasks()
            if fw.live(task.task_id)
            for key in task.resources.millis
            if is_shared(key)
        }
        back = progress.give_back(booked, held)  # (their room: with the offers' rest)
        for task_id, task in progress.taken.items():
            if task_id in booked:  # their end frees them, as any task's
                self.updates.from_master(
                    fw, task_id, slave_id, TaskState.ERROR, Reason.TASK_INVALID, why
                )
            else:
                self.refuse_launch(fw, task, TaskState.ERROR, Reason.TASK_INVALID, why)
        for key, room in progress.unsent_executors().items():  # nothing runs there
            executor, executor_role = fw.forget_executor(key)
            if executor is not None:
                self.allocator.recover(fw.framework_id, slave_id, executor, role=executor_role)
            else:  # (its room taken, itself not booked)
                back = back + room
        for task in msg.all_tasks():  # never reached (a live task of its id is another's)
            tid = task.task_id
            if tid not in progress.told and tid not in progress.taken and not fw.live(tid):
                self.refuse_launch(fw, task, TaskState.ERROR, Reason.TASK_INVALID, why)
        if not progress.declined:  # (with no filter: it is offered again, as it was)
            back = progress.room.left + back
        if back:
            self.cycle.decline(fw.framework_id, slave_id, back, None, now, role)
        self.request_round()
        self.outbox.refuse(
            caller,
            "the master failed to carry out this Accept: what it did not launch was given "
            "back, and each such task answered TASK_ERROR",
            "internal-error",
            "Accept",
            framework_id=fw.framework_id,
        )

    def _run_tasks(
        self,
        fw: Framework,
        slave_id: str,
        tasks: list[TaskInfo],
        group: GroupLaunch | None = None,
    ) -> RunTasks:
        """What tells the slave to run `tasks` (a task group's, with `group`)."""
        return RunTasks(
            framework_id=fw.framework_id,
            framework_name=fw.name,
            tasks=tasks,
            launch_id=new_id(),
            # whose tasks they are (the slave runs them as that principal's and reports
            # it back): nobody's is proven on an insecure cluster
            principal=fw.principal if self.ids.signed else "",
            killing=fw.task_killing,
            proofs=[self.ids.task_proof(fw.framework_id, t.task_id, slave_id) for t in tasks]
            if self.ids.signed
            else [],
            group=group,
        )

    def _group_problem(
        self, fw: Framework, group: TaskGroup, room: OfferRoom, seen: set[str], role: str
    ) -> str | None:
        """Why `group` may not launch, all of it, from offers of `role` (None: it may,
        and `room` holds it taken: a trial room, dropped if it may not)."""
        problem = group_shape_problem(group)
        if problem is not None:
            return problem
        eid = group.executor_id
        key = (room.slave_id, eid)
        if key in fw.executors and key not in fw.group_executors:
            return f"executor {eid} is a custom executor: a task group runs under its own"
        try:  # (it names a topic's handler on the slave)
            check_segment(eid, "executor_id")
        except ValueError as e:
            return str(e)
        problem = room.executor_problem(eid, group.executor_resources)
        if problem is not None:
            return problem
        room.take_executor(eid, group.executor_resources)
        for task in group.tasks:
            problem = self._task_problem(fw, task, room, seen, role)
            if problem is not None:
                return problem
            room.take(task)
        return None

    async def refused_accept(self, msg: Accept, caller: Caller, why: str) -> None:
        """An Accept refused unhandled (its principal past its rate limit's capacity): as
        if declined, its offers back to the pool, and its tasks reported TASK_DROPPED
        (TASK_LOST to frameworks not partition-aware, REASON_RATE_LIMITED: launch them
        again). Nothing is said to `caller` here: the refusal is the intake's."""
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is None or fw.principal != caller.principal:
            return
        if not from_its_scheduler(self.outbox, fw, caller):
            return  # (a deposed scheduler's: its offers were taken back as it was)
        decline = Decline(
            framework_id=fw.framework_id, offer_ids=msg.offer_ids, filters=msg.filters
        )
        self._decline(fw, decline, Caller(caller.kind, caller.principal, None))
        for task in msg.all_tasks():  # (a live task of the same id runs on: no lie of it)
            if not fw.live(task.task_id):
                self.refuse_launch(fw, task, TaskState.DROPPED, Reason.RATE_LIMITED, why)

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
        if not fw.live(task.task_id) and task.slave_id not in self.books.recovering:
            # remembered, so that reconciling it answers how it ended: a framework whose
            # Reconcile crossed this answer (sent on reconnecting, its Accept in flight)
            # would hear TASK_GONE after it, two ends for one task (the chaos soak saw 4).
            # Not while its slave may still bring it back after a failover: an Accept
            # delivered again to the new leader may have launched it (review 63)
            fw.declare_ended(status)
        self.updates.forward(fw, Update(status=status), task.slave_id)
        # the event stream and the web UI's events say it too (an operator sees why a task
        # never ran, not only its framework)
        self.outbox.emit(
            "launch_refused",
            framework_id=fw.framework_id,
            slave_id=task.slave_id,
            task_id=task.task_id,
            detail=why,
        )

    def _task_problem(
        self, fw: Framework, task: TaskInfo, room: OfferRoom, seen: set[str], role: str
    ) -> str | None:
        """Why `task` may not launch from offers of `role` (None: it may)."""
        tid = task.task_id
        problem = task_problem(task)
        if problem is not None:
            return f"task {shorten(tid)}: {problem}"
        if task.role is not None and task.role != role:
            return f"task {tid}: its resources claim role {task.role}, its offer is {role}'s"
        if tid in seen or tid in fw.tasks:
            return f"task {tid}: the task id is already in use by a live task"
        if not fw.shared_resources and (key := uses_shared(task)) is not None:
            return f"task {tid}: {key} is a shared volume, for SHARED_RESOURCES frameworks only"
        named = (room.slave_id, task.executor.executor_id) if task.executor else None
        if named in fw.group_executors and named in fw.executors:
            return f"task {tid}: executor {named[1]} runs task groups, not tasks of its own"
        return room.problem(task)

    def _launch(self, fw: Framework, info: TaskInfo, slave_id: str, now: float) -> None:
        task = Task(info, fw.framework_id, slave_id, TaskState.STAGING, launched_at=now)
        fw.tasks[task.task_id] = task
        fw.slaves_used.add(slave_id)
        fw.launched(info.resources)
        self.books.slaves[slave_id].add_task(fw.framework_id, info)


def _said(problems: list[str]) -> str:
    """An Accept's problems, as its refusal says them: the first few and how many more
    (each of its tasks' TASK_DROPPED, kept as ended, and the operators' events carry it:
    a thousand bogus offer ids are not a thousand lines in each)."""
    said = "; ".join(problems[:SHOWN_PROBLEMS])
    more = len(problems) - SHOWN_PROBLEMS
    return f"{said}; and {more} more" if more > 0 else said
