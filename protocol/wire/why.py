"""Why a framework is offered nothing: the question (`AskWhy`, an operator's or the
framework's own), the answer (`Why`), and its reasons, each a code and the numbers behind
it. The master computes them (`master.cycle.why`), the simulator too; the CLI, the HTTP
API, the web UI and the SDK show them. The first reason is the one that explains."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from protocol.wire.resources import Resources
from protocol.wire.values import Id, Wire


class WhyCode(StrEnum):
    """What keeps offers from a framework (docs: how-to/why-no-offers.md says each)."""

    NO_SLAVE = "no-slave"  # no slave is registered and connected
    ROLE_NOT_ALLOWED = "role-not-allowed"  # its principal may not use its role now, or a
    # zero limit freezes the role
    DISCONNECTED = "disconnected"  # its scheduler is away: offered nothing until it is back
    RATE_LIMITED = "rate-limited"  # its calls wait in its principal's queue, or were refused
    SUPPRESSED = "suppressed"  # it asked for no offers (until it revives)
    MIN_OFFER_FITS_NO_SLAVE = "min-offer-fits-no-slave"  # its declared smallest offer
    TASK_FITS_NO_SLAVE = "task-fits-no-slave"  # the task it asked for (Request)
    OFFERS_OUTSTANDING = "offers-outstanding"  # it holds offers it has not answered
    QUOTA_LIMIT = "quota-limit"  # its role is at its limit
    HELD_FOR_GUARANTEE = "held-for-guarantee"  # what is free is kept for others' guarantees
    HELD_FOR_PREEMPTION = "held-for-preemption"  # room freed by preemption for another
    DECLINED_FILTER = "declined-filter"  # it declined what is free, and filtered it a while
    LOWER_IN_ORDER = "lower-in-order"  # all is allocated and others come first in the order
    CLUSTER_FULL = "cluster-full"  # all is allocated; it comes first when something frees
    NEXT_ROUND = "next-round"  # it may take what is free now: the next round offers it


# A number behind a reason: an amount, a name, names, or amounts by resource or by slave.
Figure = float | str | list[str] | dict[str, float]


class WhyReason(Wire):
    """One reason: its code, a sentence for people, and the numbers behind it (the how-to
    lists each code's)."""

    code: WhyCode
    message: str = Field(max_length=2000)
    numbers: dict[str, Figure] = Field(default_factory=dict, max_length=50)


class WhyOffered(Wire):
    """An offer a framework was made lately: what, of which slave, and how long ago."""

    slave_id: str
    resources: Resources
    seconds_ago: float = Field(ge=0)
    at: float = 0.0  # wall clock, seconds since the epoch (0: not known)


class AskWhy(Wire):
    """Operator or framework -> master: why is this framework (its id, or its name) offered
    nothing? A framework principal may ask of its own frameworks only. Answered with `Why`
    (or an Error), on the asker's answers topic or `reply_to`."""

    framework: Id


class Why(Wire):
    """Master -> asker: the reasons, the one that explains first; the offers it was made
    in the master's recent rounds, newest first; how many rounds those cover."""

    framework_id: str
    name: str
    role: str
    reasons: list[WhyReason] = Field(default_factory=list, max_length=50)
    offered: list[WhyOffered] = Field(default_factory=list, max_length=50)
    rounds: int = 0  # rounds that made offers, remembered: `offered` looks back this far
    since: float = 0.0  # seconds: how far back they go (0: no round made offers yet)
    timestamp: float = 0.0  # wall clock, when the master answered

    @property
    def top(self) -> WhyReason | None:
        return self.reasons[0] if self.reasons else None
