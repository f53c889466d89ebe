"""Why a framework is offered nothing: its reasons, each a code and the numbers behind it,
computed from the books the next round reads, in the order that explains.

The round asks of each slave, in turn: is anything free here (`allocatable`)? held for a
claimant (`holds`)? what may this framework's role have of it (quota limits, then others'
guarantees)? does that hold one of its offer filters? did it decline this here lately?
`why` asks the same questions of every slave for one framework, and counts the slaves
each question turned away: the reason that turns away the most slaves comes first. Before
those come what turns away every slave at once (no slave, its role refused, disconnected,
its calls held by its rate limit, suppressed) and a declared minimum or task no slave
could ever hold; after them, what is true but explains less.

Pure, like the rest of the cycle: the shell passes what only it knows (`Standing`), and
the answer plain data the shell puts on the wire (`protocol.wire.why`), made only when
someone asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial

from master.allocation.allocator import Allocator
from master.allocation.ledger import (
    FrameworkBook,
    anything,
    fits_one,
    master_floor,
    within,
)
from master.allocation.reserved import visible
from master.allocation.sorter import Millis
from master.cycle.state import State
from master.cycle.why_shapes import (
    Shapes,
    fits_no_free,
    fitting_no_free,
    largest_amounts,
    never_fits,
    short,
    tasks_of,
    weighed,
)
from master.cycle.why_words import SLAVES_SHOWN, names, res, user
from master.cycle.why_words import Reason as Reason  # (its home, for the readers of why)
from protocol.wire.reservations import base_of, offered_to, stripped
from protocol.wire.why_codes import Figure, WhyCode

AHEAD_SHOWN = 5  # frameworks ahead in the order, named (the rest counted)


@dataclass(frozen=True, slots=True)
class Standing:
    """What the shell knows of a framework that the offer cycle does not."""

    connected: bool = True
    role_refused: str = ""  # why its principal may not use its role now ("": it may)
    calls_queued: int = 0  # its principal's calls waiting for the rate limit now
    calls_refused: int = 0  # ... refused lately, the queue full
    qps: float | None = None  # its principal's limit (None: none)
    capacity: int | None = None
    # registered slaves an operator took out of the offers: draining, drained, deactivated
    maintenance: Mapping[str, str] = field(default_factory=dict)


# what turns one slave away from the framework, in the order a round asks
FULL = "full"  # nothing allocatable is free there (others hold it)
MINE = "mine"  # ... and what it holds there, it holds in offers it has not answered
HELD = "held"  # held for a claimant of preemption
# the codes of a cluster fully allocated: where preemption is what would give it room
ALL_ALLOCATED = (WhyCode.LOWER_IN_ORDER, WhyCode.CLUSTER_FULL)
RESERVED = "reserved"  # what is free there is reserved for other roles
LIMIT = "limit"  # its role's quota limit leaves nothing of it
GUARANTEE = "guarantee"  # others' unmet guarantees leave nothing of it
MINIMUM = "minimum"  # it holds none of the framework's offer filters
SMALL = "small"  # what it may have there holds none of the tasks it asked for
FILTERED = "filtered"  # it declined this here, and the filter stands
OPEN = "open"  # it may be offered this slave
# (the order that breaks a tie between two that turn away as many slaves: the one that
# says more first; a full slave may free up for it, the others would not be offered it then)
STAGES = (MINE, HELD, RESERVED, LIMIT, GUARANTEE, MINIMUM, SMALL, FILTERED, FULL, OPEN)


# what keeps every offer from it whatever is free: no next round offers it anything
BLOCKING = (WhyCode.NO_SLAVE, WhyCode.ROLE_NOT_ALLOWED, WhyCode.DISCONNECTED, WhyCode.SUPPRESSED)


@dataclass(frozen=True, slots=True)
class Told:
    """A reason's code, and the reason itself made only when asked for."""

    code: WhyCode
    reason: Callable[[], Reason]

    def message(self) -> str:
        return self.reason().message


def explain(
    a: Allocator,
    state: State,
    framework_id: str,
    now: float,
    standing: Standing | None = None,
    *,
    fair: Mapping[str, float] | None = None,
    others_named: bool = True,
) -> list[Reason]:
    """The reasons `framework_id` (one the allocator knows) is offered nothing now, the
    one that explains first; none only if nothing keeps offers from it. `fair`: each
    framework's fair share as last computed (preemption's, which the master keeps up to
    date off its loop), for `lower-in-order` to give its own (None: not said; the ideal
    is never computed here, on the master's loop). `others_named`: whether other
    frameworks and roles are named (to an operator) or only counted (to a tenant, who may
    not learn which frameworks exist)."""
    said = _reasons(a, state, framework_id, now, standing, fair, others_named)
    return _unique(said)


def first(a: Allocator, state: State, framework_id: str, now: float) -> Told | None:
    """The code of the reason `explain` gives first (to an operator, no fair share said),
    and how to say it: the sentence and its numbers are made only when asked for (a
    caller that heard this code before needs only the code; one that wants them asks
    before the books change), and the reasons after it not at all."""
    return next(_reasons(a, state, framework_id, now, None, None, True), None)


def _reasons(
    a: Allocator,
    state: State,
    framework_id: str,
    now: float,
    standing: Standing | None,
    fair: Mapping[str, float] | None,
    others_named: bool,
) -> Iterator[Told]:
    """`explain`'s reasons in order, each code as soon as it is known, each reason only
    when asked for, each stage of the work done only when the reasons before it are
    through."""
    standing = standing or Standing()
    # a multi-role framework's first role that wants offers (else its first role)
    books = [a.frameworks[c] for c in a.clients.of(framework_id)]
    fw = next((b for b in books if not b.suppressed), books[0])
    blocked = False  # a reason said keeps every offer from it, whatever is free
    for r in _everywhere(a, fw, standing) + _maintenance(standing.maintenance):
        blocked = blocked or r.code in BLOCKING
        yield Told(r.code, _said(r))
    declared = tasks_of(state, framework_id, now)
    # (once an answer, if it declared any shape: each is weighed against it first)
    largest = largest_amounts(a) if fw.min_allocatable or declared else {}
    least = weighed(fw.min_allocatable, largest)
    tasks = weighed(declared, largest)
    never = never_fits(a, least, tasks, largest)
    for r in never:
        yield Told(r.code, _said(r))
    mine = _outstanding(state, framework_id, now)
    turned: dict[str, list[str]] = {stage: [] for stage in STAGES}  # slaves each turns away
    free: dict[str, Millis] = {}  # each active slave's free resources, less others' holds
    enough = anything if fw.min_allocatable is not None else _master_floor(a)
    held, plain = a.reservations, not a.quotas
    for slave_id, slave in a.slaves.items():
        if not slave.active:
            continue
        unallocated = slave.unallocated
        if slave_id in held:
            room = _less_holds(a, slave_id, unallocated, framework_id, now)
        else:
            room = unallocated  # (the usual: nothing held here)
        free[slave_id] = room
        if not slave.reserved and not enough(unallocated):  # (_stage's first question, the
            turned[MINE if slave_id in mine else FULL].append(slave_id)  # usual answer)
        elif plain and room is unallocated and not slave.reserved:
            turned[_plain_stage(fw, slave_id, room, least, tasks, now)].append(slave_id)
        else:
            stage = _stage(a, fw, slave_id, unallocated, room, mine, least, tasks, now, enough)
            turned[stage].append(slave_id)
    ranked = [
        (-len(turned[stage]), STAGES.index(stage), stage)
        for stage in STAGES
        if turned[stage] and stage != OPEN
    ]
    q = _Question(a, state, fw, now, fair, others_named, free, least, tasks)
    for _, _, stage in sorted(ranked):
        yield Told(_stage_code(q, stage), partial(_stage_reason, q, stage, turned[stage]))
    if not never and fits_no_free(tasks.scan, free):
        yield Told(WhyCode.TASK_FITS_NO_SLAVE, partial(fitting_no_free, tasks, free))
    if not never and _at_limit(a, fw.role, tasks.scan or least.scan):
        # (no slave turned away by it: what frees, where nothing is free, will not come)
        of = f"{len(free)} of {len(free)} slaves"
        yield Told(WhyCode.QUOTA_LIMIT, partial(_quota_limit, a, fw.role, of, sorted(free)))
    if turned[OPEN] and not blocked:
        yield Told(WhyCode.NEXT_ROUND, partial(_next_round, turned[OPEN], free))


def _said(reason: Reason) -> Callable[[], Reason]:
    return lambda: reason


# -- what turns away every slave ------------------------------------------------------------------
def _everywhere(a: Allocator, fw: FrameworkBook, standing: Standing) -> list[Reason]:
    out = []
    # (a slave an operator took out is not active either: `maintenance` says why, below)
    others = [s for s in a.slaves.values() if s.slave_id not in standing.maintenance]
    away = [s for s in others if not s.active]
    if not a.slaves or (others and len(away) == len(others)):
        out.append(
            Reason(
                code=WhyCode.NO_SLAVE,
                message=f"no slave is connected ({len(away)} registered, none connected)"
                if away
                else "no slave is registered",
                numbers={"slaves": float(len(away)), "connected": 0.0},
            )
        )
    if standing.role_refused:
        out.append(
            Reason(
                code=WhyCode.ROLE_NOT_ALLOWED,
                message=standing.role_refused,
                numbers={"role": fw.role},
            )
        )
    frozen = _frozen(a, fw.role)
    if frozen is not None:
        node, names = frozen
        out.append(
            Reason(
                code=WhyCode.ROLE_NOT_ALLOWED,
                message=f"role {node} has a limit of 0 {', '.join(names)}: it is offered nothing",
                numbers={"role": node, "limit": dict.fromkeys(names, 0.0)},
            )
        )
    if not fw.active or not standing.connected:
        out.append(
            Reason(
                code=WhyCode.DISCONNECTED,
                message="its scheduler is disconnected: offered nothing until it is back",
            )
        )
    if standing.calls_queued or standing.calls_refused:
        numbers: dict[str, Figure] = {
            "queued": float(standing.calls_queued),
            "refused": float(standing.calls_refused),
        }
        if standing.qps is not None:
            numbers["qps"] = standing.qps
        if standing.capacity is not None:
            numbers["capacity"] = float(standing.capacity)
        out.append(
            Reason(
                code=WhyCode.RATE_LIMITED,
                message=f"its principal's calls are held by its rate limit "
                f"({_limit(standing)}): {standing.calls_queued} waiting, "
                f"{standing.calls_refused} refused lately; an answer or a revive waits its turn",
                numbers=numbers,
            )
        )
    if fw.suppressed:
        out.append(
            Reason(
                code=WhyCode.SUPPRESSED,
                message="it suppressed its offers: none until it revives (a Revive, or "
                "SUBSCRIBE again)",
            )
        )
    return out


def _maintenance(out: Mapping[str, str]) -> list[Reason]:
    """Slaves an operator drains or deactivated: offered to no one, this framework too."""
    if not out:
        return []
    by_state: dict[str, list[str]] = {}
    for slave_id, state in sorted(out.items()):
        by_state.setdefault(state, []).append(slave_id)
    said = "; ".join(f"{state}: {', '.join(names(ids))}" for state, ids in sorted(by_state.items()))
    numbers: dict[str, Figure] = {"slaves": names(sorted(out))}
    numbers |= {state: float(len(ids)) for state, ids in by_state.items()}
    return [
        Reason(
            code=WhyCode.MAINTENANCE,
            message=f"{len(out)} slave(s) taken out of the offers by an operator ({said}): "
            "offered to no one until reactivated",
            numbers=numbers,
        )
    ]


def _limit(standing: Standing) -> str:
    qps = f"{standing.qps:g} calls/s" if standing.qps is not None else "no rate"
    queue = f"a queue of {standing.capacity}" if standing.capacity is not None else "any queue"
    return f"{qps}, {queue}"


def _frozen(a: Allocator, role: str) -> tuple[str, list[str]] | None:
    """A quota node on the role's path whose limit of zero freezes it, and its zeros."""
    for node in a.quota_stage.path(role):
        quota = a.quotas.get(node)
        if quota is not None and quota.limit is not None:
            zeros = sorted(n for n, v in quota.limit.millis.items() if v == 0)
            if zeros:
                return node, zeros
    # (a `Limit` keeps its zeros in `millis`; a plain Resources has none to find)
    return None


# -- one slave ----------------------------------------------------------------------------------
def _less_holds(a: Allocator, slave_id: str, free: Millis, framework_id: str, now: float) -> Millis:
    """What of `free` is not held for another framework's claim (`free` itself if
    nothing is: read, never changed, and read before the books change)."""
    held = a.reservations.get(slave_id)
    if not held:
        return free
    room = dict(free)
    for r in held:
        if r.until > now and r.framework_id != framework_id and r.framework_id in a.frameworks:
            for name, amount in r.resources.items():
                if name in room:
                    room[name] = max(0, room[name] - amount)
    return room


def _stage(
    a: Allocator,
    fw: FrameworkBook,
    slave_id: str,
    unallocated: Millis,
    room: Millis,
    mine: Mapping[str, Millis],
    least: Shapes,
    tasks: Shapes,
    now: float,
    enough: Callable[[Mapping[str, int]], bool],
) -> str:
    """The first of the round's questions that turns this slave away from `fw` -- or, one
    it would be offered, that what it would be offered holds none of its `tasks`.
    `enough`: something at all (with offer filters of its own), else the master's
    minimum."""
    book = a.slaves[slave_id]
    if book.reserved:  # (what the resources are, whoever's: then whose)
        unallocated = stripped(unallocated)
    if not enough(unallocated):
        return MINE if slave_id in mine else FULL
    if book.reserved:
        unreserved, its = visible(book, fw.role, room)
        seen, everything = stripped({**unreserved, **its}), stripped(room)
        if not enough(seen):
            return RESERVED if enough(everything) else HELD
        for shapes in (least.scan, tasks.scan):  # (what it needs is free, but others')
            if shapes and not fits_one(seen, shapes) and fits_one(everything, shapes):
                return RESERVED
        room = seen  # (what it would see, as amounts)
    if not enough(room):
        return HELD
    if not a.quotas:
        return _plain_stage(fw, slave_id, room, least, tasks, now)
    floors = least.scan
    if floors and not fits_one(room, floors):
        return MINIMUM
    # what its role may have of it (a cut below its minimum, or below every task it asked
    # for that the room itself holds, is the cut's: not the room's, which holds them)
    stage = a.quota_stage
    limited = stage.offerable(fw.role, room, headroom=False)
    if not enough(limited) or _cut(room, limited, floors, tasks.scan):
        return LIMIT
    offerable = stage.offerable(fw.role, room)
    if not enough(offerable) or _cut(limited, offerable, floors, tasks.scan):
        return GUARANTEE
    return _plain_stage(fw, slave_id, offerable, least, tasks, now)


def _cut(before: Millis, after: Millis, floors: list[Millis], tasks: list[Millis]) -> bool:
    """Whether a cut of `before` to `after` leaves none of the offer filters `before`
    holds, or none of the tasks it holds."""
    return any(
        shapes and fits_one(before, shapes) and not fits_one(after, shapes)
        for shapes in (floors, tasks)
    )


def _plain_stage(
    fw: FrameworkBook,
    slave_id: str,
    offerable: Millis,
    least: Shapes,
    tasks: Shapes,
    now: float,
) -> str:
    """`_stage`'s last questions, of what the framework may be offered of a slave with
    something free: its offer filters, its tasks, its decline filter. (All that is asked
    of a slave without reservations, holds or quotas: `_reasons` asks it of most.)"""
    if least.scan and not fits_one(offerable, least.scan):
        return MINIMUM
    if tasks.scan and not fits_one(offerable, tasks.scan):
        return SMALL  # (offered or filtered, of no use to it: that is what explains)
    f = fw.filters.get(slave_id)
    if f is not None and f.expires > now and within(offerable, f.refused):
        return FILTERED
    return OPEN


def _master_floor(a: Allocator) -> Callable[[Mapping[str, int]], bool]:
    """The master's minimum offer (its --min-allocatable-resources; Mesos's default)."""
    minimum = a.min_allocatable
    return master_floor(None if minimum is None else [dict(r.millis) for r in minimum if r])


def _outstanding(state: State, framework_id: str, now: float) -> dict[str, Millis]:
    """What it holds in unanswered offers, by slave."""
    out: dict[str, Millis] = {}
    for offer in state.outstanding():
        if offer.framework_id == framework_id:
            held = out.setdefault(offer.slave_id, {})
            for name, amount in offer.resources.millis.items():
                held[name] = held.get(name, 0) + amount
    return out


@dataclass(frozen=True, slots=True)
class _Question:
    """One `explain`: the books, the framework asked about, and how to answer."""

    a: Allocator
    state: State
    fw: FrameworkBook
    now: float
    fair: Mapping[str, float] | None  # fair shares as last computed (None: not said)
    named: bool  # other frameworks and roles named (else counted)
    free: Mapping[str, Millis]  # each active slave's free resources, less others' holds
    least: Shapes  # its min_offer shapes, weighed
    tasks: Shapes  # the tasks it asked for (its last Request), weighed


# the code of the reason each stage gives (a full slave's: see `_order`)
_STAGE_CODES = {
    MINE: WhyCode.OFFERS_OUTSTANDING,
    HELD: WhyCode.HELD_FOR_PREEMPTION,
    RESERVED: WhyCode.RESERVED_FOR_OTHERS,
    LIMIT: WhyCode.QUOTA_LIMIT,
    GUARANTEE: WhyCode.HELD_FOR_GUARANTEE,
    MINIMUM: WhyCode.MIN_OFFER_FITS_NO_SLAVE,
    SMALL: WhyCode.TASK_FITS_NO_SLAVE,
    FILTERED: WhyCode.DECLINED_FILTER,
}


def _stage_code(q: _Question, stage: str) -> WhyCode:
    """The code `_stage_reason` gives, without its sentence or numbers."""
    if stage == FULL:
        return WhyCode.LOWER_IN_ORDER if _ahead(q.a, q.fw.framework_id) else WhyCode.CLUSTER_FULL
    return _STAGE_CODES[stage]


def _stage_reason(q: _Question, stage: str, slaves: list[str]) -> Reason:
    a, fw, free, now = q.a, q.fw, q.free, q.now
    n = len(slaves)
    of = f"{n} of {len(free)} slaves"
    if stage == MINE:
        return _offers_outstanding(q.state, fw.framework_id, now, slaves, of)
    if stage == FULL:
        return _order(q, slaves, of)
    if stage == HELD:
        claimants = sorted(
            {
                r.framework_id
                for s in slaves
                for r in a.reservations.get(s, [])
                if r.framework_id != fw.framework_id
            }
        )
        whom = ", ".join(claimants) if q.named else f"{len(claimants)} other framework(s)"
        return Reason(
            code=WhyCode.HELD_FOR_PREEMPTION,
            message=f"{of}: what is free is held for {whom}, for whom preemption freed it",
            numbers={
                "slaves": names(slaves),
                "for": claimants if q.named else float(len(claimants)),
            },
        )
    if stage == RESERVED:
        return _reserved_for_others(q, slaves, of)
    if stage == LIMIT:
        return _quota_limit(a, fw.role, of, slaves)
    if stage == GUARANTEE:
        return _held_for_guarantee(a, fw.role, of, q.named)
    if stage == MINIMUM:
        them = {s: free[s] for s in slaves}
        return short(WhyCode.MIN_OFFER_FITS_NO_SLAVE, "its min_offer", q.least, them, of=of)
    if stage == SMALL:
        them = {s: free[s] for s in slaves}
        return short(WhyCode.TASK_FITS_NO_SLAVE, "the task it asked for", q.tasks, them, of=of)
    # FILTERED
    left = {s: round(fw.filters[s].expires - now, 3) for s in slaves[:SLAVES_SHOWN]}
    return Reason(
        code=WhyCode.DECLINED_FILTER,
        message=f"{of}: it declined what they have free, and filtered them for "
        f"{max(left.values()):g} s more at most (its refuse_seconds); a Revive clears "
        "every filter",
        numbers={"slaves": float(n), "until": left},
    )


def _reserved_for_others(q: _Question, slaves: list[str], of: str) -> Reason:
    """Whose reservations hold what is free on `slaves` (roles named to an operator)."""
    roles: set[str] = set()
    amounts: Millis = {}
    for s in slaves:
        book = q.a.slaves[s]
        for key, role in book.reserved.items():
            free = book.unallocated.get(key, 0)
            if role and free > 0 and not offered_to(role, q.fw.role):
                roles.add(role)
                base = base_of(key)
                amounts[base] = amounts.get(base, 0) + free
    whom = ", ".join(sorted(roles)) if q.named else f"{len(roles)} other role(s)"
    return Reason(
        code=WhyCode.RESERVED_FOR_OTHERS,
        message=f"{of}: what is free there ({res(amounts)}) is reserved for {whom}, and "
        "offered to their frameworks alone",
        numbers={
            "slaves": names(slaves),
            "for": sorted(roles) if q.named else float(len(roles)),
            "reserved": user(amounts),
        },
    )


def _offers_outstanding(
    state: State, framework_id: str, now: float, slaves: list[str], of: str
) -> Reason:
    offers = [o for o in state.outstanding() if o.framework_id == framework_id]
    total: Millis = {}
    for o in offers:
        for name, amount in o.resources.millis.items():
            total[name] = total.get(name, 0) + amount
    oldest = max((now - o.created_at for o in offers), default=0.0)
    return Reason(
        code=WhyCode.OFFERS_OUTSTANDING,
        message=f"{of}: it holds their resources in {len(offers)} offers it has not "
        f"answered (the oldest {oldest:.0f} s old): {res(total)}; accept or decline them",
        numbers={
            "offers": float(len(offers)),
            "resources": user(total),
            "oldest_seconds": round(oldest, 3),
            "slaves": names(slaves),
        },
    )


def _ahead(a: Allocator, framework_id: str) -> list[str]:
    """The frameworks before it in the order (all, if it is not in it)."""
    order = list(a.order())
    return order[: order.index(framework_id)] if framework_id in order else order


def _order(q: _Question, slaves: list[str], of: str) -> Reason:
    """Every slave it could use is allocated: where it stands in the order, and its fair
    share in the policy's ideal. (To a tenant, who comes before it is counted, with
    their shares, not named.)"""
    a, fid = q.a, q.fw.framework_id
    ahead = _ahead(a, fid)
    share = a.dominant_share(fid)
    weight = a.framework_weight(fid)
    fair = q.fair.get(fid) if q.fair is not None else None
    numbers: dict[str, Figure] = {
        "slaves": float(len(slaves)),
        "position": float(len(ahead) + 1),
        "dominant_share": round(share, 4),
        "weight": weight,
    }
    if fair is not None:
        numbers["fair_share"] = round(fair, 4)
    fair_text = f", fair share {fair:.1%}" if fair is not None else ""
    if not ahead:
        return Reason(
            code=WhyCode.CLUSTER_FULL,
            message=f"{of} are fully allocated; it is first in the order (dominant share "
            f"{share:.1%}, weight {weight:g}{fair_text}): it is offered what frees first",
            numbers=numbers,
        )
    shown = ahead[:AHEAD_SHOWN]
    names = shown if q.named else [f"#{i}" for i in range(1, len(shown) + 1)]
    numbers["ahead"] = {n: round(a.dominant_share(f), 4) for n, f in zip(names, shown, strict=True)}
    numbers["ahead_weights"] = {n: a.framework_weight(f) for n, f in zip(names, shown, strict=True)}
    numbers["ahead_count"] = float(len(ahead))
    others = ", ".join(
        f"{n} ({a.dominant_share(f):.1%}, weight {a.framework_weight(f):g})"
        for n, f in zip(names, shown, strict=True)
    )
    more = f" and {len(ahead) - len(shown)} more" if len(ahead) > len(shown) else ""
    return Reason(
        code=WhyCode.LOWER_IN_ORDER,
        message=f"{of} are fully allocated, and {len(ahead)} framework(s) come before it in "
        f"the {a.policy} order: {others}{more}; it holds a dominant share of {share:.1%} "
        f"at weight {weight:g}{fair_text}",
        numbers=numbers,
    )


def _limits_reached(
    a: Allocator, role: str
) -> Iterator[tuple[str, Mapping[str, int], Millis, list[str]]]:
    """Each role on `role`'s path at a limit: its name, its limit, what it holds, and the
    resources it is at its limit of."""
    stage = a.quota_stage
    for node in stage.path(role):
        quota = a.quotas.get(node)
        if quota is None or quota.limit is None:
            continue
        held = stage.held_by_role(node)
        at = [n for n, v in quota.limit.millis.items() if held.get(n, 0) >= v]
        if at:
            yield node, quota.limit.millis, held, at


def _quota_limit(a: Allocator, role: str, of: str, slaves: list[str]) -> Reason:
    reached = next(_limits_reached(a, role), None)
    if reached is not None:
        node, limits, held, at = reached
        limit = {n: limits[n] for n in at}
        return Reason(
            code=WhyCode.QUOTA_LIMIT,
            message=f"{of}: role {node} holds {res({n: held.get(n, 0) for n in at})}, "
            f"at its limit of {res(limit)}; it is offered more once its tasks give some "
            "back, or an operator raises the limit",
            numbers={
                "role": node,
                "limit": user(dict(limits)),
                "held": user(held),
                "at_limit": at,
            },
        )
    return Reason(  # (limits leave too little of each slave, if none is reached)
        code=WhyCode.QUOTA_LIMIT,
        message=f"{of}: what its role's limits leave of them is too little to offer",
        numbers={"role": role, "slaves": names(slaves)},
    )


def _at_limit(a: Allocator, role: str, shapes: list[Millis]) -> bool:
    """Whether a limit on the role's path is reached for a resource each of `shapes`
    needs: none of them is offered more, whatever frees (what `_quota_limit` says)."""
    if not shapes or not a.quotas:
        return False
    return any(
        all(any(shape.get(n, 0) > 0 for n in at) for shape in shapes)
        for _, _, _, at in _limits_reached(a, role)
    )


def _held_for_guarantee(a: Allocator, role: str, of: str, named: bool) -> Reason:
    back = a.quota_stage.held_back(role)
    total: Millis = {}
    for lack in back.values():
        for name, amount in lack.items():
            total[name] = total.get(name, 0) + amount
    if not named:  # (a tenant hears how much, not for whom)
        return Reason(
            code=WhyCode.HELD_FOR_GUARANTEE,
            message=f"{of}: what they have free is kept for {len(back)} other role(s)' "
            f"guarantees ({res(total)} in all)",
            numbers={"held_back": user(total), "roles": float(len(back))},
        )
    each = "; ".join(f"{r}: {res(lack)}" for r, lack in sorted(back.items()))
    return Reason(
        code=WhyCode.HELD_FOR_GUARANTEE,
        message=f"{of}: what they have free is kept for other roles' guarantees ({each})",
        numbers={
            "held_back": user(total),
            "roles": sorted(back),
            **{f"for {r}": user(lack) for r, lack in sorted(back.items())},
        },
    )


def _next_round(slaves: list[str], free: Mapping[str, Millis]) -> Reason:
    room: Millis = {}
    for s in slaves:
        for name, amount in free[s].items():
            room[name] = room.get(name, 0) + amount
    return Reason(
        code=WhyCode.NEXT_ROUND,
        message=f"{len(slaves)} slave(s) have room it may take ({res(room)} in all): the "
        "next allocation round offers it (one runs every allocation interval, and soon "
        "after resources free)",
        numbers={"slaves": names(slaves), "free": user(room)},
    )


def _unique(said: Iterable[Told]) -> list[Reason]:
    """Each code once, where it first explains (a minimum that fits no slave at all is
    not said again as one that fits no free room): a reason whose code was said is not
    made."""
    seen: set[WhyCode] = set()
    out = []
    for told in said:
        if told.code not in seen:
            seen.add(told.code)
            out.append(told.reason())
    return out
