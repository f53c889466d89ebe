"""The tasks of a removed framework while they die.

A framework removed (torn down, or past its failover timeout) has its slaves told to shut
it down: each of its tasks gets SIGTERM, its kill grace (up to a minute), then SIGKILL.
Until its slave says they have all ended (`FrameworkShutDown`), what they use is held by
nobody, so that it is not offered to anyone -- the framework's own next incarnation
included -- while they still run on it; and counted in their role's share, so that the
principal's next framework is not first in the order for the room they still use. A
slave that never says so (one from before the message, or one whose word is lost) is
believed after HELD_AT_MOST; a slave removed takes its holds with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.resources import Resources

# the slave's most kill grace (60 s by default), the executor's shutdown after it, and a
# margin: past this a slave that has said nothing is taken to have ended them (longer for
# tasks whose kill policy asked for more: a slave's operator may allow it, `held_for`)
HELD_AT_MOST = 75.0
MARGIN = HELD_AT_MOST - 60.0


def held_for(graces: Iterable[float]) -> float:
    """How long dying tasks with these kill graces (their policies') are held at most."""
    longest = max(graces, default=None)
    return HELD_AT_MOST if longest is None else max(HELD_AT_MOST, longest + MARGIN)


# what dying tasks hold on a slave, by the role it counts in ("": none's, an orphan's)
ByRole = dict[str, Resources]


def charge(by_role: ByRole, role: str, resources: Resources) -> None:
    """`resources` more held in `role`."""
    by_role[role] = by_role.get(role, Resources()) + resources


@dataclass(slots=True)
class _Held:
    by_role: ByRole
    values: Discrete  # the ports (and other named values) they are bound to
    until: float
    hold_for: float  # seconds: how long a slave that says nothing is waited for


class Dying:
    def __init__(self) -> None:
        self._held: dict[tuple[str, str], _Held] = {}  # (slave id, framework id)
        self._slaves: dict[str, int] = {}  # slave id: its holds (a look per offer is cheap)

    def __len__(self) -> int:
        return len(self._held)

    def add(
        self,
        slave_id: str,
        framework_id: str,
        by_role: ByRole,
        now: float,
        values: Discrete = EMPTY,
        hold_for: float | None = None,
    ) -> None:
        hold_for = HELD_AT_MOST if hold_for is None else hold_for
        key = (slave_id, framework_id)
        held = self._held.get(key)
        if held is None:
            self._held[key] = _Held(by_role, values, now + hold_for, hold_for)
            self._slaves[slave_id] = self._slaves.get(slave_id, 0) + 1
        else:  # (removed again, as a framework known also by orphans can be)
            held.hold_for = max(held.hold_for, hold_for)
            for role, resources in by_role.items():
                charge(held.by_role, role, resources)
            held.until = now + held.hold_for
            held.values = Discrete.union([held.values, values])

    def renew(self, slave_id: str, framework_id: str, now: float) -> bool:
        """The slave is told (again) now: its hold runs its time from now (False: none)."""
        held = self._held.get((slave_id, framework_id))
        if held is not None:
            held.until = now + held.hold_for
        return held is not None

    def on(self, slave_id: str) -> list[str]:
        """The frameworks whose dying tasks hold anything on the slave (a drain waits for
        them, and cuts their grace)."""
        if slave_id not in self._slaves:
            return []
        return [f for (s, f) in self._held if s == slave_id]

    def values_on(self, slave_id: str) -> list[Discrete]:
        """The named values (ports) dying tasks still hold on the slave."""
        if slave_id not in self._slaves:
            return []
        return [h.values for (s, _), h in self._held.items() if s == slave_id and h.values]

    def take(self, slave_id: str, framework_id: str) -> ByRole | None:
        """What the framework's dying tasks held on the slave, no longer kept (None: none)."""
        held = self._held.pop((slave_id, framework_id), None)
        if held is None:
            return None
        self._forget_one(slave_id)
        return held.by_role

    def overdue(self, now: float) -> list[tuple[str, str, ByRole]]:
        """(slave, framework, what was held) of each hold past its time, no longer kept."""
        due = [key for key, held in self._held.items() if held.until <= now]
        for slave_id, _ in due:
            self._forget_one(slave_id)
        return [(*key, self._held.pop(key).by_role) for key in due]

    def drop_slave(self, slave_id: str) -> None:
        """Its slave removed: its holds go with it (the allocator drops the slave)."""
        for key in [k for k in self._held if k[0] == slave_id]:
            del self._held[key]
        self._slaves.pop(slave_id, None)

    def _forget_one(self, slave_id: str) -> None:
        left = self._slaves[slave_id] - 1
        if left:
            self._slaves[slave_id] = left
        else:
            del self._slaves[slave_id]
