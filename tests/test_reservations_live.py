"""Reservations end to end, over a real broker: a slave's static reservation is offered to
its role alone; a framework reserves with RESERVE and gives back with UNRESERVE; what it
reserved outlives a slave restart and a master failover; another role's framework can
neither reserve for that role nor unreserve it."""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import Error, OfferOperation, Revive
from protocol.wire.resources import Resources

from harness.fakes import operate
from harness.helpers import eventually
from harness.reservations import framework, master, offer_with, slave

R = Resources.parse


async def test_a_static_reservation_is_offered_to_its_role_alone(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with (
        master(mosquitto),
        slave(mosquitto, tmp_path, "cpus(team-a):1;mem(team-a):128;cpus:1;mem:128"),
        framework(mosquitto, "other", "team-b") as other,
    ):
        offer = await other.next_offer()
        assert offer.resources == R("cpus:1;mem:128")  # the unreserved part only
        async with framework(mosquitto, "mine", "team-a") as mine:
            got = await mine.next_offer()
            assert got.resources == R("cpus(team-a):1;mem(team-a):128")


async def test_reserve_outlives_a_slave_restart_and_a_master_failover(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    reserved = R("cpus(team-a,framework):0.5;mem(team-a,framework):64")
    async with master(mosquitto) as m:
        async with (
            slave(mosquitto, tmp_path, "cpus:2;mem:256"),
            framework(mosquitto, "mine", "team-a") as mine,
        ):
            offer = await mine.next_offer()
            # `(team-a,)`: dynamic, its principal left out: the caller's (the broker's
            # word, never a payload's)
            op = OfferOperation(type="RESERVE", resources=R("cpus(team-a,):0.5;mem(team-a,):64"))
            seen = mine.offer_count()
            await operate(mine, offer, op)
            offer = await offer_with(mine, reserved, seen)
            assert m.books.slaves["s1"].total == R("cpus:1.5;mem:192") + reserved
            kept = tmp_path / "s1" / "resources.json"
            await eventually(kept.exists)
        # the slave restarts: it announces its total with the reservation
        async with slave(mosquitto, tmp_path, "cpus:2;mem:256") as s:
            assert s.resources.total == R("cpus:1.5;mem:192") + reserved
            await eventually(lambda: m.books.slaves["s1"].connected)
            assert m.allocator.slaves["s1"].total == R("cpus:1.5;mem:192") + reserved
    # a new master learns it again from the slave's registration
    async with (
        master(mosquitto, 1) as m2,
        slave(mosquitto, tmp_path, "cpus:2;mem:256"),
        framework(mosquitto, "other", "team-b") as other,
    ):
        await eventually(lambda: "s1" in m2.allocator.slaves)
        assert m2.allocator.slaves["s1"].total == R("cpus:1.5;mem:192") + reserved
        offer = await other.next_offer()
        assert offer.resources == R("cpus:1.5;mem:192")


async def test_another_role_can_neither_reserve_for_it_nor_unreserve_it(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    theirs = R("cpus(team-a,framework):1")
    async with (
        master(mosquitto) as m,
        slave(mosquitto, tmp_path, "cpus:2;mem:256"),
        framework(mosquitto, "hostile", "team-b") as hostile,
    ):
        offer = await hostile.next_offer()
        before = m.books.slaves["s1"].total
        await operate(hostile, offer, OfferOperation(type="RESERVE", resources=theirs))
        offer = await hostile.next_offer(after=1)
        assert m.books.slaves["s1"].total == before
        assert m.outbox.refused["invalid-operation"] == 1
        said = await hostile.inbox.wait_for(Error, lambda e: e.code == "invalid-operation")
        assert "RESERVE refused" in said.message  # (its sender is told why)
        # an operator reserves for team-a; team-b names it in an UNRESERVE
        await hostile.decline(offer, refuse=3600)
        await eventually(lambda: not m.books.slaves["s1"].offers)
        m.resource_operations.by_operator(
            "s1", OfferOperation(type="RESERVE", resources=theirs), "framework"
        )
        await hostile.bus.publish(hostile.to_master, Revive(framework_id=hostile.framework_id))
        offer = await hostile.next_offer(after=2)
        assert "cpus(team-a,framework)" not in offer.resources
        await operate(hostile, offer, OfferOperation(type="UNRESERVE", resources=theirs))
        await eventually(lambda: m.outbox.refused["invalid-operation"] == 2)
        assert m.books.slaves["s1"].total == R("cpus:1;mem:256") + theirs
