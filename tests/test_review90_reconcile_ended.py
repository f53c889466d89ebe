"""Review 90: reconciling a task that ended, its end acknowledged, answers how it ended.

Mesos's master forgets a task once its terminal update is acknowledged (it moves to
`completedTasks`, which `Master::reconcile` does not read), and answers an explicit
reconciliation of it as of a task it never knew: TASK_GONE on a registered agent
(TASK_LOST to a framework not partition-aware). drfmesos keeps each framework's last
1,000 ends and answers the end itself: a deliberate difference, in
docs/explanation/mesos-differences.md ("A launch refused is remembered").
"""

from __future__ import annotations

from protocol.wire.messages import Reason, Reconcile, ReconcileTask, TaskState, Update
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


async def test_reconciling_a_finished_task_answers_finished(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", Resources(cpus=2, mem=2 * GB))
    offer = await a.next_offer()
    await a.accept(offer, [a.task(offer, Resources(cpus=1), task_id="t1")])
    await s1.run_task()
    await a.acknowledge(await a.update_for("t1", TaskState.RUNNING))
    await s1.report(a.framework_id, "t1", TaskState.FINISHED)
    await a.acknowledge(await a.update_for("t1", TaskState.FINISHED))
    fw = cluster.master.books.frameworks[a.framework_id]
    await eventually(lambda: not fw.pending)
    heard = len(a.inbox.of(Update))
    await a.bus.publish(
        T.inbound("framework", "framework"),
        Reconcile(framework_id=a.framework_id, tasks=[ReconcileTask(task_id="t1", slave_id="s1")]),
    )
    answer = await a.update_for("t1", TaskState.FINISHED, after=heard)
    assert (answer.reason, answer.uuid) == (Reason.RECONCILIATION, None)
