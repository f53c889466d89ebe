"""The codes of why a framework is offered nothing, and the kinds of number behind each:
plain Python, so the offer cycle (which loads no wire model) computes them and the wire
(`protocol.wire.why`) carries them."""

from __future__ import annotations

from enum import StrEnum

# A number behind a reason: an amount, a name, names, or amounts by resource or by slave.
Figure = float | str | list[str] | dict[str, float]


class WhyCode(StrEnum):
    """What keeps offers from a framework (docs: how-to/why-no-offers.md says each)."""

    NO_SLAVE = "no-slave"  # no slave is registered and connected
    ROLE_NOT_ALLOWED = "role-not-allowed"  # its principal may not use its role now, or a
    # zero limit freezes the role
    DISCONNECTED = "disconnected"  # its scheduler is away: offered nothing until it is back
    RATE_LIMITED = "rate-limited"  # its calls wait in its principal's queue, or were refused
    SUPPRESSED = "suppressed"  # it asked for no offers (until it revives)
    MAINTENANCE = "maintenance"  # slaves an operator drains or deactivated: offered to no one
    MIN_OFFER_FITS_NO_SLAVE = "min-offer-fits-no-slave"  # its declared smallest offer
    TASK_FITS_NO_SLAVE = "task-fits-no-slave"  # the task it asked for (Request)
    OFFERS_OUTSTANDING = "offers-outstanding"  # it holds offers it has not answered
    QUOTA_LIMIT = "quota-limit"  # its role is at its limit
    HELD_FOR_GUARANTEE = "held-for-guarantee"  # what is free is kept for others' guarantees
    HELD_FOR_PREEMPTION = "held-for-preemption"  # room freed by preemption for another
    RESERVED_FOR_OTHERS = "reserved-for-others"  # what is free is reserved for other roles
    DECLINED_FILTER = "declined-filter"  # it declined what is free, and filtered it a while
    LOWER_IN_ORDER = "lower-in-order"  # all is allocated and others come first in the order
    CLUSTER_FULL = "cluster-full"  # all is allocated; it comes first when something frees
    NEXT_ROUND = "next-round"  # it may take what is free now: the next round offers it
