"""What a principal may do to whose a slave's resources are: Mesos's reserve_resources,
unreserve_resources, create_volumes, destroy_volumes and resize_volume ACLs, one grant
per operation, kept in principals.json beside the principal's roles.

    reserve          RESERVE: hold resources for a role (off for frameworks until granted:
                     a tenant that reserved an idle cluster would keep it from the rest)
    unreserve        UNRESERVE: give them back (a framework: only what its principal
                     reserved, whatever the grant)
    create-volume    CREATE: a persistent volume on reserved disk
    destroy-volume   DESTROY: end one
    resize-volume    GROW_VOLUME and SHRINK_VOLUME

An operator changes a grant (`drfmesos auth grant NAME OPERATION [--role R]`, `auth revoke
NAME OPERATION`); one it never changed is the default: every operation but a framework's
RESERVE. A grant may name roles: then the operation is allowed on resources reserved for
those roles alone (exactly those: a grant for `eng` is not one for `eng/web`). Whatever a
grant says, a framework acts only in its offer's role (the master's `framework_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

OPERATIONS = ("reserve", "unreserve", "create-volume", "destroy-volume", "resize-volume")


class GrantError(ValueError):
    """A grant that cannot be read or made."""


@dataclass(frozen=True, slots=True)
class Grant:
    allowed: bool
    roles: tuple[str, ...] = ()  # allowed for these roles only; (): for every role

    def covers(self, role: str | None) -> bool:
        """Allowed for `role` (None: for some role)."""
        return self.allowed and (not self.roles or role is None or role in self.roles)

    def text(self) -> str:
        if not self.allowed:
            return "no"
        return ",".join(self.roles) if self.roles else "any role"


def default(kind: str, operation: str) -> bool:
    """An operation allowed when no operator said: all but a framework's RESERVE."""
    return operation != "reserve" or kind != "framework"


def check_operation(operation: str) -> str:
    if operation not in OPERATIONS:
        raise GrantError(f"operation {operation!r}: one of {', '.join(OPERATIONS)}")
    return operation


@dataclass(frozen=True, slots=True)
class Grants:
    """The grants an operator set for one principal (the rest are the defaults)."""

    given: tuple[tuple[str, Grant], ...] = ()  # (operation, grant), in OPERATIONS' order

    def get(self, operation: str) -> Grant | None:
        for op, grant in self.given:
            if op == operation:
                return grant
        return None

    def may(self, kind: str, operation: str, role: str | None) -> bool:
        grant = self.get(operation)
        return default(kind, operation) if grant is None else grant.covers(role)

    def setting(self, operation: str, grant: Grant) -> Grants:
        given = dict(self.given)
        given[check_operation(operation)] = grant
        return Grants(tuple((op, given[op]) for op in OPERATIONS if op in given))

    def to_json(self) -> dict[str, dict[str, object]]:
        return {
            op: {"allowed": g.allowed} | ({"roles": list(g.roles)} if g.roles else {})
            for op, g in self.given
        }

    @classmethod
    def from_json(cls, doc: object, *, reserve: object = False) -> Grants:
        """A principal's `operations` object; `reserve`: the older files' one grant."""
        if not isinstance(reserve, bool):
            raise GrantError(f"reserve is true or false, not {reserve!r}")
        grants = cls()
        if reserve:
            grants = grants.setting("reserve", Grant(True))
        if doc is None:
            return grants
        if not isinstance(doc, Mapping):
            raise GrantError(f"operations is an object, not {doc!r}")
        for op, body in doc.items():
            if not isinstance(body, Mapping) or not isinstance(body.get("allowed"), bool):
                raise GrantError(f"operations.{op}: {{'allowed': true or false, 'roles': [...]}}")
            roles = body.get("roles", [])
            if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
                raise GrantError(f"operations.{op}.roles: a list of roles")
            grants = grants.setting(str(op), Grant(body["allowed"], tuple(roles)))
        return grants
