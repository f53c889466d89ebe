"""How many offers one framework holds at most: the offer cycle bounds it, not the
allocation policy (which decides who is offered what, not how much a framework can
answer). Mesos bounds none by default; a framework handed 50,000 offers at once answers
none of them in time. 5,000 is five `Offers` messages of MAX_OFFERS_PER_MESSAGE."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from master.allocation.ledger import Allocation

MAX_OFFERS_HELD = 5_000
OFFERS_HELD_REFUSE = 5.0  # seconds a slave held back from a framework at the bound is not
# offered to it again (the next rounds offer it to others meanwhile)


def room(held: Mapping[str, int], frameworks: Iterable[str], slaves: int) -> dict[str, int]:
    """How many more offers each framework may be given in a round of `slaves` slaves
    (`held`: how many it holds now; the allocator passes a framework by once it is at the
    bound: `master.allocation.offer_room`). Only frameworks the round could take to the
    bound are named: a round offers each slave once, so one with room for every slave
    needs no counting (and with none named, the round counts nothing)."""
    most = MAX_OFFERS_HELD
    if slaves > most:  # every framework could reach it in one round
        return {fid: most - held.get(fid, 0) for fid in frameworks}
    return {fid: most - n for fid, n in held.items() if most - n < slaves}


def within_bound(
    allocations: list[Allocation], held: Mapping[str, int]
) -> tuple[list[Allocation], list[Allocation]]:
    """A round's allocations split in two: those that keep each framework within
    MAX_OFFERS_HELD offers (`held`: how many it holds now), in order; and the rest."""
    left_of: dict[str, int] = {}
    offered: list[Allocation] = []
    held_back: list[Allocation] = []
    for a in allocations:
        left = left_of.setdefault(a.framework_id, MAX_OFFERS_HELD - held.get(a.framework_id, 0))
        if left > 0:
            left_of[a.framework_id] = left - 1
            offered.append(a)
        else:
            held_back.append(a)
    return offered, held_back
