"""Preemption in the master: the shell around `master.allocation.preemption`.

Every allocation interval it hands the policy the books (who holds what, who declared
what, which tasks run where). For each claim it tells the victims' schedulers first
(`Preempting`, naming the tasks and a deadline), holds the freed node for the starving
framework (so nobody else snatches it), and at the deadline asks the slaves to kill the
tasks (SIGTERM, the slave's grace period, SIGKILL); they end TASK_KILLED with
REASON_TASK_PREEMPTED.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator
from master.allocation.glue import contender, hold_claim, hold_until, planning_cluster
from master.allocation.planning import Cluster, RunningTask
from master.allocation.preemption import (
    Claim,
    Contender,
    Preemption,
    PreemptionConfig,
    fair_allocation,
)
from master.allocation.quota import ancestors_or_self
from master.books import Books, Framework, Task
from master.shell import MasterConfig
from protocol.transport.aio import within
from protocol.wire.messages import (
    KillTask,
    PreemptedTask,
    Preempting,
    PreemptionView,
    Reason,
    RoleView,
    TaskState,
    TaskStatus,
    Wire,
)
from protocol.wire.resources import Resources


class Preemptor:
    """The master's preemption duty and its counters. It reads the books and the
    allocator, holds freed nodes in the allocator, and says what it does through the
    shell's senders; the shell tells it of tasks ended and frameworks gone."""

    def __init__(
        self,
        config: MasterConfig,
        books: Books,
        allocator: Allocator,
        log: Any,
        *,
        now: Callable[[], float],
        send_framework: Callable[[Framework, Wire], None],
        send_slave: Callable[[str, Wire], None],
        event: Callable[..., None],
        request_round: Callable[[], None],
        changed: Callable[[], None],
        task_changed: Callable[[Task], None],
    ) -> None:
        """`event`: the shell's event stream; `changed`: the published state is stale;
        `task_changed`: a task's state changed where no event says so (KILLING)."""
        self.config, self.books, self.allocator, self.log = config, books, allocator, log
        self._now, self._event, self.request_round = now, event, request_round
        self._send_framework, self._send_slave, self._changed = send_framework, send_slave, changed
        self._task_changed = task_changed
        c = self.config
        self.preemption = Preemption(
            PreemptionConfig(
                timeout=c.preemption_timeout,
                threshold=c.preemption_threshold,
                notice=c.preemption_notice,
                victims=c.preemption_victims,
                guarantee_timeout=c.guarantee_timeout,
            )
        )
        self._next_preemption_check = 0.0
        self._fair_job: asyncio.Future[dict[str, tuple[float, dict[str, float]]]] | None = None

    @property
    def preemption_on(self) -> bool:
        return self.preemption.config.on

    def preemption_tick(self, now: float) -> None:
        """Fair shares every allocation interval (every second at most often when
        preemption is off: the UI and the metrics show them); claims when it is on."""
        on = self.preemption_on
        if on:
            self._kill_due(now)
        if now < self._next_preemption_check:
            return
        interval = self.config.allocation_interval
        self._next_preemption_check = now + (interval if on else max(1.0, interval))
        if not on:
            self._update_fair_off_loop()
            return
        claims = self.preemption.check(
            now,
            self.config.policy,
            self._contenders(),
            self._cluster(),
            self.allocator.pool_weights(),
            self.allocator.quotas,
            self.allocator.is_tree(),
        )
        for claim in claims:
            self._carry_out(claim, now)
        self._changed()

    def _update_fair_off_loop(self) -> None:
        """Fair shares for the UI and the metrics, computed in a worker thread on a copy of
        the books: under the tree policies the ideal costs tens of milliseconds, which on
        the loop stalled every call and update once a second. (With preemption on, claims
        need them at once, and they stay on the loop.)"""
        if self._fair_job is not None and not self._fair_job.done():
            return  # the last one is still at it: skip this tick
        policy, total = self.config.policy, dict(self.allocator.total.millis)
        contenders, weights = self._contenders(), self.allocator.pool_weights()
        job = asyncio.get_running_loop().run_in_executor(
            None, fair_allocation, policy, total, contenders, weights
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
        self._changed()

    async def stop_fair_shares(self) -> None:
        """Let a computation under way finish (it cannot be interrupted; it is short)."""
        if self._fair_job is not None:
            with contextlib.suppress(Exception):
                await within(asyncio.shield(self._fair_job), 5.0)
            self._fair_job = None

    def _contenders(self) -> list[Contender]:
        return [
            contender(
                self.allocator,
                fw.framework_id,
                fw.role,
                wants=fw.connected and not fw.suppressed,
                demand=None
                if fw.demand is None
                else [(dict(r.resources.millis), r.count) for r in fw.demand],
                shape=dict(fw.last_shape.millis) if fw.last_shape else None,
            )
            for fw in self.books.frameworks.values()
        ]

    def _cluster(self) -> Cluster:
        """The books as planning sees them: what is free (less every hold), who holds what
        -- less its tasks already doomed, whose loss is decided: else the next check, before
        they end, would take a victim below its fair share again --, and the tasks that may
        still be chosen (none already doomed)."""
        tasks = [
            RunningTask(
                fw.framework_id,
                task.task_id,
                task.slave_id,
                dict(task.resources.millis),
                task.launched_at,
            )
            for fw in self.books.frameworks.values()
            for task in fw.tasks.values()
            if not task.terminal
        ]
        return planning_cluster(
            self.allocator, self.books.frameworks, tasks, self.preemption.doomed
        )

    def _carry_out(self, claim: Claim, now: float) -> None:
        notice = self.preemption.config.notice
        hold_claim(self.allocator, claim, hold_until(now, notice, self.config.allocation_interval))
        by_victim: dict[str, list[PreemptedTask]] = defaultdict(list)
        for plan in claim.plans:
            for v in plan.victims:
                by_victim[v.framework_id].append(
                    PreemptedTask(task_id=v.task_id, slave_id=v.slave_id)
                )
        for victim, tasks in by_victim.items():
            fw = self.books.frameworks[victim]
            message = (
                f"{len(tasks)} task(s) will be killed in {notice:g}s: framework "
                f"{claim.claimant} is below its {claim.why}"
            )
            if fw.connected:
                self._send_framework(
                    fw,
                    Preempting(
                        framework_id=victim, tasks=tasks, deadline_seconds=notice, message=message
                    ),
                )
            for t in tasks:
                self._event(
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
            self._kill_due(now)
        self.request_round()

    def _kill_due(self, now: float) -> None:
        for framework_id, task_id, doomed in self.preemption.due(now):
            fw = self.books.frameworks.get(framework_id)
            task = fw.tasks.get(task_id) if fw else None
            if fw is None or task is None:
                self.preemption.doomed.pop((framework_id, task_id), None)
                continue
            task.state = TaskState.KILLING
            self._task_changed(task)
            self._send_slave(
                doomed.slave_id,
                KillTask(framework_id=framework_id, task_id=task_id, reason=Reason.TASK_PREEMPTED),
            )

    # -- listening to the shell ---------------------------------------------------------------
    def task_ended(self, fw: Framework, task: Task, status: TaskStatus) -> None:
        """Count a victim's end: its running time is work thrown away (unless it finished)."""
        if not self.preemption.doomed:
            return
        ran = self._now() - task.launched_at
        finished = status.state == TaskState.FINISHED
        if self.preemption.ended(fw.framework_id, task.task_id, finished=finished, ran=ran):
            self._event(
                "preempted",
                framework_id=fw.framework_id,
                slave_id=task.slave_id,
                task_id=task.task_id,
                resources=task.resources,
                detail=f"ran {ran:.1f}s",
            )

    def framework_gone(self, framework_id: str) -> None:
        self.preemption.forget(framework_id)

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
        tree = self.allocator.is_tree()
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
