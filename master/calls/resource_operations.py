"""Operations that change whose a slave's resources are: RESERVE, UNRESERVE, CREATE and
DESTROY, from a framework's Accept (on what it was offered) or from an operator (on what
is free: RESERVE_RESOURCES and the like).

Who may: identity is the caller's (the broker's, or the HTTP credentials'), never a
payload's. A framework reserves only for its own role, in its own principal's name, and
unreserves only what its principal reserved for its role; it makes and ends volumes only
on disk reserved for its role (or an ancestor's, which it is offered). A framework
reserves at all only if the operator granted its principal that (`drfmesos auth add
--reserve`, Mesos's reserve_resources ACL): a reservation holds resources from every
other role, so a tenant that reserved an idle cluster would keep it. An operator
principal reserves for any role.

Each change goes to the allocator (the same amounts, another owner), the master's books
and the slave, which checkpoints what it must keep across restarts (CheckpointResources):
a master that fails over learns it again when the slave re-registers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller
from master.books import Books, Framework
from master.outbox import Outbox
from protocol.wire.messages import OfferOperation, OperateResources
from protocol.wire.reservations import (
    CREATE,
    DESTROY,
    RESERVE,
    UNRESERVE,
    ReservationError,
    checkpointed,
    conversion,
    is_shared,
    offered_to,
    parse_key,
)
from protocol.wire.resources import ResourceError, Resources
from protocol.wire.slave import CheckpointResources

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


def framework_problem(
    fw: Framework, role: str, kind: str, consumed: Millis, converted: Millis
) -> str | None:
    """Why `fw` may not make this operation on an offer of `role` (None if it may): a
    multi-role framework reserves in each of its roles for that role alone."""
    principal = fw.principal or None
    if kind == RESERVE:
        for key in converted:
            last = parse_key(key).reservations[-1]
            if last.role != role:
                return f"{key}: an offer of role {role} reserves for {role} only"
            if last.principal != principal:
                return f"{key}: reserved in another principal's name than {fw.principal!r}"
    elif kind == UNRESERVE:
        for key in consumed:
            last = parse_key(key).reservations[-1]
            if last.role != role or last.principal != principal:
                return f"{key}: not reserved for {role} by {fw.principal!r}"
    else:
        for key in converted if kind == CREATE else consumed:
            reserved_for = parse_key(key).role or ""
            if not offered_to(reserved_for, role):
                return f"{key}: a volume on disk reserved for {role} (or above it) only"
            if kind == CREATE and is_shared(key) and not fw.shared_resources:
                return f"{key}: a shared volume is made by a SHARED_RESOURCES framework only"
    return None


class ResourceOperations:
    """Applies operations to a slave's resources: the allocator, the books, the slave."""

    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        outbox: Outbox,
        *,
        in_use: Callable[[str, str], bool],
        may_reserve: Callable[[str], str | None],
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        """`in_use(slave_id, key)`: whether a live task uses that resource (a volume);
        `may_reserve(principal)`: None if a framework's principal may RESERVE, else why
        not (the operator's grant, `RoleACL.may_reserve`)."""
        self.books, self.allocator, self.outbox = books, allocator, outbox
        self.in_use, self.request_round, self.log = in_use, request_round, log
        self.may_reserve = may_reserve

    def on_offer(
        self, fw: Framework, slave_id: str, op: OfferOperation, offered: Resources, role: str
    ) -> tuple[Resources, Resources]:
        """An Accept's operation on `offered` (what is left of its offers, of `role`):
        (consumed, converted), applied; OperationError if it may not be."""
        consumed, converted = self._conversion(op, fw.principal)
        problem = self.may_reserve(fw.principal) if op.type == RESERVE else None
        problem = problem or framework_problem(fw, role, op.type, consumed, converted)
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

    def by_operator(self, slave_id: str, op: OfferOperation, principal: str) -> None:
        """An operator's operation on a slave's free resources (for any role: the caller
        is an operator principal); OperationError if it may not be made."""
        consumed, converted = self._conversion(op, principal)
        problem = self._slave_problem(slave_id, op.type, converted, consumed)
        if problem:
            raise OperationError(problem)
        used, made = Resources.from_millis(consumed), Resources.from_millis(converted)
        try:
            self.allocator.update_available(slave_id, used, made)
        except AllocatorError as e:
            raise OperationError(f"{op.type}: {e}") from None
        self._changed(slave_id, op.type, used, made, principal=principal)

    async def on_operate(self, msg: OperateResources, caller: Caller) -> None:
        """An operator's call (over the bus, or the v1 operator API's): applied, or
        refused with why and nothing changed."""
        try:
            self.by_operator(msg.slave_id, msg.operation, caller.principal)
        except OperationError as e:
            self.outbox.refuse(
                caller, f"{msg.operation.type}: {e}", "invalid-operation", "OperateResources",
                slave_id=msg.slave_id,
            )  # fmt: skip
            return
        self.request_round()

    def _conversion(self, op: OfferOperation, principal: str) -> tuple[Millis, Millis]:
        try:
            return conversion(op.type, claimed(op.type, dict(op.resources.millis), principal))
        except ReservationError as e:
            raise OperationError(str(e)) from None

    def _slave_problem(
        self, slave_id: str, kind: str, converted: Millis, consumed: Millis
    ) -> str | None:
        slave = self.books.slaves.get(slave_id)
        if slave is None:
            return f"unknown slave {slave_id}"
        if kind == CREATE:
            ids = {parse_key(k).volume.id for k in slave.total if parse_key(k).volume}  # type: ignore[union-attr]
            for key in converted:
                vid = parse_key(key).volume.id  # type: ignore[union-attr]
                if vid in ids:
                    return f"a volume {vid} is on slave {slave_id} already"
            made = [parse_key(k).volume.id for k in converted]  # type: ignore[union-attr]
            if len(set(made)) < len(made):  # (they would be one directory)
                return (
                    f"it names a volume id twice ({', '.join(sorted(made))}): an id is one volume"
                )
        if kind == DESTROY:
            for key in consumed:
                if self.in_use(slave_id, key):
                    return f"{key}: a live task uses it"
        return None

    def _changed(
        self, slave_id: str, kind: str, used: Resources, made: Resources, **who: str
    ) -> None:
        """The books and the slave follow what the allocator did."""
        slave = self.books.slaves[slave_id]
        slave.total = slave.total - used + made
        self.outbox.send_slave(
            slave_id,
            CheckpointResources(
                slave_id=slave_id, resources=Resources.from_millis(checkpointed(slave.total.millis))
            ),
        )
        self.log.info(
            "resources.operation", kind=kind, slave_id=slave_id, consumed=str(used),
            converted=str(made), **who,
        )  # fmt: skip
        self.outbox.emit(kind.lower(), slave_id=slave_id, resources=made, **_framework(who))


def _framework(who: dict[str, str]) -> dict[str, str]:
    return {"framework_id": who["framework_id"]} if "framework_id" in who else {}
