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
from protocol.wire.resources import Resources

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
        self._alone: dict[str, int] = {}  # ... and how often, where it is its role's one

    def picking(self, pick: Pick, offered: Callable[[Allocation], None]) -> Pick:
        """`pick`, save that an offer its framework declines is `offered` declined (and
        counted in the order's books), and the slave is left as if nobody wanted it."""
        declines, add, refuse = self.declines, self.add, self.refuse
        resources_of = Resources.from_millis

        def unbooked(slave_id: str, free: Millis, now: float) -> Picked:
            picked = pick(slave_id, free, now)
            if picked is None:
                return None
            framework_id, offer = picked
            if not declines(framework_id, offer):
                return picked
            resources = resources_of(offer)
            add(framework_id, resources)
            offered(Allocation(framework_id, slave_id, resources, None, True))  # (declined)
            refuse(framework_id, slave_id, resources.millis)
            return None

        return unbooked

    def add(self, framework_id: str, resources: Resources) -> None:
        """An offer declined as it was made: in the order's books until `end`. (A role
        of one framework counts it in the role's order alone, and in the framework's own
        sorter only as one allocation more: that sorter has nobody to order it against,
        and at the end the resources would leave it again.)"""
        role = self._frameworks[framework_id].role
        inner = self._role_frameworks[role]
        if len(inner) == 1:
            self._alone[framework_id] = self._alone.get(framework_id, 0) + 1
        else:
            inner.allocated(framework_id, resources)
        self._roles.allocated(role, resources)
        offered = self._offered.get(framework_id)
        if offered is None:
            self._offered[framework_id] = dict(resources.millis)
        else:
            for k, v in resources.millis.items():  # (add_millis inlined: once an offer)
                offered[k] = offered.get(k, 0) + v

    def end(self) -> None:
        """The round is over: what it offered and was declined leaves the order's books."""
        alone = self._alone
        for framework_id, offered in self._offered.items():
            role = self._frameworks[framework_id].role
            resources = Resources.from_millis(offered)
            times = alone.get(framework_id)
            if times is None:
                self._role_frameworks[role].unallocated(framework_id, resources)
            else:
                self._role_frameworks[role].counted(framework_id, times)
            self._roles.unallocated(role, resources)
        self._offered.clear()
        alone.clear()
