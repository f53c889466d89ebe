"""A reason of why (`master.cycle.why`), and how it says amounts and slaves: as the CLI writes
resources, in user units for its numbers, some slaves by name and the rest counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.wire.resources import SCALE
from protocol.wire.why_codes import Figure, WhyCode

SLAVES_SHOWN = 10  # slaves a reason names (the rest counted)


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason: its code, a sentence for people, and the numbers behind it."""

    code: WhyCode
    message: str
    numbers: dict[str, Figure] = field(default_factory=dict)


def names(slaves: list[str]) -> list[str]:
    """Some slaves by name, the rest counted."""
    more = len(slaves) - SLAVES_SHOWN
    return slaves[:SLAVES_SHOWN] + ([f"... {more} more"] if more > 0 else [])


def res(millis: Mapping[str, int]) -> str:
    """Amounts as the CLI writes them (`cpus:4;mem:1024`), zeros too: `cpus:0` is news."""
    if not millis:
        return "nothing"
    return ";".join(f"{k}:{amount(max(0, v))}" for k, v in sorted(millis.items()))


def amount(millis: int) -> str:
    whole, frac = divmod(millis, SCALE)
    return str(whole) if not frac else f"{whole}.{frac:03d}".rstrip("0")


def user(millis: Mapping[str, int]) -> dict[str, float]:
    return {k: v / SCALE for k, v in sorted(millis.items())}
