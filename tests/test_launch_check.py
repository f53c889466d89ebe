"""One launch check for the SDK's pre-check and the master (`protocol.wire.launches`): a
launch the driver lets through is one the master counts the same way, a new custom
executor's own resources included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frameworks import DriverError
from frameworks.calls import launch_checked
from protocol.wire.framework import OfferOperation
from protocol.wire.launches import OfferRoom
from protocol.wire.resources import Resources
from protocol.wire.values import CommandInfo, ExecutorInfo, Offer, TaskInfo

EXECUTOR = ExecutorInfo(
    executor_id="ex", command=CommandInfo(value="./executor"), resources=Resources(cpus=1, mem=128)
)


def offer(cpus: float, mem: float, executor_ids: list[str] | None = None) -> Offer:
    return Offer(
        offer_id="o1",
        framework_id="f",
        slave_id="s1",
        hostname="h",
        resources=Resources(cpus=cpus, mem=mem),
        executor_ids=executor_ids or [],
    )


def task(task_id: str, cpus: float, executor: ExecutorInfo | None = EXECUTOR) -> TaskInfo:
    return TaskInfo(
        task_id=task_id,
        slave_id="s1",
        resources=Resources(cpus=cpus, mem=64),
        executor=executor,
        command=None if executor else CommandInfo(value="true"),
    )


def test_the_driver_refuses_a_launch_whose_new_executor_does_not_fit() -> None:
    """The task fits the offer, the task and its new executor together do not: the
    master would refuse it, so the driver does before sending it."""
    with pytest.raises(DriverError, match=r"short of cpus:0\.5"):
        launch_checked("launch_tasks", {"o1": offer(2, 1024)}, ["o1"], [task("t1", 1.5)])


def test_an_executor_is_counted_once_a_launch_and_not_once_it_runs_there() -> None:
    assert launch_checked(
        "launch_tasks", {"o1": offer(2, 1024)}, ["o1"], [task("t1", 0.5), task("t2", 0.5)]
    )
    with pytest.raises(DriverError, match="task t2"):
        launch_checked(
            "launch_tasks", {"o1": offer(2, 1024)}, ["o1"], [task("t1", 0.5), task("t2", 1)]
        )
    # running there already (the offer says so): only the tasks' own resources
    running = {"o1": offer(2, 1024, ["ex"])}
    assert launch_checked("launch_tasks", running, ["o1"], [task("t1", 1), task("t2", 1)])


@given(
    st.lists(st.tuples(st.floats(0.1, 3), st.booleans()), min_size=1, max_size=6),
    st.booleans(),
)
def test_the_driver_lets_through_exactly_what_the_master_launches(
    tasks: list[tuple[float, bool]], running: bool
) -> None:
    """Whatever the tasks and executors, the pre-check passes a launch if and only if the
    master, counting what it knows of the framework's executors, would launch all of it."""
    infos = [task(f"t{i}", cpus, EXECUTOR if ex else None) for i, (cpus, ex) in enumerate(tasks)]
    master = OfferRoom(
        "s1", Resources(cpus=4, mem=1024), {"ex": EXECUTOR.resources} if running else {}
    )
    launched = 0
    for info in infos:
        if master.problem(info) is None:
            master.take(info)
            launched += 1
    try:
        launch_checked(
            "launch_tasks", {"o1": offer(4, 1024, ["ex"] if running else [])}, ["o1"], infos
        )
        passed = True
    except DriverError:
        passed = False
    assert passed == (launched == len(infos))


def test_the_driver_refuses_a_task_on_a_volume_resized_in_the_same_accept() -> None:
    # non-speculative, as the master: neither the volume nor what it became is usable
    volume, grown = "disk(r)[v:d]:100", "disk(r)[v:d]:150"
    held = Offer(
        offer_id="o1", framework_id="f", slave_id="s1", hostname="h",
        resources=Resources.parse(f"cpus:2;mem:256;{volume};disk(r):50"),
    )  # fmt: skip
    more = Resources.parse("disk(r):50")
    grow = OfferOperation(type="GROW_VOLUME", resources=Resources.parse(volume), addition=more)
    for uses in (volume, grown):
        on_it = TaskInfo(
            task_id="t", slave_id="s1", resources=Resources.parse(f"cpus:1;mem:64;{uses}"),
            command=CommandInfo(value="true"),
        )  # fmt: skip
        with pytest.raises(DriverError):
            launch_checked("accept_offers", {"o1": held}, ["o1"], [on_it], [grow])
    assert launch_checked("accept_offers", {"o1": held}, ["o1"], [task("t", 1, None)], [grow]) == [
        "o1"
    ]
