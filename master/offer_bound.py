"""How many offers one framework holds at most: the master's round shell bounds it, not
the allocation policy (which decides who is offered what, not how much a framework can
answer). Mesos bounds none by default; a framework handed 50,000 offers at once answers
none of them in time. 5,000 is five `Offers` messages of MAX_OFFERS_PER_MESSAGE."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sized
from typing import Protocol

from master.allocation.allocator import Allocator
from master.allocation.ledger import Allocation
from protocol import logs

MAX_OFFERS_HELD = 5_000
OFFERS_HELD_REFUSE = 5.0  # seconds a slave held back from a framework at the bound is not
# offered to it again (the next rounds offer it to others meanwhile)

log = logs.get("master")


class Holder(Protocol):
    @property
    def offers(self) -> Sized: ...


def room(frameworks: Mapping[str, Holder]) -> dict[str, int]:
    """How many more offers each framework may be given in a round (the allocator passes
    a framework by once it is at the bound: `master.allocation.offer_room`)."""
    return {fid: MAX_OFFERS_HELD - len(fw.offers) for fid, fw in frameworks.items()}


def within_bound(
    allocations: list[Allocation], holds: Callable[[str], int]
) -> tuple[list[Allocation], list[Allocation]]:
    """A round's allocations split in two: those that keep each framework within
    MAX_OFFERS_HELD offers (`holds`: how many it holds now), in order; and the rest."""
    room: dict[str, int] = {}
    offered: list[Allocation] = []
    held_back: list[Allocation] = []
    for a in allocations:
        left = room.setdefault(a.framework_id, MAX_OFFERS_HELD - holds(a.framework_id))
        if left > 0:
            room[a.framework_id] = left - 1
            offered.append(a)
        else:
            held_back.append(a)
    return offered, held_back


def bounded(
    allocator: Allocator,
    allocations: list[Allocation],
    frameworks: Mapping[str, Holder],
    now: float,
) -> list[Allocation]:
    """The allocations to offer; the rest go back to the pool, kept from their framework
    for OFFERS_HELD_REFUSE (as a decline's filter) so that the next rounds offer them to
    others."""
    offered, held_back = within_bound(allocations, lambda f: len(frameworks[f].offers))
    for a in held_back:
        allocator.recover(
            a.framework_id, a.slave_id, a.resources, refuse_seconds=OFFERS_HELD_REFUSE, now=now
        )
    if held_back:
        log.info("offers.held_back", offers=len(held_back), bound=MAX_OFFERS_HELD)
    return offered
