"""Review 76: a framework that names a role it is not in to `suppress_offers` or
`revive_offers` has its SDK driver stop for good, while the master keeps the framework.

Scenario. A multi-role framework in roles `web` and `batch` calls
`driver.suppress_offers(["webb"])` (a typo, or a role it was in before it was
re-registered with others). The SDK sends it unchecked
(`SchedulerDriver.suppress_offers`).

What Mesos does. A SUPPRESS or REVIVE naming a role the framework is not subscribed
to is an invalid call: the v1 API answers it 400, the old driver's message is dropped
with a warning. The framework, its driver and its offers go on.

What drfmesos does. The master refuses the call (`FrameworkCalls._roles_of`) with an
Error of code `role-refused`, the code it also uses for a Subscribe refused its role.
The driver reads every `role-refused` as fatal (`frameworks.errors.FATAL`;
`SchedulerDriver._on_error`): it sets `removed`, stops its callbacks, and `run()`
returns as if the framework had been removed. The master still has the framework,
connected, its tasks running and its offers outstanding: no driver serves it any more
(and a driver that stops closes its bus cleanly, without a Last Will, so the master
never learns it went: see test_review76_stop_failover.py).

Why a user relies on it. A bad argument to one call must cost that call, not the
framework: the SDK itself promises misuse is refused "with `DriverError` rather than a
silent drop" (frameworks/driver.py), and a framework that is not removed is not told it
was.
"""

from __future__ import annotations

import contextlib

from frameworks import SchedulerDriver
from frameworks.errors import DriverError

from harness.helpers import Recorder, eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster


async def test_suppressing_a_role_it_is_not_in_does_not_stop_the_driver(
    cluster: Cluster,
) -> None:
    listening = Recorder()  # (it answers no offer)
    driver = SchedulerDriver(
        listening, name="A", broker=cluster.connect, cluster=T.cluster, roles=["web", "batch"]
    )
    await driver.start()
    try:
        with contextlib.suppress(DriverError):  # (refused at once: as good as Mesos's 400)
            driver.suppress_offers(["webb"])
        # then a call whose answer comes behind the master's answer to that one (one
        # principal's calls are handled in order, and the driver's events reach the
        # scheduler in order): a reconciliation of a task the master does not know
        driver.reconcile_tasks(["never-launched"])
        await eventually(lambda: bool(listening.statuses) or driver.removed is not None)
        assert driver.removed is None, f"the driver stopped: {driver.removed}"
        assert [s.task_id for s in listening.statuses] == ["never-launched"]
    finally:
        driver.stop()
        await driver.join()
