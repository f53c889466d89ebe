"""Ports through the master, in process on the in-memory transport with bare protocol
fakes (a hostile framework speaks the protocol, not the SDK): offers carry a slave's free
ports, a launch takes its own out of its offer, a hostile one gets a clear refusal and
nothing else, ports come back when a task ends, and a slave that re-registers brings its
tasks' ports back into the books."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import pytest

from frameworks import NotEnoughPorts, OfferPorts, build_task
from protocol.wire.discrete import Discrete, ItemSet, Ranges
from protocol.wire.messages import (
    Error,
    Offer,
    Reason,
    Reregister,
    RunningTask,
    TaskInfo,
    TaskState,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework, FakeSlave
from harness.helpers import books_balance, eventually
from harness.master import FAST, GB, Cluster, encode_raw
from harness.master import cluster as cluster

PORTS = Discrete({"ports": Ranges([(31000, 31009)])})
SLAVE = Resources(cpus=4, mem=4 * GB)


def ports(*spans: tuple[int, int]) -> Discrete:
    return Discrete({"ports": Ranges(spans)})


async def reregister(slave: FakeSlave, framework_id: str, task: TaskInfo) -> None:
    """`slave` re-registers (as after a failover) running `task` of `framework_id`."""
    running = RunningTask(framework_id=framework_id, task=task, state=TaskState.RUNNING)
    message = Reregister(
        slave_id=slave.slave_id,
        hostname=f"{slave.slave_id}.local",
        resources=slave.resources,
        discrete=slave.discrete,
        tasks=[running],
    )
    await slave.bus.publish(slave.to_master, message)


def web(fw: FakeFramework, offer: Offer, task_id: str, values: Discrete) -> TaskInfo:
    return fw.task(offer, Resources(cpus=1, mem=GB), task_id).model_copy(
        update={
            "discrete": values,
            "resources": Resources(cpus=1, mem=GB, ports=sum(v.size for v in values.values())),
        }
    )


async def test_offers_carry_free_ports_and_a_task_takes_its_own(cluster: Cluster) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    assert offer.discrete == PORTS  # the slave's free ports, counted beside cpus
    assert offer.resources == SLAVE + Resources(ports=10)
    t1 = web(a, offer, "t1", ports((31000, 31000)))
    t2 = web(a, offer, "t2", ports((31003, 31004)))
    await a.accept(offer, [t1, t2], refuse=0)
    runs = [await s1.run_task(), await s1.run_task()]
    assert [r.task.discrete for r in runs] == [t1.discrete, t2.discrete]
    again = await a.next_offer(after=1)  # what they left, at once
    assert again.discrete == ports((31001, 31002), (31005, 31009))
    assert again.resources["ports"] == 7
    books_balance(cluster.master)
    # a task that ends gives its ports back
    await a.decline(again, refuse=0)
    await s1.report(a.framework_id, "t2", TaskState.FINISHED)
    back = await a.next_offer(after=2)
    assert back.discrete == ports((31001, 31009))
    books_balance(cluster.master)


async def test_two_frameworks_are_offered_different_ports(cluster: Cluster) -> None:
    """The allocator counts ports; an offer of part of a slave takes the lowest free ones
    (never those of another outstanding offer)."""
    a = await cluster.framework("A")
    await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    await a.accept(offer, [web(a, offer, "t1", ports((31000, 31001)))], refuse=60)
    b = await cluster.framework("B")
    other = await b.next_offer()
    assert other.discrete == ports((31002, 31009))
    books_balance(cluster.master)


@pytest.mark.parametrize(
    ("values", "counted", "says"),
    [
        (ports((80, 80)), None, "ports [80-80] are not in its offer on slave s1"),
        (ports((31000, 31010)), None, "ports [31000-31010] are not in its offer"),
        (ports((31005, 31005)), None, "ports [31005-31005] are not in its offer"),
        (Discrete(), 2, "asks for 2 ports without naming them"),
        (Discrete({"zones": ItemSet(["a"])}), None, "zones {a} are not in its offer"),
    ],
    ids=["outside", "past-the-end", "held", "unnamed", "no-such-set"],
)
async def test_a_launch_for_ports_it_was_not_offered_is_refused_and_gains_nothing(
    cluster: Cluster, values: Discrete, counted: int | None, says: str
) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    await a.accept(offer, [web(a, offer, "holder", ports((31005, 31005)))], refuse=0)
    await s1.run_task()
    offer = await a.next_offer(after=1)
    assert offer.discrete == ports((31000, 31004), (31006, 31009))
    bad = web(a, offer, "bad", values)
    if counted is not None:  # a count of ports, none named
        bad = bad.model_copy(update={"resources": Resources(cpus=1, mem=GB, ports=counted)})
    await a.accept(offer, [bad], refuse=0)
    status = await a.update_for("bad", TaskState.ERROR)
    assert status.reason == Reason.TASK_INVALID
    assert says in status.message
    assert not a.inbox.of(Error)  # the update is the answer
    assert cluster.master.outbox.refused["invalid-tasks"] == 1  # (and a log line)
    assert [r.task.task_id for r in s1.runs()] == ["holder"]  # nothing ran
    again = await a.next_offer(after=2)  # the offer came back whole
    assert again.discrete == ports((31000, 31004), (31006, 31009))
    books_balance(cluster.master)


async def test_hostile_sizes_are_refused_at_the_door(cluster: Cluster) -> None:
    """100,000 single-port ranges or a set of 10^6 items in an Accept are refused unread
    (past the master's message bound); 2,000 ranges, 2,000 items or an inverted range are
    refused with an Error saying so. Nothing is launched; the offer stays outstanding."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    task = {
        "task_id": "huge",
        "slave_id": "s1",
        "resources": {"cpus": 1},
        "command": {"value": "true"},
    }

    def spans(n: int) -> str:
        return "[" + ",".join(f"{p}-{p}" for p in range(0, 2 * n, 2)) + "]"

    def items(n: int) -> str:
        return "{" + ",".join(str(i) for i in range(n)) + "}"

    hostile = [
        {"ports": spans(100_000)},
        {"zones": items(10**6)},
        {"ports": spans(2_000)},
        {"zones": items(2_000)},
        {"ports": "[9-1]"},
    ]
    for discrete in hostile:
        body = {
            "framework_id": a.framework_id,
            "offer_ids": [offer.offer_id],
            "tasks": [{**task, "discrete": discrete}],
        }
        await a.bus.publish_raw(a.to_master, encode_raw("Accept", a.bus.inbox, body))
    errors = await a.inbox.wait_count(Error, 3)
    assert sorted(e.message.split(": ", 3)[-1] for e in errors) == [
        "resource 'ports': more than 1024 ranges",
        "resource 'ports': range [9-1] is inverted",
        "resource 'zones': more than 1024 items",
    ]
    await eventually(lambda: cluster.master.outbox.refused["too-large"] == 2)
    assert not s1.runs()
    assert offer.offer_id in cluster.master.books.offers
    books_balance(cluster.master)


async def test_a_reregistering_slave_brings_its_tasks_ports_back_into_the_books(
    cluster: Cluster,
) -> None:
    """As after a master failover: the slave's running tasks come back with their ports,
    and the next offer holds only the others."""
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    t1 = web(a, offer, "t1", ports((31002, 31003)))
    await a.accept(offer, [t1], refuse=0)
    run = await s1.run_task()
    again = await a.next_offer(after=1)
    await a.decline(again, refuse=0)
    await reregister(s1, a.framework_id, run.task)
    offer = await a.next_offer(after=2)
    assert offer.discrete == ports((31000, 31001), (31004, 31009))
    books_balance(cluster.master)


async def test_a_slave_that_reports_tasks_on_ports_it_does_not_have_is_refused(
    cluster: Cluster,
) -> None:
    a = await cluster.framework("A")
    s1 = await cluster.slave("s1", SLAVE, PORTS)
    offer = await a.next_offer()
    stray = web(a, offer, "stray", ports((9000, 9000)))
    await reregister(s1, a.framework_id, stray)
    error = await s1.inbox.wait_for(Error)
    assert "not all in its ports:[31000-31009]" in error.message
    await eventually(lambda: "stray" not in cluster.master.books.frameworks[a.framework_id].tasks)


async def test_a_slave_whose_reserved_and_unreserved_ports_overlap_is_refused(
    cluster: Cluster,
) -> None:
    """`ports(svc):[31000-31010]` beside `ports:[31000-32000]`: one port under two names
    would go to svc's task and to another tenant's. The master admits no such slave."""
    both = Discrete({"ports(svc)": Ranges([(31000, 31010)]), "ports": Ranges([(31000, 32000)])})
    counts = Resources({"cpus": 4, "mem": GB, "ports(svc)": 11, "ports": 1001})
    s1 = await cluster.slave("s1", counts, both)
    error = await s1.inbox.wait_for(Error)
    assert "overlap" in error.message
    assert "s1" not in cluster.master.books.slaves


async def test_a_role_limited_to_two_ports_is_offered_two(tmp_path: Path) -> None:
    """Quota counts ports by size: a role whose limit is `ports: 2` is offered two ports
    of a slave's ten (the lowest), beside the slave's cpus and memory."""
    roles = tmp_path / "roles.yaml"
    roles.write_text("roles:\n  web: {quota: {limit: {ports: 2}}}\n")
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(dataclasses.replace(FAST, roles=roles))
        await c.slave("s1", SLAVE, PORTS)
        web = await c.framework("web", role="web")
        offer = await web.next_offer()
        assert offer.discrete == ports((31000, 31001))
        assert offer.resources == SLAVE + Resources(ports=2)
        books_balance(c.master)


async def test_after_a_master_failover_a_running_tasks_ports_stay_its_own() -> None:
    """A new master (its books empty) hears the slave re-register with a task of a
    framework it does not know yet (an orphan): another framework is offered the other
    ports only."""
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        first = await c.start_master()
        a = await c.framework("A", failover_timeout=60)
        s1 = await c.slave("s1", SLAVE, PORTS)
        offer = await a.next_offer()
        await a.accept(offer, [web(a, offer, "t1", ports((31000, 31001)))], refuse=0)
        run = await s1.run_task()
        await first.stop()
        await c.start_master()  # the new leader: nothing in its books
        b = await c.framework("B")
        await reregister(s1, a.framework_id, run.task)
        offer = await b.next_offer()
        assert offer.discrete == ports((31002, 31009))
        assert offer.resources["ports"] == 8


async def test_a_role_at_its_limit_is_not_offered_ports_alone(tmp_path: Path) -> None:
    """A limit on cpus and mem but not on ports: once the role holds its limit, what a
    cut would leave of another slave is its ports alone, worth no offer (as Mesos's
    minimum offer, cpus:0.01|mem:32, keeps such offers away)."""
    roles = tmp_path / "roles.yaml"
    roles.write_text("roles:\n  capped: {quota: {limit: {cpus: 1, mem: 512}}}\n")
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(dataclasses.replace(FAST, roles=roles))
        await c.slave("s1", SLAVE, PORTS)
        await c.slave("s2", SLAVE, PORTS)
        capped = await c.framework("capped", role="capped")
        offer = await capped.next_offer()
        assert offer.resources == Resources(cpus=1, mem=512, ports=10)
        await c.rounds_pass()
        assert capped.offer_count() == 1


def test_build_task_takes_the_offers_lowest_ports_for_a_count_it_does_not_name() -> None:
    """A framework that launches a task of its whole offer (`offer.resources`, ports
    counted) gets the offer's ports in it; `OfferPorts` hands out several tasks' own."""
    offer = Offer(
        offer_id="o",
        framework_id="f",
        slave_id="s",
        hostname="h",
        resources=SLAVE + Resources(ports=10),
        discrete=PORTS,
    )
    whole = build_task(offer, "all", offer.resources, command="true")
    assert whole.discrete == PORTS
    two = build_task(offer, "two", Resources(cpus=1, ports=2), command="true")
    assert two.discrete == ports((31000, 31001))
    picker = OfferPorts(offer)
    first, second = picker.take(3), picker.take(3)
    assert (first, second) == (ports((31000, 31002)), ports((31003, 31005)))
    with pytest.raises(NotEnoughPorts, match="4 ports left, not 5"):
        picker.take(5)
