"""The books the offer cycle reads and does not keep (`master.cycle.State`), in memory: the
offers outstanding, what each framework declared it wants, the tasks that run (as Nomad
tests its schedulers on a harness)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from master.allocation.planning import RunningTask
from master.cycle import Wish
from protocol.wire.resources import Resources


@dataclass
class Offer:
    offer_id: str
    framework_id: str
    slave_id: str
    resources: Resources
    created_at: float
    role: str | None = None  # a multi-role framework's offer's


@dataclass
class Books:
    """The books the cycle does not keep, in memory (`master.cycle.State`)."""

    roles: dict[str, str] = field(default_factory=dict)  # framework -> role
    offers: dict[str, Offer] = field(default_factory=dict)
    demand: dict[str, list[tuple[dict[str, int], int]]] = field(default_factory=dict)
    tasks: dict[tuple[str, str], RunningTask] = field(default_factory=dict)
    tenants: dict[str, str] = field(default_factory=dict)  # framework -> principal
    # what a framework that declared nothing runs (it wants more of it: no end to it)
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)

    def offers_held(self) -> dict[str, int]:
        return dict(Counter(o.framework_id for o in self.offers.values()))

    def outstanding(self) -> Iterator[Offer]:
        return iter(self.offers.values())

    def wishes(self, now: float) -> Iterator[Wish]:
        for fid in self.roles:
            wish = self.wish(fid, now)
            if wish is not None:
                yield wish

    def wish(self, framework_id: str, now: float) -> Wish | None:
        role = self.roles.get(framework_id)
        if role is None:
            return None
        demand, shape = self.demand.get(framework_id), self.shapes.get(framework_id)
        tenant = self.tenants.get(framework_id, "")
        return Wish(framework_id, role, demand=demand, shape=shape, tenant=tenant)

    def running(self) -> Iterator[RunningTask]:
        return iter(self.tasks.values())

    def task_live(self, framework_id: str, task_id: str) -> bool:
        return (framework_id, task_id) in self.tasks
