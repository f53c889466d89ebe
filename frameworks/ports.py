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
from protocol.wire.reservations import base_of
from protocol.wire.resources import PORTS


class NotEnoughPorts(DriverError):
    """An offer has fewer free ports than a task asks for."""


class OfferPorts:
    """The ports of one offer, handed out lowest first, each once: those reserved for
    the offer's role (`ports(svc)`, as the slave gives them to a task as any others)
    before the unreserved ones, so a framework uses its role's first."""

    def __init__(self, offer: Offer) -> None:
        named = [k for k in offer.discrete if base_of(k) == PORTS]
        # (reserved first, then `ports`; each key's ports stay under its key in a task)
        self.left: dict[str, Ranges] = {
            k: v
            for k in sorted(named, key=lambda k: (k == PORTS, k))
            if isinstance(v := offer.discrete.get(k), Ranges)
        }

    @property
    def free(self) -> int:
        """How many ports are left to hand out."""
        return sum(r.size for r in self.left.values())

    def take(self, n: int) -> Discrete:
        """The lowest `n` ports left, as a task's `discrete` (NotEnoughPorts if fewer)."""
        if n > self.free:
            raise NotEnoughPorts(f"the offer has {self.free} ports left, not {n}")
        taken: dict[str, Ranges] = {}
        for key, left in self.left.items():
            if n == 0:
                break
            some = left.take(min(n, left.size))
            if some.size:
                taken[key] = some
                self.left[key] = left.subtract(some)
                n -= some.size
        return Discrete(taken)


def take_ports(offer: Offer, n: int) -> Discrete:
    """The lowest `n` ports of `offer` (for one task on it; several: `OfferPorts`)."""
    return OfferPorts(offer).take(n)


def ports_of(task_discrete: Discrete) -> list[int]:
    """A task's ports, whoever's (reserved or not), lowest first."""
    value = task_discrete.whoever(PORTS)
    if not isinstance(value, Ranges):
        return []
    return [p for begin, end in value.spans for p in range(begin, end + 1)]
