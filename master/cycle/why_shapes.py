"""What a framework asked for -- its min_offer, the tasks of its last Request -- against
what slaves have, for why (`master.cycle.why`): the shapes an answer weighs, whether one
fits any slave at all, and the reason that says which resource is short, by how much.

A tenant declares up to 100 task shapes (20 of min_offer), and each would be asked of
every slave: an answer weighs the few smallest distinct ones, and first against the
largest amount of each resource on any slave (one pass an answer), so that a shape no
slave could hold costs no pass over the slaves (review 53).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from master.allocation.allocator import Allocator
from master.allocation.ledger import fits_one
from master.allocation.sorter import Millis
from master.cycle.state import State
from master.cycle.why_words import Reason, names, res, user
from protocol.wire.why_codes import Figure, WhyCode

# task shapes (of its Request) and min_offer shapes weighed at most, the smallest distinct
# ones: a tenant declares up to 100 (20), and each is asked of every slave; more declared
# are said, not weighed (review 53: 100 shapes made one answer on 10,000 slaves 2-4 s)
SHAPES_WEIGHED = 5


@dataclass(frozen=True, slots=True)
class Shapes:
    """Shapes it asked for (any one of them will do): its min_offer, or the tasks of its
    last Request, as weighed in an answer -- the SHAPES_WEIGHED smallest distinct ones."""

    weighed: list[Millis]  # the smallest first: those some slave may hold, else all
    declared: int  # distinct shapes it declared
    # what each slave is asked: the weighed shapes within the largest amount of each
    # resource on any slave (one that is not fits no slave; if none is, the first alone:
    # it fits no slave, and says so of each at the cost of one)
    scan: list[Millis]
    may_fit: bool  # some weighed shape is within the largest amounts

    def __bool__(self) -> bool:
        return bool(self.weighed)

    def note(self) -> str:
        """What an answer says of the shapes it did not weigh ("": none)."""
        if self.declared <= len(self.weighed):
            return ""
        return f" (the {len(self.weighed)} smallest of its {self.declared} shapes weighed)"


_NONE = Shapes([], 0, [], False)


def largest_amounts(a: Allocator) -> Millis:
    """The largest amount of each resource any active slave has (empty), one pass."""
    out: Millis = {}
    for slave in a.slaves.values():
        if slave.active:
            for name, amount in slave.total.millis.items():
                if amount > out.get(name, 0):
                    out[name] = amount
    return out


def weighed(shapes: list[Millis] | None, largest: Millis) -> Shapes:
    """`shapes` as an answer weighs them (see `Shapes`): de-duplicated, those within
    `largest` first, the smallest (as fractions of `largest`) first."""
    if not shapes or not all(shapes):  # (an empty shape: anything holds it)
        return _NONE
    distinct = list({tuple(sorted(s.items())): s for s in shapes}.values())
    within_largest = [s for s in distinct if fits_one(largest, [s])]

    def size(shape: Millis) -> tuple[float, list[tuple[str, int]]]:
        return (
            sum(v / largest[n] if largest.get(n) else float(v) + 1e9 for n, v in shape.items()),
            sorted(shape.items()),
        )

    weighed = sorted(within_largest or distinct, key=size)[:SHAPES_WEIGHED]
    scan = weighed if within_largest else weighed[:1]
    return Shapes(weighed, len(distinct), scan, bool(within_largest))


def never_fits(a: Allocator, least: Shapes, tasks: Shapes, largest: Millis) -> list[Reason]:
    """Its declared minimum, or the task it asked for (`tasks`), is more than any slave
    has at all. (A shape past `largest` fits no slave: no slave is visited for it.)"""
    active = [slave.total.millis for slave in a.slaves.values() if slave.active]

    def never(shapes: Shapes) -> bool:
        if not shapes or not active:
            return False
        return not shapes.may_fit or not any(fits_one(t, shapes.scan) for t in active)

    never_least, never_tasks = never(least), never(tasks)
    if not never_least and not never_tasks:
        return []  # (the usual: both fit some slave, and nothing is said)
    totals = {s: slave.total.millis for s, slave in a.slaves.items() if slave.active}
    out = []
    if never_least:
        out.append(short(WhyCode.MIN_OFFER_FITS_NO_SLAVE, "its min_offer", least, totals,
                          ever=True))  # fmt: skip
    if never_tasks:
        out.append(short(WhyCode.TASK_FITS_NO_SLAVE, "the task it asked for", tasks, totals,
                          ever=True))  # fmt: skip
    return out


def fits_no_free(tasks: list[Millis], free: Mapping[str, Millis]) -> bool:
    """The task it asked for fits no slave's free resources now (it would fit some slave
    empty): true beside the reasons above, which say why the room is taken."""
    return bool(tasks and free) and not any(fits_one(f, tasks) for f in free.values())


def fitting_no_free(tasks: Shapes, free: Mapping[str, Millis]) -> Reason:
    return short(WhyCode.TASK_FITS_NO_SLAVE, "the task it asked for", tasks, free)


def tasks_of(state: State, framework_id: str, now: float) -> list[Millis]:
    """The tasks it declared it still wants (its last Request)."""
    wish = state.wish(framework_id, now)
    return [] if wish is None else [t for t, n in wish.demand or [] if n > 0 and t]


def short(
    code: WhyCode,
    what: str,
    wanted: Shapes,
    have: Mapping[str, Mapping[str, int]],
    *,
    ever: bool = False,
    of: str = "",
) -> Reason:
    """`wanted` (any one of) against what each slave `have`s: the resource short, by how
    much, against the largest amount of each on any slave. The shape said is the one
    least short of those largest amounts (of several none is short of, the one nearest to
    a slave): two passes over the slaves, three at most per shape weighed."""
    shapes = wanted.weighed
    asked = {n for w in shapes for n in w}
    largest = {n: max((h.get(n, 0) for h in have.values()), default=0) for n in asked}
    gaps = [sum(max(0, v - largest[n]) / v for n, v in w.items() if v) for w in shapes]
    nearest = [w for w, g in zip(shapes, gaps, strict=True) if g == min(gaps)]
    # (of several none is short of, the one nearest to a slave)
    need = nearest[0] if len(nearest) == 1 else min(nearest, key=lambda w: shortfall(w, have)[1])
    best_slave, _ = shortfall(need, have)
    largest = {n: largest[n] for n in need}
    short = {n: v - largest[n] for n, v in need.items() if v > largest[n]}
    if not short:  # each resource is somewhere, but no one slave has all of them
        short = {n: v - have[best_slave].get(n, 0) for n, v in need.items()
                 if v > have[best_slave].get(n, 0)}  # fmt: skip
    fits = "even empty" if ever else "with what it has free now"
    most = "the most any slave has" + ("" if ever else " free")
    gaps_said = ", ".join(res({n: v}) for n, v in sorted(short.items()))
    where, none = (f"{of}: ", "none of them") if of else ("", "no slave")
    numbers: dict[str, Figure] = {
        "need": user(need),
        "largest": user(largest),
        "short": user(short),
        "closest_slave": best_slave,
        "of": "total" if ever else "free",
        "slaves": names(sorted(have)),
    }
    if wanted.note():
        numbers |= {"shapes": float(wanted.declared), "weighed": float(len(shapes))}
    return Reason(
        code=code,
        message=f"{where}{what} ({res(need)}) fits {none} {fits}: short of {gaps_said} "
        f"({most}: {res(largest)}; the closest slave is {best_slave}){wanted.note()}",
        numbers=numbers,
    )


def shortfall(need: Millis, have: Mapping[str, Mapping[str, int]]) -> tuple[str, float]:
    """The slave nearest to holding `need` (the least missing, as fractions of it)."""
    best, gap = "", float("inf")
    for slave_id, h in have.items():
        missing = sum(max(0, v - h.get(n, 0)) / v for n, v in need.items() if v)
        if missing < gap:
            best, gap = slave_id, missing
    return best, gap
