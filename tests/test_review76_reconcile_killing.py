"""Review 76: reconciling a task that preemption is killing answers TASK_KILLING to a
framework that never declared TASK_KILLING_STATE.

Scenario. hog (no TASK_KILLING_STATE capability: any framework written before Mesos
1.0, and every pymesos scheduler that does not opt in) runs two tasks on s1. late
starves; preemption picks one of hog's tasks and the master sends the kill
(`Preemptor._kill` sets the master's own `task.state = TaskState.KILLING`). During the
task's kill grace hog reconciles, as frameworks do every few minutes and after every
reconnect.

What Mesos does. TASK_KILLING exists for frameworks with TASK_KILLING_STATE only: the
agent sends it to no other, and reconciliation (`Master::_reconcileTasks`) answers the
task's latest state as its updates made it, TASK_RUNNING here, since no update said
KILLING. drfmesos's own status path knows this: `status_updates.heard_state` reads
"not the master's own KILLING, which it marks when it sends a kill (a preemption's)
and which no update told anyone".

What drfmesos does. `FrameworkCalls._reconciled` answers `task.state`, the master's
private mark: hog hears TASK_KILLING, a state it did not ask for and may not handle (a
`switch` over the states it knows, or a state machine that takes an unknown non-terminal
state for an error and kills or relaunches the task). Implicit reconciliation answers
the same for every victim in its grace.
"""

from __future__ import annotations

import contextlib

from test_preemption_maintenance import PREEMPTING, fill, preempted, starving

from protocol.wire.messages import Reason, Reconcile, ReconcileTask, TaskState, Update

from harness.helpers import eventually
from harness.master import Cluster


async def test_reconciling_a_preempted_task_in_its_grace_is_not_task_killing() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(PREEMPTING)
        hog = await c.framework("hog")  # without TASK_KILLING_STATE
        s1 = await fill(c, hog, "s1", "t")
        await starving(c)
        await eventually(lambda: bool(preempted(s1)), timeout=10)
        victim = preempted(s1)[0].task_id  # (the fake slave leaves it running: its grace)
        ask = Reconcile(framework_id=hog.framework_id, tasks=[ReconcileTask(task_id=victim)])
        await hog.bus.publish(hog.to_master, ask)

        def answers() -> list[TaskState]:
            return [
                u.status.state
                for u in hog.inbox.of(Update)
                if u.status.task_id == victim and u.status.reason == Reason.RECONCILIATION
            ]

        await hog.inbox.wait_until(lambda: bool(answers()))
        assert answers() == [TaskState.RUNNING]  # what its updates told it
