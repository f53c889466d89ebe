"""Operations that change whose a slave's resources are: RESERVE, UNRESERVE, CREATE,
DESTROY, GROW_VOLUME and SHRINK_VOLUME, from a framework's Accept (on what it was offered)
or from an operator (RESERVE_RESOURCES and the like: on what no task uses; the slave's
offers outstanding are rescinded as it needs, as Mesos's `Master::Http::_operation` does,
so that a tenant that sits on its offers cannot keep the operator out).

Who may (`master.calls.operation_acls`): identity is the caller's (the broker's, or the
HTTP credentials'), never a payload's. The operator's grants say which operations each
principal may make for which roles (RESERVE is off for a framework until granted: a
reservation holds resources from every other role, so a tenant that reserved an idle
cluster would keep it); a framework acts besides only in its offer's role. A refused
operation is dropped, its sender told why, as Mesos drops an unauthorized one.

Each change goes to the allocator (the same amounts, another owner), the master's books
and the slave, which checkpoints what it must keep across restarts (CheckpointResources,
versioned so that the slave drops an older one delivered again, see
`Outbox.checkpoint_resources`; a DESTROY's names the volumes whose data goes): a master
that fails over learns it again when the slave re-registers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller
from master.books import Books, Framework, OfferRecord
from master.calls.operation_acls import May, framework_problem, grant_problem, reserver_problem
from master.offers import OfferBook
from master.outbox import Outbox
from protocol.wire.messages import OfferOperation, OperateResources
from protocol.wire.reservations import (
    CREATE,
    DESTROY,
    NON_SPECULATIVE,
    RESERVE,
    UNRESERVE,
    ReservationError,
    base_of,
    checkpointed,
    is_shared,
    parse_key,
    role_of,
)
from protocol.wire.resources import ResourceError, Resources

Millis = dict[str, int]


class OperationError(ValueError):
    """An operation its caller may not make, or that does not fit what is there."""


def claimed(kind: str, keys: Millis, principal: str) -> Millis:
    """A RESERVE's resources with the caller's principal where the payload named none
    (and the caller has one): a reservation says who made it."""
    if kind != RESERVE or not principal:
        return dict(keys)
    out: Millis = {}
    for key, amount in keys.items():
        rid = parse_key(key)
        last = rid.reservations[-1]
        if last.principal is None:
            last = type(last)(last.type, last.role, principal, last.labels)
            key = type(rid)(rid.base, (*rid.reservations[:-1], last), rid.volume).key()
        out[key] = out.get(key, 0) + amount
    return out


# how many resources of their own (each reservation and volume is one) a slave may hold:
# every round, offer and checkpoint of it carries each; a tenant's 20,000 tiny volumes
# in one Accept stalled the master for every tenant (Mesos sets no bound; none needs this).
# Each role has a bound of its own (a sub-role too: two tenants may be granted siblings
# under one parent), so that one tenant's 1,020 volumes leave the others room, and the
# slave one for them all.
MAX_ROLE_KEYS = 1024
MAX_SLAVE_KEYS = 4096


class ResourceOperations:
    """Applies operations to a slave's resources: the allocator, the books, the slave."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        outbox: Outbox,
        offers: OfferBook,
        *,
        in_use: Callable[[str, str], bool],
        may: May,
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        """`in_use(slave_id, key)`: whether a live task uses that resource (a volume);
        `may(principal, grant, role)`: None if the operator granted that, else why not
        (`RoleACL.may`)."""
        self.books, self.allocator, self.outbox, self.offers = books, allocator, outbox, offers
        self.in_use, self.request_round, self.log = in_use, request_round, log
        self.may = may

    def on_offer(
        self, fw: Framework, slave_id: str, op: OfferOperation, offered: Resources, role: str
    ) -> tuple[Resources, Resources]:
        """An Accept's operation on `offered` (what is left of its offers, of `role`):
        (consumed, converted), applied; OperationError if it may not be. What a
        GROW_VOLUME or SHRINK_VOLUME made is the framework's until the Accept gives it
        back: not for its launches (`NON_SPECULATIVE`)."""
        consumed, converted = self._conversion(op, fw.principal)
        problem = self._framework_may(fw, op.type, consumed, converted, role)
        if problem is None and not offered.contains(Resources.from_millis(consumed)):
            problem = f"{op.type} {op.resources}: not in the offer ({offered})"
        problem = problem or self._slave_problem(slave_id, op.type, converted, consumed)
        if problem:
            raise OperationError(problem)
        used, made = Resources.from_millis(consumed), Resources.from_millis(converted)
        try:
            multi = role if fw.roles is not None else None  # (a multi-role one's client)
            self.allocator.update_allocation(fw.framework_id, slave_id, used, made, multi)
        except (AllocatorError, ResourceError) as e:  # (refused: the allocator changed nothing)
            raise OperationError(str(e)) from None
        self._changed(slave_id, op.type, used, made, framework_id=fw.framework_id)
        return used, made

    def may_make(self, fw: Framework, op: OfferOperation, role: str) -> bool:
        """Whether `fw` may make `op` on an offer of `role` (granted, in its role), before
        anything is done for it (a DESTROY's shared volume taken back from other offers)."""
        try:
            consumed, converted = self._conversion(op, fw.principal)
        except OperationError:
            return False
        return self._framework_may(fw, op.type, consumed, converted, role) is None

    def _framework_may(
        self, fw: Framework, kind: str, consumed: Millis, converted: Millis, role: str
    ) -> str | None:
        problem = grant_problem(self.may, fw.principal, kind, consumed, converted)
        return problem or framework_problem(fw, role, kind, consumed, converted)

    def by_operator(self, slave_id: str, op: OfferOperation, principal: str) -> None:
        """An operator's operation on a slave's resources no task uses, offered or free
        (for any role its grants allow: the caller is an operator principal; a RESERVE
        in its own name only); OperationError if it may not be."""
        consumed, converted = self._conversion(op, principal)
        problem = reserver_problem(principal, op.type, converted)
        problem = problem or grant_problem(self.may, principal, op.type, consumed, converted)
        problem = problem or self._slave_problem(slave_id, op.type, converted, consumed)
        if problem:
            raise OperationError(problem)
        used, made = Resources.from_millis(consumed), Resources.from_millis(converted)
        if op.type == DESTROY:  # (a shared volume in frameworks' offers: taken back first)
            self.rescind_shared(slave_id, used)
        for record in self._offers_holding(slave_id, used):
            self.offers.rescind(record)
        try:
            self.allocator.update_available(slave_id, used, made)
        except AllocatorError as e:
            raise OperationError(f"{e}{self._reserved_on(slave_id, op.type)}") from None
        self._changed(slave_id, op.type, used, made, principal=principal)

    def _reserved_on(self, slave_id: str, kind: str) -> str:
        """What an operator's refused UNRESERVE, CREATE, DESTROY or resize may have meant
        to name: the slave's reserved resources, as they are named (" (...)"; "" when it
        has none, or the operation names no reservation as it is)."""
        slave = self.books.slaves.get(slave_id)
        if kind == RESERVE or slave is None:
            return ""
        reserved = {k: v for k, v in slave.total.millis.items() if role_of(k) is not None}
        if not reserved:
            return ""
        return f" (it holds {Resources.from_millis(reserved)}: name them as they are)"

    async def on_operate(self, msg: OperateResources, caller: Caller) -> None:
        """An operator's call (over the bus, or the v1 operator API's): applied, or
        refused with why and nothing changed."""
        try:
            self.by_operator(msg.slave_id, msg.operation, caller.principal)
        except OperationError as e:
            why = str(e)  # (named once: what says which operation it was says it alone)
            why = why if why.startswith(msg.operation.type) else f"{msg.operation.type}: {why}"
            self.outbox.refuse(
                caller, why, "invalid-operation", "OperateResources", slave_id=msg.slave_id
            )
            return
        self.request_round()

    def rescind_shared(self, slave_id: str, destroyed: Resources) -> None:
        """A DESTROY of shared volumes no task uses: the offers outstanding that hold them
        are rescinded first (as Mesos does), so none is accepted after they are gone."""
        slave = self.books.slaves.get(slave_id)
        if slave is None:
            return
        for key in filter(is_shared, destroyed.millis):
            if self.books.resource_in_use(slave_id, key):
                continue  # (refused: a live task uses it)
            for offer_id in list(slave.offers):
                record = self.books.offers.get(offer_id)
                if record is not None and key in record.resources.millis:
                    self.offers.rescind(record)

    def _offers_holding(self, slave_id: str, needed: Resources) -> list[OfferRecord]:
        """The slave's offers outstanding to rescind so that what is free holds `needed`
        (Mesos's `_operation`: "we greedily rescind one offer at a time until we've
        rescinded enough offers to cover for 'resources'"): the oldest first (held the
        longest), only those holding some of what is missing; offers not needed stay. Empty
        if what is free holds it already, or if rescinding all would not (tasks use it:
        refused as it is, no offer taken back for nothing)."""
        free = self.allocator.free(slave_id).millis
        missing = {k: v - free.get(k, 0) for k, v in needed.millis.items() if v > free.get(k, 0)}
        if not missing:
            return []
        slave = self.books.slaves[slave_id]
        records = sorted(
            (r for r in map(self.books.offers.get, slave.offers) if r is not None),
            key=lambda r: (r.created_at, r.offer_id),
        )
        chosen: list[OfferRecord] = []
        for record in records:
            held = record.resources.millis
            if not any(k in held for k in missing):
                continue
            chosen.append(record)
            for key in [k for k in missing if k in held]:
                missing[key] -= held[key]
                if missing[key] <= 0:
                    del missing[key]
            if not missing:
                return chosen
        return []

    def _conversion(self, op: OfferOperation, principal: str) -> tuple[Millis, Millis]:
        try:
            return op.conversion(claimed(op.type, dict(op.resources.millis), principal))
        except ReservationError as e:
            raise OperationError(str(e)) from None

    def _slave_problem(
        self, slave_id: str, kind: str, converted: Millis, consumed: Millis
    ) -> str | None:
        slave = self.books.slaves.get(slave_id)
        if slave is None:
            return f"unknown slave {slave_id}"
        # (by base name: the slave's values are keyed as given, `ports(svc)` when reserved)
        by_values = {base_of(k) for k in slave.discrete.by_name}
        valued = sorted({base_of(k) for k in (*consumed, *converted)} & by_values)
        if valued and kind in (RESERVE, UNRESERVE):
            # (its count would move and its values stay behind, named by nobody's count)
            return (
                f"{kind} of {', '.join(valued)}: resources named by their values (ranges, "
                "sets) are reserved in the slave's --resources only, e.g. "
                f"{valued[0]}(ROLE):[8000-8010]"
            )
        problem = _over_budget(slave_id, slave.total.millis, converted)
        if problem:
            return problem
        if kind == CREATE:
            # an id is one of a kind within its role on a slave, as in Mesos: a volume's
            # directory is its role's and its id's (another role's ids are no concern)
            ids = {_volume_of(k) for k in slave.total if "[" in k and parse_key(k).volume}
            made = [_volume_of(k) for k in converted]
            for role, vid in made:
                if (role, vid) in ids:
                    return f"a volume {vid} of role {role or '*'} is on slave {slave_id} already"
            if len(set(made)) < len(made):  # (they would be one directory)
                named = ", ".join(sorted(vid for _, vid in made))
                return f"it names a volume id twice ({named}): an id is one volume"
        if kind == DESTROY or kind in NON_SPECULATIVE:
            for key, amount in consumed.items():
                if not parse_key(key).volume:
                    continue  # (a GROW_VOLUME's addition: free disk of its reservation)
                if self.in_use(slave_id, key):
                    return f"{key}: a live task uses it"
                whole = slave.total.millis.get(key, 0)  # (as Mesos: the volume as it is)
                if whole != amount:
                    return f"{key}: not the whole volume (it is {whole / 1000:g})"
        return None

    def _changed(
        self, slave_id: str, kind: str, used: Resources, made: Resources, **who: str
    ) -> None:
        """The books and the slave follow what the allocator did."""
        slave = self.books.slaves[slave_id]
        slave.total = slave.total - used + made
        kept = Resources.from_millis(checkpointed(slave.total.millis))
        self.outbox.checkpoint_resources(slave_id, kept, used if kind == DESTROY else None)
        self.log.info(
            "resources.operation", kind=kind, slave_id=slave_id, consumed=str(used),
            converted=str(made), **who,
        )  # fmt: skip
        self.outbox.emit(kind.lower(), slave_id=slave_id, resources=made, **_framework(who))


def _over_budget(slave_id: str, total: Mapping[str, int], converted: Millis) -> str | None:
    """Why the resources `converted` would put the slave, or a role on it, over its
    bound of resources of their own (None if they would not; one already over it may
    still make fewer, a DESTROY or an UNRESERVE)."""
    keys = total.keys() | converted.keys()
    if len(keys) > MAX_SLAVE_KEYS and len(keys) > len(total):
        return (
            f"slave {slave_id} would hold {len(keys)} resources of their own (reservations, "
            f"volumes): at most {MAX_SLAVE_KEYS}"
        )
    for role in sorted({_role_of_key(k) for k in converted.keys() - total.keys()}):
        has = sum(1 for k in keys if _role_of_key(k) == role)
        if has > MAX_ROLE_KEYS and has > sum(1 for k in total if _role_of_key(k) == role):
            return (
                f"role {role} would hold {has} resources of its own on slave {slave_id} "
                f"(reservations, volumes): at most {MAX_ROLE_KEYS}"
            )
    return None


def _role_of_key(key: str) -> str:
    """The role a resource is reserved for ("*": unreserved): roles are granted to
    principals one by one, sub-roles too (review 70: sibling sub-roles of two tenants
    shared their parent's bound, and one's 1,022 volumes left the other none)."""
    return parse_key(key).role or "*"


def _framework(who: dict[str, str]) -> dict[str, str]:
    return {"framework_id": who["framework_id"]} if "framework_id" in who else {}


def _volume_of(key: str) -> tuple[str, str]:
    """A volume's role ("" on unreserved disk) and id: one directory on its slave."""
    rid = parse_key(key)
    assert rid.volume is not None
    return rid.role or "", rid.volume.id
