"""Offers declined as they are made (`Allocator.allocate`'s `declines`): a caller whose
frameworks answer at once (the simulator's) says, as a round picks a framework for a
slave, whether it would launch nothing there. Such an offer is not booked -- neither
the slave's free resources nor the framework's hold on it change, since the answer
would give them straight back -- but for the rest of the round it counts in the order's
books, as a booked offer would: the framework stands where a booked offer would have put
it, and the next slaves go to whoever is lowest then. At the round's end what each
framework was offered so is taken back out of the order's books at once (one sum a
framework, not one an offer). What the round then returns is the same offers in the
same order as without `declines`, those declined marked so; each has its decline filter
already (`refuse`, as the recovery of a declined offer would set it).

Only a round's usual pick is asked (`picking`): a preemption's hold or a slave holding
reservations is offered as always, booked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from master.allocation.ledger import Allocation, Declines, FrameworkBook, Picked
from master.allocation.role_order import RoleOrder
from master.allocation.sorter import Millis, Sorter
from protocol.wire.resources import Resources, add_millis

Pick = Callable[[str, Millis, float], Picked]  # a round's pick: a slave, its free, now
Refuse = Callable[[str, str, Mapping[str, int]], None]  # a framework refuses an offer


class Unbooked:
    def __init__(
        self,
        declines: Declines,
        refuse: Refuse,
        role_frameworks: Mapping[str, Sorter],
        roles: RoleOrder,
        frameworks: Mapping[str, FrameworkBook],
    ) -> None:
        self.declines = declines
        self.refuse = refuse
        self._role_frameworks = role_frameworks
        self._roles = roles
        self._frameworks = frameworks
        self._offered: dict[str, Millis] = {}  # by framework: what the round offered it so

    def picking(self, pick: Pick, offered: Callable[[Allocation], None]) -> Pick:
        """`pick`, save that an offer its framework declines is `offered` declined (and
        counted in the order's books), and the slave is left as if nobody wanted it."""
        declines, add, refuse = self.declines, self.add, self.refuse
        resources_of = Resources.from_millis

        def unbooked(slave_id: str, free: Millis, now: float) -> Picked:
            picked = pick(slave_id, free, now)
            if picked is None or not declines(*picked):
                return picked
            resources = resources_of(picked[1])
            add(picked[0], resources)
            offered(Allocation(picked[0], slave_id, resources, None, True))  # (declined)
            refuse(picked[0], slave_id, resources.millis)
            return None

        return unbooked

    def add(self, framework_id: str, resources: Resources) -> None:
        """An offer declined as it was made: in the order's books until `end`."""
        role = self._frameworks[framework_id].role
        self._role_frameworks[role].allocated(framework_id, resources)
        self._roles.allocated(role, resources)
        offered = self._offered.get(framework_id)
        if offered is None:
            self._offered[framework_id] = dict(resources.millis)
        else:
            add_millis(offered, resources.millis)

    def end(self) -> None:
        """The round is over: what it offered and was declined leaves the order's books."""
        for framework_id, offered in self._offered.items():
            role = self._frameworks[framework_id].role
            resources = Resources.from_millis(offered)
            self._role_frameworks[role].unallocated(framework_id, resources)
            self._roles.unallocated(role, resources)
        self._offered.clear()
