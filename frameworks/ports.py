"""Ports out of an offer, for the tasks a framework launches on it.

    picker = OfferPorts(offer)
    task = build_task(offer, "web", Resources(cpus=0.1, mem=64), command=...,
                      discrete=picker.take(1))

A task names the ports it takes (`TaskInfo.discrete`); the master refuses ports that are
not in the offer or that another task holds. The slave gives the task its ports as
`PORT0`, `PORT1`, ... and `PORTS` (comma-separated), as Marathon names them.
"""

from __future__ import annotations

from frameworks.errors import DriverError
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Offer
from protocol.wire.resources import PORTS


class NotEnoughPorts(DriverError):
    """An offer has fewer free ports than a task asks for."""


class OfferPorts:
    """The ports of one offer, handed out lowest first, each once."""

    def __init__(self, offer: Offer) -> None:
        value = offer.discrete.get(PORTS)
        self.left: Ranges = value if isinstance(value, Ranges) else Ranges()

    @property
    def free(self) -> int:
        """How many ports are left to hand out."""
        return self.left.size

    def take(self, n: int) -> Discrete:
        """The lowest `n` ports left, as a task's `discrete` (NotEnoughPorts if fewer)."""
        if n > self.left.size:
            raise NotEnoughPorts(f"the offer has {self.left.size} ports left, not {n}")
        taken = self.left.take(n)
        self.left = self.left.subtract(taken)
        return Discrete({PORTS: taken})


def take_ports(offer: Offer, n: int) -> Discrete:
    """The lowest `n` ports of `offer` (for one task on it; several: `OfferPorts`)."""
    return OfferPorts(offer).take(n)


def ports_of(task_discrete: Discrete) -> list[int]:
    """A task's ports, lowest first."""
    value = task_discrete.get(PORTS)
    if not isinstance(value, Ranges):
        return []
    return [p for begin, end in value.spans for p in range(begin, end + 1)]
