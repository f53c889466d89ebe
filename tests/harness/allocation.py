"""Allocation driven as frameworks would drive it, with no master: every offer filled with
tasks and the rest given back, round after round."""

from __future__ import annotations

from collections.abc import Callable

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
