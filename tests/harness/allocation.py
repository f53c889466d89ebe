"""Allocation driven as frameworks would drive it, with no master: every offer filled with
tasks and the rest given back, round after round."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from master.allocation.allocator import Allocator
from master.allocation.ledger import AtOnce
from master.allocation.sorter import Millis
from protocol.wire.resources import Resources


def fill(
    allocator: Allocator,
    tasks: dict[str, Resources],
    rounds: int = 5000,
    caps: dict[str, int] | None = None,
) -> dict[str, int]:
    """Every framework fills each offer with its tasks and gives the rest back (declining
    what holds none of its tasks, or anything once it runs all it wants: it stays active,
    as a real framework does), round after round, until nobody launches anything."""
    running = dict.fromkeys(tasks, 0)
    caps = caps or {}
    for now in range(rounds):
        offers = allocator.allocate(float(now))
        if not offers:
            return running
        for offer in offers:
            task = tasks[offer.framework_id]
            cap = caps.get(offer.framework_id)
            if not offer.resources.contains(task) or running[offer.framework_id] == cap:
                allocator.recover(offer.framework_id, offer.slave_id, offer.resources,
                                  refuse_seconds=1e9, now=float(now))  # fmt: skip
                continue
            rest = offer.resources
            while rest.contains(task) and running[offer.framework_id] != cap:
                running[offer.framework_id] += 1
                rest = rest - task
            if rest:
                allocator.recover(offer.framework_id, offer.slave_id, rest, refuse_seconds=0)
    raise AssertionError("the cluster never settled")


def whole_or_nothing(declines: Callable[[str, Millis], bool], refuse: float) -> AtOnce:
    """Frameworks answering each offer as the round makes it (`ledger.Answer`): each takes
    all of it, or declines it whole where `declines` says so, refusing it `refuse`
    seconds."""
    return AtOnce(lambda framework_id, _, free: None if declines(framework_id, free) else free,
                  refuse)  # fmt: skip


# -- the books' changes the property tests draw, replayed on allocators side by side --------

# a framework's offer filters: the master's minimum, anything, a slave's worth, none's
MINIMUMS: list[list[Resources] | None] = [
    None,
    [],
    [Resources(cpus=2)],
    [Resources(cpus=64)],  # (fits no slave: it leaves the order, `hopeless`)
]


class NeverKept(dict):  # type: ignore[type-arg]
    """An allocator's `lone` that keeps nothing: every round walks the order."""

    def __setitem__(self, key: object, value: object) -> None:
        pass


def change(a: Allocator, op: str, i: int, now: float) -> None:
    """One change of the books a property test draws (`start`: three slaves and three
    frameworks to begin with); an op of no change here (a round, say) changes nothing."""
    fid, sid = f"f{i}", f"s{i}"
    if op == "start":
        for n in range(3):
            a.add_slave(f"s{n}", Resources(cpus=n + 1, mem=100 * (n + 1)))
            a.add_framework(f"f{n}", role=f"r{n}")
    elif op == "slave+" and sid not in a.slaves:
        a.add_slave(sid, Resources(cpus=i + 1, mem=100 * (i + 1)))
    elif op == "fw+" and fid not in a.frameworks:
        a.add_framework(fid, role=f"r{i}")
    elif fid not in a.frameworks:
        return
    elif op == "fw-":
        a.remove_framework(fid)
    elif op in ("suppress", "revive", "deactivate", "activate"):
        getattr(a, op)(fid)
    elif op == "minimum":
        a.set_min_allocatable(fid, MINIMUMS[int(now * 2) % len(MINIMUMS)])
    elif op == "hold" and f"s{i % 3}" in a.slaves:
        a.reserve(f"s{i % 3}", fid, Resources(cpus=1), now + 2.0)  # (preemption's)


def replay(
    ops: list[tuple[str, int]], both: tuple[Allocator, ...], held: list[tuple[str, str, Resources]]
) -> Iterator[tuple[str, int, float]]:
    """The drawn changes made to each allocator (`change`: three slaves and three
    frameworks to begin with), half a second apart (`wait`: longer); each op is given back
    with its index and time for the test's own. `held`: what the test holds of the offers,
    a framework's gone with it."""
    for a in both:
        change(a, "start", 0, 0.0)
    now = 0.0
    for op, i in ops:
        now += 0.5
        for a in both:
            change(a, op, i, now)
        if op == "wait":
            now += 2.0 * i  # (filters of 3 s lapse meanwhile, or not)
        elif op == "fw-":
            held[:] = [h for h in held if h[0] != f"f{i}"]
        yield op, i, now


def kept_and_walked(policy: str) -> tuple[Allocator, Allocator]:
    """Two allocators of `policy`: one keeping who refuses each slave, as the master's
    does, and one keeping nothing of it (every round walks the order)."""
    kept, walked = Allocator(policy), Allocator(policy)
    walked._lone = walked._refusing.lone = NeverKept()
    return kept, walked


def answer_both(
    kept: Allocator,
    walked: Allocator,
    op: str,
    i: int,
    now: float,
    held: list[tuple[str, str, Resources]],
    declines: Callable[[str, Millis], bool],
    *,
    refuse_released: bool,
    simulated: bool,
    full: bool,
) -> None:
    """A drawn op's offers on both: `release` gives a held offer back to each (refused for
    3 s if `refuse_released`); `round` makes the same offers of both (of every slave for
    `kept` if `full`), declined as the round makes them if `simulated`, else the ones
    `declines` booked and given back refused for 3 s; the rest are held."""
    both = (kept, walked)
    if op == "release" and held:
        f, s, r = held.pop(i % len(held))
        for a in both:
            a.recover(f, s, r, refuse_seconds=3 if refuse_released else None, now=now)
    elif op == "round":
        told = whole_or_nothing(declines, 3) if simulated else None
        made = kept.allocate(now, full=full, at_once=told)
        assert made == walked.allocate(now, full=True, at_once=told)
        for o in made:  # (offers declined as the round made them are not among them)
            if declines(o.framework_id, dict(o.resources.millis)):  # (booked: declined)
                for a in both:
                    a.recover(o.framework_id, o.slave_id, o.resources, refuse_seconds=3, now=now)
            else:
                held.append((o.framework_id, o.slave_id, o.resources))


def agree(kept: Allocator, walked: Allocator, now: float) -> None:
    """Both have the same order, allocations and filters standing at `now`."""
    assert list(kept.order()) == list(walked.order())
    for fid, fw in kept.frameworks.items():
        assert kept.allocation(fid) == walked.allocation(fid)
        standing = {s: f for s, f in fw.filters.items() if f.expires > now}
        theirs = walked.frameworks[fid].filters
        assert standing == {s: f for s, f in theirs.items() if f.expires > now}
