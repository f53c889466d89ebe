"""Holds: room kept on a slave for one framework until a deadline. Preemption frees room
for a framework that starved; the hold keeps anyone else from snatching it first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from master.allocation.ledger import FrameworkBook
from master.allocation.sorter import Millis
from protocol.wire.resources import add_millis, holds, sub_millis


@dataclass(slots=True)
class Reservation:
    """Room held on a slave for one framework until `until`."""

    framework_id: str
    resources: Millis
    until: float


class Holds:
    def __init__(self) -> None:
        self.by_slave: dict[str, list[Reservation]] = {}

    def add(
        self, slave_id: str, framework_id: str, resources: Mapping[str, int], until: float
    ) -> None:
        self.by_slave.setdefault(slave_id, []).append(
            Reservation(framework_id, dict(resources), until)
        )

    def room(self, slave_id: str, free: Millis) -> Millis:
        """`free` less what is held on the slave (below zero where a hold waits for room
        still in use)."""
        room = dict(free)
        for hold in self.by_slave.get(slave_id, []):
            for n, v in hold.resources.items():
                room[n] = room.get(n, 0) - v
        return room

    def live(self, slave_id: str, now: float, known: Mapping[str, object]) -> list[Reservation]:
        """The slave's holds that still stand at `now`, for frameworks still `known`."""
        held = self.by_slave.get(slave_id)
        if not held:
            return []
        held[:] = [r for r in held if r.until > now and r.framework_id in known]
        if not held:
            del self.by_slave[slave_id]
        return held

    def pick(
        self,
        slave_id: str,
        held: list[Reservation],
        free: Millis,
        frameworks: Mapping[str, FrameworkBook],
        offerable: Callable[[str, Millis], Millis],
    ) -> tuple[str, Millis] | None:
        """The first framework whose held room is free is offered just that room (all of
        its holds here that fit, within what `offerable` lets its role have), and the
        holds are used up; the rest of the slave waits for the other holds on it."""
        for first in held:
            fw = frameworks[first.framework_id]
            if not fw.active or fw.suppressed:
                continue
            left = offerable(fw.role, free)
            offer: Millis = {}
            for hold in [h for h in held if h.framework_id == first.framework_id]:
                if holds(left, hold.resources):
                    held.remove(hold)
                    add_millis(offer, hold.resources)
                    sub_millis(left, hold.resources, "the room left")
            if offer:
                if not held:
                    del self.by_slave[slave_id]
                fw.filters.pop(slave_id, None)  # it was freed for this framework
                return first.framework_id, offer
        return None
