"""Who may do what, as the master sees it: callers, the register_frameworks ACL, samplers.

The broker proves *who* sends a call (the topic it arrives on, see `protocol.wire.topics`); the
master decides *whether* that principal may do it. Ownership (a framework id belongs to
the principal that registered it, a slave id to the principal it first registered with)
is checked where the books are; here live the parts that need no books.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from protocol import logs
from protocol.tooling.credentials import CredentialsError, Principal, load_principals
from protocol.wire.topics import Sender

log = logs.get("authz")


@dataclass(frozen=True, slots=True)
class Caller:
    """The sender of one call, and where answers about it may go."""

    kind: str
    principal: str
    reply_to: str | None  # inside the caller's own outbox, or None
    # told of a refusal (its code and reason) by a caller that answers otherwise (HTTP)
    refused: Callable[[str, str], None] | None = None

    @classmethod
    def of(cls, sender: Sender, reply_to: str | None) -> Caller:
        return cls(sender.kind, sender.principal, reply_to)


class RoleACL:
    """Mesos's `register_frameworks` ACL: the roles each framework principal may use.

    Without a principals file every principal may use every role (a cluster without
    authentication, as Mesos without ACLs). With one, it is re-read when it changes, so
    `drfmesos auth add` reaches a running master.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._principals: dict[str, Principal] | None = None
        self._mtime = 0
        if path is not None:
            self._principals = load_principals(path)  # a bad file stops the master at start
            self._mtime = path.stat().st_mtime_ns

    def check(self, principal: str, role: str) -> str | None:
        """None if `principal` may register a framework in `role`, else why not."""
        if self._principals is None:
            return None
        known = self._principals.get(principal)
        if known is None:
            return self.unknown(principal)
        if known.kind != "framework":
            return f"principal {principal} is a {known.kind}, not a framework principal"
        if not known.may_use_role(role):
            allowed = ", ".join(known.roles) or "none"
            return f"principal {principal} may not register in role {role!r} (allowed: {allowed})"
        return None

    def may_reserve(self, principal: str) -> str | None:
        """None if `principal` may make dynamic reservations (RESERVE) for some role, else
        why not: an operator grants it (`drfmesos auth add --reserve`), as Mesos's
        reserve_resources ACL. Without a principals file anyone may, as Mesos without
        ACLs."""
        return self.may(principal, "reserve", None)

    def may(self, principal: str, operation: str, role: str | None) -> str | None:
        """None if `principal` may make `operation` (`reserve`, `create-volume`, ...:
        `protocol.tooling.operation_grants`) on resources reserved for `role`, else why
        not. Without a principals file anyone may, as Mesos without ACLs."""
        if self._principals is None:
            return None
        known = self._principals.get(principal)
        if known is not None and known.may(operation, role):
            return None
        where = f" for role {role!r}" if role is not None else ""
        return (
            f"principal {principal} may not {operation}{where}: an operator grants it "
            f"(drfmesos auth grant DIR {principal} {operation})"
        )

    def knows(self, principal: str) -> bool:
        """Whether `principal` is in the cluster's principals (all are, without a file)."""
        return self._principals is None or principal in self._principals

    def check_roles(self, principal: str, roles: Iterable[str]) -> str | None:
        """None if `principal` may register a framework in each of `roles`, else why not
        (the first it may not)."""
        return next(filter(None, (self.check(principal, role) for role in roles)), None)

    def unknown(self, principal: str) -> str | None:
        """Why `principal` may call nothing (removed from the cluster's principals), or
        None if it may call."""
        if self.knows(principal):
            return None
        return f"principal {principal} is not in the cluster's principals"

    async def refresh(self) -> bool:
        """Re-read the file if it changed (off the event loop); whether it was."""
        if self.path is None:
            return False
        try:
            mtime = (await asyncio.to_thread(os.stat, self.path)).st_mtime_ns
            if mtime != self._mtime:
                self._principals = await asyncio.to_thread(load_principals, self.path)
                self._mtime = mtime
                log.info("principals.reloaded", principals=len(self._principals))
                return True
        except (OSError, CredentialsError) as e:
            log.warning("principals.reload_failed", error=str(e))  # keep the last good one
        return False
