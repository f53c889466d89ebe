"""What the recent rounds offered, kept for `why` (`master.cycle.why`): the last rounds
that made offers, each with its offers, in a ring. A round adds one entry (its own list of
offers, not copied): the recording costs a round nothing it would notice, and the
question -- what was this framework offered lately? -- is answered when someone asks, by
reading back through the ring."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import NamedTuple

from master.allocation.ledger import Allocation

ROUNDS_KEPT = 64  # rounds that made offers, remembered (a busy master: some seconds' worth)


class Offered(NamedTuple):
    """An offer one round made: when, and what of which slave to whom."""

    at: float
    offer: Allocation


class OfferLog:
    def __init__(self, kept: int = ROUNDS_KEPT) -> None:
        self._rounds: deque[tuple[float, list[Allocation]]] = deque(maxlen=kept)
        self.rounds = 0  # rounds run, offers or not

    def record(self, now: float, offers: list[Allocation]) -> None:
        """A round ran at `now` and made `offers` (kept as they are: nobody changes a
        round's list once it is made)."""
        self.rounds += 1
        if offers:
            self._rounds.append((now, offers))

    def offered(self, framework_id: str, most: int = 10) -> list[Offered]:
        """The offers made to a framework in the rounds remembered, newest first (at most
        `most`)."""
        out: list[Offered] = []
        for at, offers in reversed(self._rounds):
            for offer in offers:
                if offer.framework_id == framework_id:
                    out.append(Offered(at, offer))
                    if len(out) >= most:
                        return out
        return out

    def after(self, start: float) -> tuple[int, float | None]:
        """The rounds remembered that ran at `start` or later (a framework's asking
        counts those since it came), and when the oldest of them ran."""
        count, oldest = 0, None
        for at, _ in reversed(self._rounds):
            if at < start:
                break
            count, oldest = count + 1, at
        return count, oldest

    def __len__(self) -> int:
        """How many rounds that made offers are remembered."""
        return len(self._rounds)

    def __iter__(self) -> Iterator[tuple[float, list[Allocation]]]:
        return iter(self._rounds)
