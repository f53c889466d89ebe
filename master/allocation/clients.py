"""A framework's clients in the allocator: who the role orders, the books and the filters
know it as.

A framework of one role is one client, named by its id (as it always was). A multi-role
framework (Mesos's MULTI_ROLE, `FrameworkInfo.roles`) is a client in each of its roles,
as Mesos puts it in each of its roles' sorters: its allocation, its decline filters and
its suppression are kept a role, each role's client is ordered among that role's
frameworks, and what one role's client holds is that role's (its share, its quota). A
role's client is named `<framework id>/<role>`: a framework id has no '/', so no name of
one framework's client is another framework's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from master.allocation.ledger import AllocatorError

SEPARATOR = "/"


class ClientError(AllocatorError):
    """A role a framework is not in, or a multi-role framework asked of without one."""


class Clients:
    def __init__(self) -> None:
        self._roles: dict[str, dict[str, str]] = {}  # multi-role framework -> role -> client
        # each multi-role client's framework and role (an offer names both)
        self.owner: dict[str, tuple[str, str]] = {}

    def add(self, framework_id: str, roles: Sequence[str]) -> dict[str, str]:
        """A multi-role framework's clients, by role (each role once, in its order)."""
        if not roles:
            raise ClientError(f"framework {framework_id}: a multi-role framework needs a role")
        if SEPARATOR in framework_id:
            raise ClientError(f"framework id {framework_id} must not contain {SEPARATOR!r}")
        clients = {role: f"{framework_id}{SEPARATOR}{role}" for role in dict.fromkeys(roles)}
        self._roles[framework_id] = clients
        for role, client in clients.items():
            self.owner[client] = (framework_id, role)
        return clients

    def replace(self, framework_id: str, roles: Sequence[str]) -> dict[str, str]:
        """A multi-role framework's roles are `roles` now, in this order: its clients of
        the new ones, by role (those of roles it keeps are the same clients)."""
        if not roles:
            raise ClientError(f"framework {framework_id}: a multi-role framework needs a role")
        old = self._roles[framework_id]
        for role, client in old.items():
            if role not in roles:
                del self.owner[client]
        clients = {role: f"{framework_id}{SEPARATOR}{role}" for role in dict.fromkeys(roles)}
        self._roles[framework_id] = clients
        added = {role: client for role, client in clients.items() if role not in old}
        for role, client in added.items():
            self.owner[client] = (framework_id, role)
        return added

    def remove(self, framework_id: str) -> None:
        for client in self._roles.pop(framework_id, {}).values():
            del self.owner[client]

    def multi_role(self, framework_id: str) -> bool:
        return framework_id in self._roles

    def roles(self, framework_id: str) -> list[str] | None:
        """A multi-role framework's roles (None: it has one role, its client's)."""
        clients = self._roles.get(framework_id)
        return None if clients is None else list(clients)

    def of(self, framework_id: str, roles: Iterable[str] | None = None) -> list[str]:
        """Its clients: every one (`roles` None or empty, as Mesos's SUPPRESS and REVIVE
        read no roles), or those of `roles` (ClientError for a role it is not in)."""
        clients = self._roles.get(framework_id)
        if clients is None:
            return [framework_id]
        wanted = list(roles or ())
        if not wanted:
            return list(clients.values())
        return [self._in(framework_id, clients, role) for role in wanted]

    def one(self, framework_id: str, role: str | None) -> str:
        """The client holding what a framework has in `role` (a one-role framework's is
        itself, whatever it is asked: it has nothing in another role)."""
        clients = self._roles.get(framework_id)
        if clients is None:
            return framework_id
        if role is None:
            raise ClientError(f"framework {framework_id} has several roles: name one")
        return self._in(framework_id, clients, role)

    def first(self, framework_id: str) -> str:
        """Its first role's client (where what names no role goes: a preemption's hold)."""
        clients = self._roles.get(framework_id)
        return framework_id if clients is None else next(iter(clients.values()))

    @staticmethod
    def _in(framework_id: str, clients: dict[str, str], role: str) -> str:
        try:
            return clients[role]
        except KeyError:
            raise ClientError(f"framework {framework_id} is not in role {role}") from None
