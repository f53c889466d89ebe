"""The books as the wire shows them: a framework, an offer, a role, and the whole `State`
message (the retained snapshot on the bus, `/api/v1/state`, what `drfmesos state` and the
plots read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from master import slave_values
from master.allocation.allocator import Allocator
from master.allocation.quota_stage import RoleStanding
from master.books import Books, Framework, OfferRecord, Task
from protocol.wire.messages import (
    FrameworkView,
    Offer,
    PreemptionView,
    RoleView,
    State,
)
from protocol.wire.resources import Resources

# A snapshot (the retained <p>/state, /api/v1/state) lists the slaves, tasks and offers
# of a cluster of at most this many slaves; past it, it counts them (/api/v1 pages them).
LISTED_SLAVES = 1000
# how /api/v1/slaves and /api/v1/tasks may be sorted (`-` before one: the other way round)
SLAVE_SORTS = ("slave_id", "last_heartbeat")
TASK_SORTS: dict[str, Callable[[Task], Any]] = {
    "task_id": lambda t: t.task_id,
    "state": lambda t: t.state.value,
    "launched": lambda t: t.launched_wall,
}


def offer_of(books: Books, record: OfferRecord) -> Offer:
    """An outstanding offer as its framework was told of it."""
    slave = books.slaves.get(record.slave_id)
    return Offer(
        offer_id=record.offer_id,
        framework_id=record.framework_id,
        slave_id=record.slave_id,
        hostname=slave.hostname if slave else "",
        resources=record.resources,
        discrete=record.discrete,
        attributes=slave.attributes if slave else {},
    )


def role_view(standing: RoleStanding) -> RoleView:
    """A role node, as the allocation sees it, for the wire (the same fields)."""
    return RoleView(**{f.name: getattr(standing, f.name) for f in fields(standing)})


def completed_view(fw: Framework, allocator: Allocator) -> FrameworkView:
    """A removed framework as the API lists it: nothing held, its tasks all ended."""
    return FrameworkView(
        framework_id=fw.framework_id,
        principal=fw.principal,
        name=fw.name,
        role=fw.role,
        roles=fw.roles,
        weight=allocator.roles.weight(fw.role),
        active=False,
        suppressed=False,
        allocated=Resources(),
        offered=Resources(),
        dominant_share=0.0,
        running_tasks=0,
        finished_tasks=fw.finished_tasks,
        registered_at=fw.registered_at,
        removed_at=fw.removed_at,
        removed_why=fw.removed_why,
    )


def snapshot(
    books: Books,
    allocator: Allocator,
    *,
    master_id: str,
    now: float,
    policy: str,
    allocated: Resources,
    allocation: dict[str, Resources],
    free: dict[str, Resources] | None,
    include_tasks: bool = True,
    refused: dict[str, int] | None = None,
    roles: list[RoleView] | None = None,
    preemption: PreemptionView | None = None,
    fair: dict[str, float] | None = None,
    starving: dict[str, float] | None = None,
    web_ui: str = "",
    epoch: int = 0,
) -> State:
    """The books as a `State` message (what `drfmesos state` and the plots read)."""
    frameworks = framework_views(books, allocator, allocation, fair, starving)
    slaves = []  # (free None: a big cluster's slaves are counted, not listed)
    if free is not None:
        slaves = [
            s.view(
                free.get(s.slave_id, Resources()),
                None,
                books.maintenance.get(s.slave_id),
                slave_values.free(books, s),
            )
            for s in books.slaves.values()
        ]
    tasks = []
    if include_tasks:
        tasks = [
            t.view()
            for fw in books.frameworks.values()
            for t in fw.tasks.values()
            if not t.terminal
        ]
    return State(
        master_id=master_id,
        timestamp=now,
        policy=policy,
        total=allocator.total,
        allocated=allocated,
        frameworks=frameworks,
        slaves=slaves,
        offer_count=len(books.offers),
        offers=[offer_of(books, r) for r in books.offers.values()] if include_tasks else [],
        tasks=tasks,
        refused=refused or {},
        roles=roles or [],
        preemption=preemption,
        web_ui=web_ui,
        epoch=epoch,
        recovering_slaves=len(books.recovering),
        slave_count=len(books.slaves),
    )


def framework_views(
    books: Books,
    allocator: Allocator,
    allocation: dict[str, Resources],
    fair: dict[str, float] | None = None,
    starving: dict[str, float] | None = None,
) -> list[FrameworkView]:
    """Each registered framework as its view: what its tasks use, what it is offered."""
    frameworks = []
    total = allocator.total
    for fw in books.frameworks.values():
        offered = sum((books.offers[o].resources for o in fw.offers), Resources())
        # what its tasks use: the allocator also counts outstanding offers as allocated
        in_use = allocation.get(fw.framework_id, Resources()).subtract_clamped(offered)
        frameworks.append(
            FrameworkView(
                framework_id=fw.framework_id,
                principal=fw.principal,
                name=fw.name,
                role=fw.role,
                roles=fw.roles,
                weight=allocator.roles.weight(fw.role),
                active=fw.connected,
                suppressed=allocator.suppressed(fw.framework_id),
                allocated=in_use,
                offered=offered,
                dominant_share=in_use.dominant_share(total),
                running_tasks=fw.running_tasks(),
                finished_tasks=fw.finished_tasks,
                fair_share=None if fair is None else fair.get(fw.framework_id, 0.0),
                starving_seconds=(starving or {}).get(fw.framework_id),
                demand=fw.demand,
                registered_at=fw.registered_at,
            )
        )
    return frameworks
