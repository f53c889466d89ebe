"""What the offer cycle reads of the books it does not keep (Nomad's `State`): the
offers outstanding, what each framework wants, and the tasks that run. The master reads
them from its books (`master.cycle_books`), the simulator from its own; the allocator's
books the cycle reads itself."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from master.allocation.planning import RunningTask
from master.allocation.sorter import Millis
from protocol.wire.resources import Resources


@dataclass(frozen=True, slots=True)
class Wish:
    """A framework as preemption weighs it: whether it is connected (it wants offers
    unless it suppressed them, which the cycle knows), and what it declared it still
    wants, as (task, count); with nothing declared, the shape of the tasks it runs."""

    framework_id: str
    role: str
    connected: bool = True
    demand: list[tuple[Millis, int]] | None = None
    shape: Millis | None = None
    tenant: str = ""  # whose (its principal): preemption's wait for unused claims is its


class Outstanding(Protocol):
    """An offer made and not answered yet."""

    @property
    def offer_id(self) -> str: ...
    @property
    def framework_id(self) -> str: ...
    @property
    def slave_id(self) -> str: ...
    @property
    def resources(self) -> Resources: ...
    @property
    def created_at(self) -> float: ...
    @property
    def role(self) -> str | None: ...  # a multi-role framework's offer's (else None)


class State(Protocol):
    def offers_held(self) -> Mapping[str, int]:
        """How many outstanding offers each framework holds (one not named: none)."""
        ...

    def outstanding(self) -> Iterable[Outstanding]:
        """Every outstanding offer (read only while offers time out)."""
        ...

    def wishes(self, now: float) -> Iterable[Wish]:
        """Every framework the allocator knows, with what it wants at `now` (read only
        by preemption)."""
        ...

    def wish(self, framework_id: str, now: float) -> Wish | None:
        """One framework's, as `wishes` gives it (None: the allocator does not know it);
        read by `why`, which asks of one framework."""
        ...

    def running(self) -> Iterable[RunningTask]:
        """Every task not ended (read only by preemption's check)."""
        ...

    def task_live(self, framework_id: str, task_id: str) -> bool:
        """Whether the task runs still (a victim that ended meanwhile is not killed)."""
        ...
