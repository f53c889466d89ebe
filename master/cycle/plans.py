"""What the offer cycle decides that only a shell can carry out, as data: the master
applies it over the bus, the simulator on its event heap. What it decides in the
allocator's books (offers booked, filters set, room held) it has done already, as
Mesos's allocator books an offer when it makes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from master.allocation.ledger import Allocation
from master.allocation.preemption import Claim
from protocol.wire.resources import Resources


class RoundPlan(NamedTuple):
    """A round's offers to send, in the order decided; and those held back past a
    framework's bound (`offer_bound`), back in the pool and kept from it a while. (A
    named tuple: a simulated run makes one a round, and a frozen dataclass costs several
    times as much to make.)"""

    offers: list[Allocation]
    held_back: Sequence[Allocation] = ()


@dataclass(frozen=True, slots=True)
class TimedOut:
    """An offer left unanswered past the offer timeout, to rescind: its resources are
    back in the pool, kept from its framework on that slave for `refuse_seconds`."""

    offer_id: str
    framework_id: str
    slave_id: str
    resources: Resources
    refuse_seconds: float


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    """The check's claims: each claim's victims are to be warned now and killed at
    `kill_at` (`OfferCycle.kills_due` names them then); the room they free is held for
    the claimant."""

    claims: list[Claim] = field(default_factory=list)
    kill_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Kill:
    """A victim whose notice is over: kill it (it ends preempted)."""

    framework_id: str
    task_id: str
    slave_id: str
