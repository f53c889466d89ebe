"""The offer cycle (`master.cycle`), in process on books kept in memory (as Nomad tests
its schedulers on a harness): the round and its offer bound, the remainder an answer
declines, suppress and revive, offer timeouts, and the preemption check with its kills.
And the simulator drives the same cycle: it keeps none of its own."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import master.cycle.offer_bound as offer_bound
from cluster.experiments.simulator import simulate
from cluster.experiments.spec import Spec
from master.allocation.allocator import Allocator
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.cycle import CycleConfig, OfferCycle
from master.cycle.offer_cycle import MAX_TIMED_OUT_REFUSE, TIMED_OUT_REFUSE
from protocol.wire.resources import Resources

from harness.cycle import Books, Offer

ROOT = Path(__file__).resolve().parent.parent
SLAVE = Resources(cpus=4, mem=4096)


def cycle_of(
    frameworks: list[str], slaves: int, config: CycleConfig | None = None, policy: str = "drf"
) -> tuple[OfferCycle, Books]:
    allocator, books = Allocator(policy), Books()
    for name in frameworks:
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    return OfferCycle(allocator, books, config or CycleConfig(policy=policy)), books


def offer(cycle: OfferCycle, books: Books, now: float) -> list[Offer]:
    """A round, its offers kept outstanding as a master keeps them."""
    made = [
        Offer(f"o{i}-{now}", a.framework_id, a.slave_id, a.resources, now)
        for i, a in enumerate(cycle.round(now).offers)
    ]
    books.offers.update((o.offer_id, o) for o in made)
    return made


# -- the round and the offer bound ---------------------------------------------------------


def test_a_framework_holding_offers_is_offered_up_to_the_bound_and_the_rest_goes_to_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offer_bound, "MAX_OFFERS_HELD", 3)
    cycle, books = cycle_of(["A"], 8)
    assert [o.framework_id for o in offer(cycle, books, 0.0)] == ["A"] * 3
    assert offer(cycle, books, 1.0) == []  # it holds three: nothing more
    first = next(iter(books.offers.values()))
    del books.offers[first.offer_id]  # it answers one (declined, filtered a minute)
    cycle.decline("A", first.slave_id, first.resources, 60.0, 1.0)
    cycle.allocator.add_framework("B", "B")
    books.roles["B"] = "B"
    given = offer(cycle, books, 2.0)  # A has room for one more, B for three
    assert Counter(o.framework_id for o in given) == {"B": 3, "A": 1}
    assert first.slave_id in {o.slave_id for o in given if o.framework_id == "B"}
    assert Counter(o.framework_id for o in books.offers.values()) == {"A": 3, "B": 3}


def test_what_a_round_gives_past_the_bound_goes_back_filtered_and_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The allocator passes a framework by at its room; if a round gives it more anyway,
    the cycle holds those back: they go back to the pool, kept from it a while."""
    cycle, _ = cycle_of(["A"], 4)
    monkeypatch.setattr(offer_bound, "MAX_OFFERS_HELD", 2)
    allocate = cycle.allocator.allocate
    monkeypatch.setattr(
        cycle.allocator,
        "allocate",
        lambda now, room, at_once=None: allocate(now),
    )
    plan = cycle.round(0.0)
    assert (len(plan.offers), len(plan.held_back)) == (2, 2)
    for a in plan.held_back:
        assert cycle.allocator.held("A", a.slave_id) == Resources()  # back in the pool
    assert cycle.round(offer_bound.OFFERS_HELD_REFUSE - 1).offers == []  # kept from A
    assert len(cycle.round(offer_bound.OFFERS_HELD_REFUSE + 1).offers) == 2


@settings(max_examples=200, deadline=None)
@given(
    held=st.lists(st.integers(0, 8), min_size=1, max_size=4),
    slaves=st.integers(1, 10),
    bound=st.integers(1, 8),
)
def test_the_room_a_round_counts_gives_what_counting_every_framework_gives(
    held: list[int], slaves: int, bound: int
) -> None:
    """A round counts the room of only the frameworks it could take to the bound: it
    decides just as if it counted everyone's."""
    offer_bound.MAX_OFFERS_HELD, before = bound, offer_bound.MAX_OFFERS_HELD
    try:
        decisions = []
        for everyone in (False, True):
            allocator = Allocator("drf")
            for i in range(len(held)):
                allocator.add_framework(f"f{i}", f"r{i}")
            for i in range(slaves):
                allocator.add_slave(f"s{i}", SLAVE)
            holds = {f"f{i}": n for i, n in enumerate(held)}
            room = (
                {f: bound - n for f, n in holds.items()}
                if everyone
                else offer_bound.room(holds, allocator.frameworks, slaves)
            )
            decisions.append(allocator.allocate(0.0, room=room))
        assert decisions[0] == decisions[1]
    finally:
        offer_bound.MAX_OFFERS_HELD = before


# -- answers, suppress and revive ----------------------------------------------------------


def test_a_remainder_is_declined_for_its_refuse_seconds_and_nothing_left_declines_nothing() -> None:
    cycle, _ = cycle_of(["A", "B"], 1)
    (a,) = cycle.round(0.0).offers
    assert not cycle.decline(a.framework_id, "s0", Resources(), 5.0, 0.0)
    used = Resources(cpus=1, mem=1024)
    assert cycle.decline(a.framework_id, "s0", a.resources - used, 5.0, 0.0)
    (b,) = cycle.round(1.0).offers  # the rest goes to the other one
    assert (b.framework_id, b.resources) == ("B" if a.framework_id == "A" else "A", SLAVE - used)


def test_a_framework_that_wants_nothing_is_suppressed_and_revived_when_it_wants_again() -> None:
    cycle, _ = cycle_of(["A"], 2)
    assert not cycle.wants_offers("A", False)
    assert cycle.suppressed("A")
    assert cycle.round(0.0).offers == []
    assert cycle.wants_offers("A", True)  # revived: a round is wanted
    assert not cycle.wants_offers("A", True)  # (wanting all along: nothing changes)
    assert len(cycle.round(1.0).offers) == 2


def test_a_framework_asking_for_a_smallest_offer_is_offered_only_slaves_with_room_for_it() -> None:
    cycle, _ = cycle_of(["A"], 2)
    cycle.allocator.allocate_existing("A", "s0", Resources(cpus=3.5, mem=512))
    cycle.wants_offers("A", True, Resources(cpus=1, mem=64))
    assert [a.slave_id for a in cycle.round(0.0).offers] == ["s1"]


def test_a_decline_filter_lasts_at_least_one_allocation_interval() -> None:
    """Mesos's SmallOfferFilterTimeout (MESOS-4302): refuse_seconds shorter than the
    allocation interval would lapse before the next round, and the declined resources
    would come straight back; the filter holds for the interval instead."""
    cycle, _ = cycle_of(["A"], 1, CycleConfig(policy="drf", allocation_interval=5.0))
    (a,) = cycle.round(0.0).offers
    cycle.decline("A", "s0", a.resources, 0.1, 0.0)
    assert cycle.round(4.9).offers == []
    assert len(cycle.round(5.0).offers) == 1


def test_revive_clears_a_frameworks_filters() -> None:
    cycle, _ = cycle_of(["A"], 1)
    (a,) = cycle.round(0.0).offers
    cycle.decline("A", "s0", a.resources, 60.0, 0.0)
    assert cycle.round(1.0).offers == []
    cycle.revive("A")
    assert len(cycle.round(2.0).offers) == 1


# -- offer timeouts ------------------------------------------------------------------------


def test_offers_let_time_out_are_filtered_longer_each_time_in_a_row_until_it_answers() -> None:
    cycle, books = cycle_of(["A"], 1, CycleConfig(offer_timeout=10.0))
    now, refused = 0.0, []
    for _ in range(8):
        offer(cycle, books, now)
        assert cycle.expired(now + 10.0) == []  # (not past the timeout yet)
        now += 10.5
        (timed_out,) = cycle.expired(now)
        del books.offers[timed_out.offer_id]  # rescinded
        refused.append(timed_out.refuse_seconds)
        assert cycle.round(now + timed_out.refuse_seconds - 0.1).offers == []  # kept from it
        now += timed_out.refuse_seconds
    assert refused == [5, 10, 20, 40, 80, 160, 300, 300]
    assert (TIMED_OUT_REFUSE, MAX_TIMED_OUT_REFUSE) == (5, 300)
    cycle.answered("A")  # it answers one: the next timeout is filtered from 5 s again
    offer(cycle, books, now)
    assert [t.refuse_seconds for t in cycle.expired(now + 11)] == [5]


def test_no_offer_times_out_when_offer_timeouts_are_off() -> None:
    cycle, books = cycle_of(["A"], 1)
    offer(cycle, books, 0.0)
    assert cycle.expired(1e9) == []


# -- preemption ------------------------------------------------------------------------------


def morning(notice: float = 2.0) -> tuple[OfferCycle, Books]:
    """A holds both slaves with tasks; B comes wanting two of its tasks, and starves."""
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=notice))
    cycle, books = cycle_of(["A", "B"], 2, config)
    task = Resources(cpus=1, mem=1024)
    cycle.wants_offers("B", False)
    for i in range(8):
        slave = f"s{i % 2}"
        cycle.allocator.allocate_existing("A", slave, task)
        books.tasks[("A", f"t{i}")] = RunningTask("A", f"t{i}", slave, dict(task.millis), i)
    books.demand["B"] = [(dict(task.millis), 2)]
    cycle.wants_offers("B", True)
    return cycle, books


def test_a_claim_holds_the_room_it_frees_and_its_victims_are_killed_after_the_notice() -> None:
    cycle, books = morning()
    assert cycle.check(0.0).claims == []  # starving: its timer starts
    plan = cycle.check(5.0)
    (claim,) = plan.claims
    assert claim.claimant == "B"
    assert plan.kill_at == 7.0
    victims = {(v.framework_id, v.task_id) for p in claim.plans for v in p.victims}
    assert victims == {("A", "t7"), ("A", "t6")}  # the youngest
    assert cycle.kills_due(6.9) == []
    books.tasks.pop(("A", "t6"))  # one ends on its own meanwhile: not killed, forgotten
    assert cycle.task_ended("A", "t6", finished=True, ran=1.0) is False
    (kill,) = cycle.kills_due(7.0)
    assert (kill.framework_id, kill.task_id) == ("A", "t7")
    assert cycle.kills_due(8.0) == []  # each once
    assert cycle.task_ended("A", "t7", finished=False, ran=3.0)  # preempted: work lost
    assert cycle.preemption.stats.tasks_preempted == 1
    # the room freed is held for B: offered to B, not to A
    cycle.allocator.recover("A", kill.slave_id, Resources(cpus=1, mem=1024))
    assert {a.framework_id for a in cycle.round(7.0).offers} == {"B"}


def test_no_check_claims_anything_when_preemption_is_off() -> None:
    cycle, _ = cycle_of(["A"], 1)
    assert not cycle.preempting
    assert cycle.check(1e9).claims == []


def test_a_framework_gone_leaves_no_timer_victim_or_timeout_count_behind() -> None:
    cycle, _ = morning()
    cycle.check(0.0)
    cycle.check(5.0)
    cycle._timed_out["A"] = 3
    cycle.forget("A")
    cycle.forget("B")
    assert not cycle.preemption.doomed
    assert not cycle.preemption.starving_since
    assert not cycle._timed_out


# -- the simulator drives the same cycle --------------------------------------------------------

# what the offer cycle does with the allocator: nobody else asks it for offers, suppresses,
# revives, holds room or sets offer filters (and declines: a recover with a filter)
CYCLE_VERBS = {"allocate", "suppress", "revive", "reserve", "set_min_allocatable"}


def test_the_simulator_keeps_no_offer_cycle_of_its_own() -> None:
    tree = ast.parse((ROOT / "cluster" / "experiments" / "simulator.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    on = {
        (call.func.value.attr, call.func.attr)
        for call in calls
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Attribute)
    }
    assert not {verb for of, verb in on if of == "allocator"} & CYCLE_VERBS
    assert not {verb for of, verb in on if of == "preemption"}  # (its check, due, ended)
    assert "refuse_seconds" not in {k.arg for call in calls for k in call.keywords}
    assert not {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & {
        "_peek",
        "MAX_OFFERS_HELD",
    }


def test_the_simulator_offers_a_framework_at_most_the_bound_in_a_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The master's bound in simulated time: what a round would give past it waits."""
    monkeypatch.setattr(offer_bound, "MAX_OFFERS_HELD", 3)
    spec = Spec.model_validate(
        {
            "cluster": {"slaves": [{"count": 10, "resources": {"cpus": 1, "mem": 1024}}]},
            "master": {"policy": "drf", "allocation_interval": 1, "refuse_seconds": 1},
            "frameworks": [
                {"name": "A", "task": {"cpus": 1, "mem": 1024}, "duration": {"fixed": 100}}
            ],
            "run": {"duration": 12, "seed": 1},
        }
    )
    running = {round(s.time): s.running_tasks for s in simulate(spec)[0].samples}
    assert running[1] == 3  # the first round: three offers, the rest held back ...
    assert running[4] == 3  # ... kept from it OFFERS_HELD_REFUSE (5 s)
    assert running[7] == 6  # then three more
    assert running[12] == 9


def test_a_claimant_running_its_rooms_tasks_declines_the_rest_of_the_slave_and_used_its_claim() -> (
    None
):
    """Declining an offer of what is left beside the room's tasks (the slave's memory
    alone) is no refusal of the room: the claim is used and its claimant waits for
    nothing. (It was counted as the room turned back, an offer declined whole, and an
    honest tenant made to wait a minute before preemption would act for it again.)"""
    cycle, _ = morning()
    cycle.check(0.0)
    (claim,) = cycle.check(5.0).claims
    for plan in claim.plans:
        task = Resources.from_millis(plan.task)
        cycle.allocator.allocate_existing("B", plan.slave_id, task + Resources(mem=512))
        cycle.launched("B", plan.slave_id, task)
        cycle.decline("B", plan.slave_id, Resources(mem=512), 5.0, 8.0, whole=True)
    use = cycle.preemption.claim_use
    assert use.may_claim("B", 8.0)
    assert use.unused("B") == 0
    assert use.waiting("B", 8.0) == 0
