"""Ids remembered a bounded number per principal, the oldest of each forgotten first.

Removed frameworks are remembered so that a removed id is refused (and its tasks shut
down where a slave brings them back). One bound for everybody would let one tenant's
churn of its own frameworks push everybody else's removals out; a bound per principal
lets it push out only its own.
"""

from __future__ import annotations

from protocol.tooling.remembered import keep_newest


class KeptByPrincipal:
    def __init__(self) -> None:
        self._of: dict[str, dict[str, None]] = {}  # principal: its ids, oldest first

    def add(self, principal: str, item: str, keep: int) -> list[str]:
        """Remember `item` as `principal`'s newest; the ids of its past `keep` to forget."""
        return keep_newest(self._of.setdefault(principal, {}), item, keep)
