"""Preemption in the master: the shell around the offer cycle's check (`master.cycle`).

Every allocation interval the cycle checks the books (who holds what, who declared what,
which tasks run where) and holds the node each claim frees for the starving framework
(so nobody else snatches it). For each claim this tells the victims' schedulers
(`Preempting`, naming the tasks and a deadline), and at the deadline asks the slaves to
kill the tasks (SIGTERM, the slave's grace period, SIGKILL); they end TASK_KILLED with
REASON_TASK_PREEMPTED.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from master.allocation.fair_shares import fair_allocation
from master.allocation.preemption import Claim, Preemption
from master.allocation.quota import ancestors_or_self
from master.books import Books, Framework, Task
from master.cycle import Kill, OfferCycle
from master.outbox import Outbox
from protocol.transport.aio import loop_time, within
from protocol.wire.messages import (
    KillTask,
    PreemptedTask,
    Preempting,
    PreemptionView,
    Reason,
    RoleView,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources


class Preemptor:
    """The master's preemption duty and its counters. It runs the offer cycle's check and
    says what it decides through the outbox; the master's listeners tell it of tasks
    ended (`task_ended`)."""

    def __init__(
        self,
        books: Books,
        cycle: OfferCycle,
        outbox: Outbox,
        request_round: Callable[[], None],
        log: Any,
        *,
        policy: str,
        interval: float,
    ) -> None:
        """`policy`: the one fair shares are measured by; `interval`: seconds between
        preemption's checks (the allocation interval)."""
        self.books, self.cycle, self.outbox, self.log = books, cycle, outbox, log
        self.allocator = cycle.allocator
        self.request_round = request_round
        self.policy, self.interval = policy, interval
        self._next_preemption_check = 0.0
        self._fair_job: asyncio.Future[dict[str, tuple[float, dict[str, float]]]] | None = None

    @property
    def preemption(self) -> Preemption:
        """The policy's memory (fair shares, timers, victims, counts): the cycle's."""
        return self.cycle.preemption

    @property
    def preemption_on(self) -> bool:
        return self.cycle.preempting

    def preemption_tick(self, now: float) -> None:
        """Fair shares every allocation interval (every second at most often when
        preemption is off: the UI and the metrics show them); claims when it is on."""
        on = self.preemption_on
        if on:
            self._kill(self.cycle.kills_due(now))
        if now < self._next_preemption_check:
            return
        interval = self.interval
        self._next_preemption_check = now + (interval if on else max(1.0, interval))
        if not on:
            self._update_fair_off_loop()
            return
        plan = self.cycle.check(now)  # (each claim's room held already)
        for claim in plan.claims:
            self._warn(claim, now)
        self.outbox.state_changed()

    def _update_fair_off_loop(self) -> None:
        """Fair shares for the UI and the metrics, computed in a worker thread on a copy of
        the books: under the tree policies the ideal costs tens of milliseconds, which on
        the loop stalled every call and update once a second. (With preemption on, claims
        need them at once, and they stay on the loop.)"""
        if self._fair_job is not None and not self._fair_job.done():
            return  # the last one is still at it: skip this tick
        policy, total = self.policy, dict(self.allocator.offerable_total().millis)
        contenders, weights, fifo = (
            self.cycle.contenders(loop_time()),
            self.allocator.roles.pool_weights(),
            self.allocator.roles.fifo_pools(),
        )
        job = asyncio.get_running_loop().run_in_executor(
            None, fair_allocation, policy, total, contenders, weights, fifo
        )
        job.add_done_callback(self._fair_done)
        self._fair_job = job

    def _fair_done(self, job: asyncio.Future[dict[str, tuple[float, dict[str, float]]]]) -> None:
        if job.cancelled():
            return
        if (error := job.exception()) is not None:
            self.log.error("fair_shares.failed", error=repr(error))
            return
        self.preemption.set_fair(job.result())
        self.outbox.state_changed()

    async def stop_fair_shares(self) -> None:
        """Let a computation under way finish (it cannot be interrupted; it is short)."""
        if self._fair_job is not None:
            with contextlib.suppress(Exception):
                await within(asyncio.shield(self._fair_job), 5.0)
            self._fair_job = None

    def _warn(self, claim: Claim, now: float) -> None:
        """Tell each victim's scheduler which of its tasks go, and when (then the kills
        come at once if there is no notice)."""
        notice = self.preemption.config.notice
        by_victim: dict[str, list[PreemptedTask]] = defaultdict(list)
        for plan in claim.plans:
            for v in plan.victims:
                by_victim[v.framework_id].append(
                    PreemptedTask(task_id=v.task_id, slave_id=v.slave_id)
                )
        for victim, tasks in by_victim.items():
            fw = self.books.frameworks[victim]
            message = (
                f"{len(tasks)} task(s) will be killed in {notice:g}s: "
                f"{self._claim_told(claim, fw.principal)}"
            )
            if fw.connected:
                self.outbox.send_framework(
                    fw,
                    Preempting(
                        framework_id=victim, tasks=tasks, deadline_seconds=notice, message=message
                    ),
                )
            for t in tasks:
                self.outbox.emit(
                    "preempting",
                    framework_id=victim,
                    slave_id=t.slave_id,
                    task_id=t.task_id,
                    detail=f"for {claim.claimant} ({claim.why}); kill in {notice:g}s",
                )
        self.log.info(
            "preemption.planned",
            claimant=claim.claimant,
            why=claim.why,
            victims={v: len(t) for v, t in by_victim.items()},
            slaves=sorted({p.slave_id for p in claim.plans}),
            fair_share=round(self.preemption.fair.get(claim.claimant, 0.0), 4),
        )
        if notice <= 0:
            self._kill(self.cycle.kills_due(now))
        self.request_round()

    def _claim_told(self, claim: Claim, principal: str) -> str:
        """Why, as `principal`'s frameworks are told it: a claimant of its own is named,
        another tenant's is not, nor its role (the master tells no tenant which of the
        others' frameworks exist, as `why` counts them instead of naming them): the victim
        learns what its tasks go for, not whom."""
        claimant = self.books.frameworks.get(claim.claimant)
        if claimant is not None and claimant.principal == principal:
            return f"your framework {claim.claimant} is below its {claim.why}"
        if claim.guarantee:  # (a fair share's claim names a role too: a multi-role one's)
            return "another tenant's framework is below its role's guarantee"
        return "another tenant's framework is below its fair share"

    def _kill(self, kills: list[Kill]) -> None:
        for kill in kills:
            fw = self.books.frameworks[kill.framework_id]
            task = fw.tasks[kill.task_id]
            task.state = TaskState.KILLING
            self.outbox.task_changed(task)
            self.outbox.send_slave(  # (with the task's own kill policy: its grace, as any kill)
                kill.slave_id,
                KillTask(
                    framework_id=kill.framework_id,
                    task_id=kill.task_id,
                    reason=Reason.TASK_PREEMPTED,
                    killing=fw.task_killing,
                ),
            )

    # -- listening to the master ---------------------------------------------------------------
    def task_ended(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        """Count a victim's end: its running time is work thrown away (unless it finished)."""
        now = loop_time()
        ran, finished = now - task.launched_at, status.state == TaskState.FINISHED
        on = (task.slave_id, task.info.resources)
        if self.cycle.task_ended(
            fw.framework_id, task.task_id, finished=finished, ran=ran, now=now, on=on
        ):
            self.outbox.emit(
                "preempted",
                framework_id=fw.framework_id,
                slave_id=task.slave_id,
                task_id=task.task_id,
                resources=task.resources,
                detail=f"ran {ran:.1f}s",
            )

    def preemption_view(self) -> PreemptionView | None:
        if not self.preemption_on:
            return None
        s = self.preemption.stats
        return PreemptionView(
            tasks_preempted=s.tasks_preempted,
            work_lost_seconds=round(s.work_lost_seconds, 3),
            in_flight=len(self.preemption.doomed),
            rounds=s.rounds,
        )

    def with_fair_shares(self, views: list[RoleView]) -> list[RoleView]:
        """Each role's fair share: the dominant share of what the ideal gives its subtree."""
        tree = self.allocator.roles.is_tree()
        by_role: dict[str, dict[str, float]] = {}  # each framework's part, up its path once
        for fid, resources in self.preemption.fair_resources.items():
            fw = self.books.frameworks.get(fid)
            if fw is None:
                continue
            for role in ancestors_or_self(fw.role, tree):
                held = by_role.setdefault(role, {})
                for n, v in resources.items():
                    held[n] = held.get(n, 0.0) + v
        total = self.allocator.total
        for view in views:
            view.fair_share = Resources(by_role.get(view.role, {})).dominant_share(total)
        return views

    def starving(self, now: float) -> dict[str, float]:
        return {
            f: now - since
            for f, since in self.preemption.starving_since.items()
            if not f.startswith("role:")
        }
