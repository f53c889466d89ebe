"""The allocator's books: every slave's total and what is allocated on it, per framework;
every framework's role, filters and offer filters; and the small tests a round asks of
every slave it visits (with, without quotas, its pick: `first_wanting`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from master.allocation.lone import NOBODY, Refusals
from master.allocation.role_order import RoleOrder
from master.allocation.sorter import Millis, Sorter
from protocol.wire.resources import CPUS, MEM, PORTS, SCALE, Resources, add_millis, holds

# Mesos offers a slave only if at least this much of cpus or mem is free: smaller crumbs
# would be offered and declined forever (its --min_allocatable_resources' default).
MIN_CPUS, MIN_MEM = int(0.01 * SCALE), 32 * SCALE

Floor = Callable[[Mapping[str, int]], bool]  # whether free resources are worth an offer


class Allocation(NamedTuple):
    """One offer a round decided: `resources` of a slave, to a framework -- a multi-role
    one's in `role` (None: the framework's one role). (A named tuple, immutable, made
    once an offer: a frozen dataclass costs eight times as much to make.)"""

    framework_id: str
    slave_id: str
    resources: Resources
    role: str | None = None


Answer = Callable[[str, str, Millis], "Millis | None"]
"""A framework's answer to an offer of a slave's free resources, asked as a round picks it
(a shell whose frameworks answer at once, the simulator's, knows it): given the framework,
the slave and those free resources, what of them it uses, or None if it declines them
whole. What it uses is booked (the free resources themselves: all of them); the rest it
refuses (`AtOnce.rest_for`), for others in the next round. A whole decline was never
outstanding: it is not booked and counts nowhere (no share, no allocation in the
tie-break); its framework refuses the slave (`Refused`) and the round offers the slave
on to the next in order, as the master's next round would once the decline is back."""


class AtOnce(NamedTuple):
    """Frameworks that answer each offer as a round makes it (`Answer`), and how long a
    framework then refuses a slave: what it declined whole, and what it left of an offer
    it used in part (as `OfferCycle.decline` keeps each: None or 0, no filter). (A named
    tuple: the simulator makes one a round, and a frozen dataclass costs four times as
    much to make.)"""

    answer: Answer
    declined_for: float | None
    rest_for: float | None = None


Lapse = tuple[float, str]  # (when a framework's filter on a slave lapses, the framework)

Refused = Callable[[list[str], str, Millis, bool, bool, list[Lapse]], None]
"""Frameworks that declined a slave's free resources as one walk offered them in turn
(`Answer`), the slave, those free resources, whether nobody took them, whether every
framework wanting offers refuses them now (the walk passed each for a decline, now or
standing: known so only from a walk of roles side by side), and then when the filters
it passed over standing lapse (each framework wanting offers but the decliners)."""


Again = Callable[[list[str], str, Refusals], None]
"""Frameworks whose filters on a slave had lapsed, every other one refusing it still (the
slave's `Refusals`, its free as they were), declined it again as a round offered it in
turn (`Answer`), nobody taking it: what `Refused` does with them, told with the
refusals (most declines the simulator's rounds ask for are these)."""


@dataclass(slots=True)
class Filter:
    """Declined resources of one slave, refused until `expires` (Mesos's refuse_seconds).

    It holds only while what the slave has free is within what was declined: once more is
    free than was refused, the framework is offered it again.
    """

    expires: float
    refused: Mapping[str, int]  # (the declined resources' millis, read in place)


@dataclass(slots=True)
class SlaveBook:
    slave_id: str
    total: Resources  # (its hostname and attributes: the master's books, master.books)
    by_framework: dict[str, Millis] = field(default_factory=dict)
    unowned: Millis = field(default_factory=dict)  # used by frameworks we do not know (yet)
    active: bool = True  # off while its slave is disconnected: nothing of it is offered
    # total - allocated for every resource of the total (zeros kept), kept as what is
    # allocated changes: a round reads it for every slave it visits
    unallocated: Millis = field(default_factory=dict)
    # its reserved identities, with the role each is for (`reserved`); empty for most
    # slaves, which the round then offers as it always has
    reserved: dict[str, str] = field(default_factory=dict)
    # its shared volumes (some of `reserved`): allocated in copies (`shared`); empty but
    # where a framework made one
    shared: frozenset[str] = frozenset()
    # frameworks that may refuse it (a decline filter): those that declined it since they
    # were last counted (`Allocator._declined_by_all`)
    refused_by: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.unallocated = dict(self.total.millis)

    def free(self) -> Millis:
        return dict(self.unallocated)

    def free_within(self, total: Resources) -> Millis:
        """What would be free were its total `total` (it came back with another): what
        is allocated here stays. AllocatorError if `total` does not hold that."""
        allocated = self.allocated()
        if not holds(total.millis, allocated):
            short = Resources.from_millis(allocated).subtract_clamped(total)
            raise AllocatorError(f"slave {self.slave_id}'s new total {total} lacks {short} in use")
        return {k: v - allocated.get(k, 0) for k, v in total.millis.items()}

    def allocated(self) -> Millis:
        """What is offered or used here, by anyone (summed when asked: a round changes
        only `by_framework` and `unallocated`, once an offer)."""
        out = dict(self.unowned)
        for held in self.by_framework.values():
            add_millis(out, held)
        for key in self.shared:  # (however many copies are out: the volume, once)
            if out.get(key):
                out[key] = self.total.millis[key]
        return {k: v for k, v in out.items() if v}


@dataclass(slots=True)
class FrameworkBook:
    framework_id: str
    role: str
    active: bool = True
    suppressed: bool = False
    filters: dict[str, Filter] = field(default_factory=dict)
    slaves: set[str] = field(default_factory=set)  # where it holds resources
    # offer only what holds one of these (its offer filters); [] anything; None: the
    # master's minimum (`master_floor`)
    min_allocatable: list[Millis] | None = None
    shared: bool = False  # offered shared volumes (its SHARED_RESOURCES capability)
    hopeless: bool = False  # its offer filters fit no slave (`master.allocation.hopeless`)

    @property
    def wants_offers(self) -> bool:
        return self.active and not self.suppressed and not self.hopeless


Picked = tuple[str, Millis] | None  # the framework a slave is offered to, and what of it


class AllocatorError(ValueError):
    """A call that does not fit the books (unknown framework or slave, double release)."""


def allocatable(free: Mapping[str, int]) -> bool:
    # (no generators here: a round asks this of every slave it visits)
    if free.get(CPUS, 0) >= MIN_CPUS or free.get(MEM, 0) >= MIN_MEM:
        return True
    # a slave with neither cpus nor mem (custom resources only) is offered whatever it has;
    # ports alone are worth no offer (what a quota cut leaves: nothing runs on a port)
    if CPUS in free or MEM in free:
        return False
    for name, amount in free.items():  # noqa: SIM110
        if amount > 0 and name != PORTS:
            return True
    return False


def anything(free: Mapping[str, int]) -> bool:
    for v in free.values():  # noqa: SIM110 (a plain loop: asked of every slave a round visits)
        if v > 0:
            return True
    return False


def master_floor(minimum: list[Millis] | None) -> Floor:
    """The master's minimum offer (Mesos's --min_allocatable_resources), which a
    framework's own offer filters replace: None is Mesos's default (`allocatable`),
    [] anything, else free resources must hold one of `minimum`."""
    if minimum is None:
        return allocatable
    if not minimum:
        return anything
    floors = [dict(m) for m in minimum]
    return lambda free: fits_one(free, floors)


def fits_one(free: Mapping[str, int], floors: list[Millis]) -> bool:
    for floor in floors:  # (a plain loop, holds inlined: asked of every slave visited)
        for name, amount in floor.items():
            if free.get(name, 0) < amount:
                break
        else:
            return True
    return False


def least_of(floors: list[Millis]) -> tuple[str, int, str, int]:
    """Two resources every one of `floors` names, with the least any of them asks of
    each (("", 0) where fewer are common to all): a slave with less than that free of
    either holds none of them -- the round's test before `fits_one`, two lookups inlined,
    where most slaves a round visits hold none (a framework's offer filter grew smaller:
    every slave is visited)."""
    common = set(floors[0]).intersection(*floors[1:]) if floors else set()
    least = sorted((k, min(f[k] for f in floors)) for k in common)[:2]
    least += [("", 0)] * (2 - len(least))
    (k1, v1), (k2, v2) = least
    return k1, v1, k2, v2


def within(free: Millis, refused: Mapping[str, int]) -> bool:
    """Nothing of `free` is more than `refused` (a plain loop: asked of every filter a
    round meets)."""
    for k, v in free.items():  # noqa: SIM110
        if v > 0 and refused.get(k, 0) < v:
            return False
    return True


def can_use(fw: FrameworkBook, offerable: Millis, floor: Floor) -> bool:
    """Whether `offerable` holds one of `fw`'s offer filters, or without its own, the
    master's minimum (`floor`)."""
    minimum = fw.min_allocatable
    if minimum is None:
        return floor(offerable)
    return fits_one(offerable, minimum) if minimum else anything(offerable)


def wants_offer(
    fw: FrameworkBook, slave_id: str, offerable: Millis, now: float, floor: Floor
) -> bool:
    """Whether `fw` is to be offered `offerable` of this slave: something it can use
    (its offer filters, or the master's minimum `floor`), and not what it declined here
    (its decline filter)."""
    if not can_use(fw, offerable, floor):
        return False  # nothing it can use here
    return not declined(fw, slave_id, offerable, now)


def declined(fw: FrameworkBook, slave_id: str, offerable: Millis, now: float) -> bool:
    """Whether `fw` declined `offerable` of this slave and its filter stands (one that
    lapsed, or that more is free than it refused, is dropped)."""
    f = fw.filters.get(slave_id)
    if f is not None:
        # (the usual refusal: the very resources free now, compared at C speed first)
        if f.expires > now and (offerable == f.refused or within(offerable, f.refused)):
            return True
        del fw.filters[slave_id]  # expired, or more is free than was refused
    return False


def first_wanting(
    roles: RoleOrder,
    role_frameworks: Mapping[str, Sorter],
    frameworks: Mapping[str, FrameworkBook],
    now: float,
    floor: Floor,
    floored: bool = False,
    lone: Mapping[str, Refusals] | None = None,
    answer: Answer | None = None,
    refused: Refused | None = None,
    again: Again | None = None,
) -> Callable[[str, Millis, float], Picked]:
    """A round's pick without quotas: the first framework in order that wants the slave
    gets all of it. Each role's order is read in place, and the one function `first` is
    given serves the whole round, reading the slave of the moment (the round's hot path:
    no closure made per slave). `floor` is the master's minimum offer; `floored`: every
    slave the round asks about holds it already. `lone`: slaves every framework in the
    order refuses, or all but one (`master.allocation.lone`): nobody, or that one alone,
    is asked.

    `answer` (with `refused`): each framework the walk would offer the slave to is asked
    what of it it uses (`Answer`); one that declines is passed over as one refusing it is, and
    the walk goes on, so the slave goes to the first that takes it, or to nobody. Those
    that declined are told to `refused` once the walk is over (their filters set then:
    the walk reads none of them again). Roles side by side are walked once, asking each
    framework as it is met; on a tree, whose walk may look at a role it does not choose,
    only the framework chosen is asked, and the walk made again past it if it declines
    (roles side by side: `offered_in_turn`, which tells `again` of the one a slave's
    refusals name declining it again, where given)."""
    if answer is not None and isinstance(roles, Sorter):
        assert refused is not None
        return offered_in_turn(
            roles, role_frameworks, frameworks, now, floor, floored, lone, answer, refused, again
        )
    return _walked(roles, role_frameworks, frameworks, now, floor, floored, lone, answer, refused)


def _walked(
    roles: RoleOrder,
    role_frameworks: Mapping[str, Sorter],
    frameworks: Mapping[str, FrameworkBook],
    now: float,
    floor: Floor,
    floored: bool,
    lone: Mapping[str, Refusals] | None,
    answer: Answer | None,
    refused: Refused | None,
) -> Callable[[str, Millis, float], Picked]:
    """`first_wanting`'s pick that walks the order for each slave (a function of its own:
    the cells its closures share are made only when it is the one, not once a round of
    the simulator's, whose pick is `offered_in_turn`)."""
    slave_id = ""  # the slave of the moment, and what it has free (set by `pick`)
    free: Millis = {}
    enough = False  # whether it is the master's minimum
    rewalk = answer is not None  # (on a tree: asked of the one chosen)
    decliners: list[str] = []  # those that declined the slave of the moment

    def wanted(framework_id: str) -> bool:
        # wants_offer's usual answers without the call: the master's minimum or its own
        # offer filters held, and nothing declined here -- or a decline standing (a round
        # passes over a framework for every slave it declined)
        fw = frameworks[framework_id]
        minimum = fw.min_allocatable
        if minimum is None:
            if not enough and not wants_offer(fw, slave_id, free, now, floor):
                return False  # (else any filter it had is gone: the one below is None)
        elif not (fits_one(free, minimum) if minimum else anything(free)):
            return False  # (can_use)
        f = fw.filters.get(slave_id)
        if f is not None:
            if f.expires > now and (free == f.refused or within(free, f.refused)):
                return False
            del fw.filters[slave_id]  # expired, or more is free than was refused (`declined`)
        return not (rewalk and decliners and framework_id in decliners)

    def answered(framework_id: str) -> Millis | None:
        used = answer(framework_id, slave_id, free)  # type: ignore[misc]
        if used is None:
            decliners.append(framework_id)
        return used

    def pick(visited: str, unallocated: Millis, _: float) -> Picked:
        nonlocal slave_id, free, enough
        slave_id, free = visited, unallocated
        enough = floored or floor(free)
        chosen: str | None
        if lone and (refusals := lone.get(visited)) is not None:
            only = refusals.lapsed(free, now)
            if only is not None:  # (the others refuse it still)
                used: Millis | None = free
                chosen = None if only == NOBODY or not wanted(only) else only
                if chosen is not None and rewalk and (used := answered(chosen)) is None:
                    chosen = None
                if decliners:
                    refused(decliners, visited, free, chosen is None, False, [])  # type: ignore[misc]
                    decliners.clear()
                return (chosen, used) if chosen is not None and used is not None else None
        chosen = roles.first_framework(role_frameworks, wanted)
        uses: Millis | None = free
        if rewalk:
            while chosen is not None and (uses := answered(chosen)) is None:
                chosen = roles.first_framework(role_frameworks, wanted)
        if decliners:  # (`refused` keeps no list: this one is cleared for the next)
            refused(decliners, visited, free, chosen is None, False, [])  # type: ignore[misc]
            decliners.clear()
        return (chosen, uses) if chosen is not None and uses is not None else None

    return pick


def offered_in_turn(
    roles: Sorter,
    role_frameworks: Mapping[str, Sorter],
    frameworks: Mapping[str, FrameworkBook],
    now: float,
    floor: Floor,
    floored: bool,
    lone: Mapping[str, Refusals] | None,
    answer: Answer,
    refused: Refused,
    again: Again | None = None,
) -> Callable[[str, Millis, float], Picked]:
    """`first_wanting`'s pick for roles side by side whose frameworks are asked whether
    they take it (`answer`) as the walk offers them the slave: in the simulator most
    of what a round does. The walk is one list while no client moves (`Sorter.walk_order`:
    between two offers a round books, every slave's walk reads the same), with `wanted`
    inlined; on a slave every framework refused (`lone`) only those whose
    filters lapsed are walked (the others pass over it) -- one alone, the usual, is asked
    without a walk, and its decline told to `again` where given; and a walk that passes
    every framework over keeps when the filters it passed lapse, so that `refused` need
    not read them again."""
    walk_order = roles.walk_order

    def pick(slave_id: str, free: Millis, _: float) -> Picked:
        enough = floored or floor(free)
        walk: Iterable[str]
        lapsed: set[str] | None = None  # (lone: those to ask, or the one; None: everyone)
        refusals = lone.get(slave_id) if lone else None
        if refusals is not None and refusals.free == free:
            h = refusals.lapses
            if h[0][0] > now:
                return None  # everyone refuses it still
            if (len(h) > 1 and h[1][0] <= now) or (len(h) > 2 and h[2][0] <= now):
                lapsed = refusals.lapsed_all(now)  # (two or more: asked in order)
                walk = walk_order(role_frameworks)
            else:  # (the usual: one, asked as the walk below would, without it)
                framework_id = h[0][1]
                fw = frameworks[framework_id]
                minimum = fw.min_allocatable
                if minimum is None:
                    if not enough:
                        return None
                elif not (fits_one(free, minimum) if minimum else anything(free)):
                    return None
                f = fw.filters.get(slave_id)
                if f is not None:
                    if f.expires > now and (free == f.refused or within(free, f.refused)):
                        return None  # (its filter stands: passed over)
                    del fw.filters[slave_id]
                used = answer(framework_id, slave_id, free)
                if used is not None:
                    return framework_id, used
                if again is not None:
                    again([framework_id], slave_id, refusals)
                else:
                    refused([framework_id], slave_id, free, True, False, [])
                return None
        else:
            walk = walk_order(role_frameworks)
        decliners: list[str] = []
        standing: list[Lapse] = []  # (when the filters passed over lapse)
        unasked = False  # (one passed over for what it is, not for a decline)
        for framework_id in walk:
            if lapsed is not None and framework_id not in lapsed:
                continue  # (its filter stands: the walk would pass it over)
            fw = frameworks[framework_id]
            minimum = fw.min_allocatable
            if minimum is None:
                if not enough:  # (`can_use`: the master's minimum)
                    unasked = True
                    continue
            elif not (fits_one(free, minimum) if minimum else anything(free)):
                unasked = True
                continue
            f = fw.filters.get(slave_id)
            if f is not None:
                if f.expires > now and (free == f.refused or within(free, f.refused)):
                    standing.append((f.expires, framework_id))
                    continue
                del fw.filters[slave_id]  # expired, or more is free than refused (`declined`)
            used = answer(framework_id, slave_id, free)
            if used is None:
                decliners.append(framework_id)
                continue
            if decliners:
                refused(decliners, slave_id, free, False, False, standing)
            return framework_id, used
        if not decliners:
            return None
        if lapsed is not None and again is not None and refusals is not None:
            again(decliners, slave_id, refusals)  # (those lapsed: `refusals`' own)
        else:  # (a whole walk with none passed over for what it is: all refuse)
            refused(decliners, slave_id, free, True, lapsed is None and not unasked, standing)
        return None

    return pick


def floors_of(frameworks: Iterable[FrameworkBook]) -> list[Millis] | None:
    """The offer filters of the frameworks wanting offers, less those another one's
    undercuts, when every one of them has offer filters of its own (None when one takes
    anything or the master's minimum): a slave holding none of them is of use to
    nobody, and is skipped."""
    floors: list[Millis] = []
    for fw in frameworks:
        if not fw.active or fw.suppressed:
            continue
        if not fw.min_allocatable:
            return None
        for m in fw.min_allocatable:
            if not any(holds(m, f) for f in floors):  # (nothing smaller is there)
                floors = [f for f in floors if not holds(f, m)]
                floors.append(m)
    return floors


def declined_by_all(
    slave: SlaveBook, wanting: Mapping[str, FrameworkBook], free: Millis, now: float
) -> bool:
    """Every framework in `wanting` (those that want offers) declined `free` of `slave` and
    refuses it still: a round would offer it to nobody. Keeps `slave.refused_by` to
    those that do."""
    return standing_refusals(slave, wanting, free, now) is not None


def standing_refusals(
    slave: SlaveBook, wanting: Mapping[str, FrameworkBook], free: Millis, now: float
) -> list[Lapse] | None:
    """`declined_by_all`, and if so when each of the filters lapses, as a heap (what
    `refusals_lapse` reads again: read once here)."""
    # who may refuse it: everyone who declined it since this was last counted (filters
    # go, they are not set elsewhere), so while fewer than want offers, not everyone
    # does, and nobody is asked
    refused_by = slave.refused_by
    if len(refused_by) < len(wanting):
        return None
    sid = slave.slave_id
    lapses: list[Lapse] = []
    for fid, fw in wanting.items():  # (it declined `free` here, and refuses it still)
        f = fw.filters.get(sid)
        if f is None or f.expires <= now or not (free == f.refused or within(free, f.refused)):
            # one does not: nobody else need be asked now; it is no longer counted, nor are
            # those not wanting offers (those not asked may be, which only makes the next
            # count ask again)
            refused_by.intersection_update(wanting)
            refused_by.discard(fid)
            return None
        lapses.append((f.expires, fid))
    slave.refused_by = set(wanting)
    heapq.heapify(lapses)
    return lapses


def refusals_lapse(wanting: Mapping[str, FrameworkBook], slave_id: str) -> list[tuple[float, str]]:
    """When the filter on the slave of each framework in `wanting` lapses, as a heap
    (asked when every one of them refuses it: `declined_by_all`)."""
    lapses = [(fw.filters[slave_id].expires, fid) for fid, fw in wanting.items()]
    heapq.heapify(lapses)
    return lapses
