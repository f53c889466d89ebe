"""Who may make an operation on whose a slave's resources are: the operator's grants (Mesos's
reserve_resources, unreserve_resources, create_volumes, destroy_volumes and resize_volume
ACLs, `protocol.tooling.operation_grants`), and what a framework may do in its offer's
role whatever it was granted.

The principal is the caller's (the broker's, or the HTTP credentials'), never a payload's,
and the roles are those the resources are reserved for: naming another principal or role
in an operation gains a tenant nothing but a refusal.
"""

from __future__ import annotations

from collections.abc import Callable

from master.books import Framework
from protocol.wire.reservations import (
    CREATE,
    DESTROY,
    GROW_VOLUME,
    RESERVE,
    SHRINK_VOLUME,
    UNRESERVE,
    is_shared,
    offered_to,
    parse_key,
)

Millis = dict[str, int]

GRANT_OF = {
    RESERVE: "reserve",
    UNRESERVE: "unreserve",
    CREATE: "create-volume",
    DESTROY: "destroy-volume",
    GROW_VOLUME: "resize-volume",
    SHRINK_VOLUME: "resize-volume",
}
"""The grant each operation needs (`drfmesos auth grant NAME GRANT`)."""

May = Callable[[str, str, str | None], str | None]
"""(principal, grant, role) -> None if it may, else why not (`RoleACL.may`)."""


def acted_on(kind: str, consumed: Millis, converted: Millis) -> list[str]:
    """The roles an operation acts for, as Mesos authorizes it: a RESERVE's and a CREATE's
    as they will be reserved, the others' as they are."""
    keys = converted if kind in (RESERVE, CREATE) else consumed
    return sorted({parse_key(key).role or "*" for key in keys})


def grant_problem(
    may: May, principal: str, kind: str, consumed: Millis, converted: Millis
) -> str | None:
    """Why `principal` was not granted this operation (None if it was)."""
    for role in acted_on(kind, consumed, converted):
        problem = may(principal, GRANT_OF[kind], role)
        if problem:
            return problem
    return None


def reserver_problem(principal: str, kind: str, converted: Millis) -> str | None:
    """Why a RESERVE names another principal than its caller's (None if it names none
    but the caller's): a reservation says who made it, and its maker may unreserve it, so
    an operator's in a tenant's name would hand that tenant what the operator keeps. As
    Mesos's `validate(Reserve)`; a caller with no principal (no authentication) is not
    checked, as there."""
    if kind != RESERVE or not principal:
        return None
    for key in converted:
        named = parse_key(key).reservations[-1].principal
        if named != principal:
            return f"{key}: reserved in another principal's name than {principal!r}"
    return None


def framework_problem(
    fw: Framework, role: str, kind: str, consumed: Millis, converted: Millis
) -> str | None:
    """Why `fw` may not make this operation on an offer of `role` (None if it may),
    whatever it was granted: it reserves for its offer's role alone in its own principal's
    name, unreserves only what its principal reserved for that role, and makes, ends and
    resizes volumes only on disk reserved for that role (or one above it, which it is
    offered: there it ends and resizes only those on its principal's reservations)."""
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
            rid = parse_key(key)
            reserved_for = rid.role or ""
            if not offered_to(reserved_for, role):
                return f"{key}: a volume on disk reserved for {role} (or above it) only"
            # a volume above its role (offered to it, as its role's sub-role) it ends or
            # resizes only on a reservation its principal made: another's is not its own
            # to destroy, as UNRESERVE asks (its own role's are its role's, as in Mesos)
            maker = rid.reservations[-1].principal if rid.reservations else principal
            theirs = rid.volume is not None and maker != principal
            if kind != CREATE and reserved_for != role and theirs:
                return f"{key}: a volume of role {reserved_for} not reserved by {fw.principal!r}"
            if kind == CREATE and is_shared(key) and not fw.shared_resources:
                return f"{key}: a shared volume is made by a SHARED_RESOURCES framework only"
    return None
