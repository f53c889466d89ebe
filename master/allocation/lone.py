"""Slaves that every framework wanting offers refuses, or all but one: the round's
shortcut past the walk of the order for them.

A slave whose free resources nobody can use is declined by each framework in turn, and
then, each time one framework's decline filter lapses, offered to that one alone again
-- in the simulator's runs, most offers made are these. The walk of the order that finds
it passes over every framework that still refuses the slave, and each decline asks every
framework whether it still refuses it (`ledger.declined_by_all`). So once every
framework wanting offers refuses a slave, the books keep when each of their filters on
it lapses (`Refusals`, a heap): while it stands, a round's pick for that slave is nobody
if no filter has lapsed, the one whose filter lapsed if only one has -- what the walk
would find, without it -- and the walk if more have; a decline by that one puts its
new filter in the heap.

It stands while nothing it was made of changes: the slave's free resources (each change
on the slave drops it -- `Allocator._take`, `Allocator.recover`, a hold -- and they are
compared when it is read), and each framework's filter on it. Filters that lapse are what
it counts. Who wants offers changes it in place (`Refusing.wanting`), one framework at a
time: one that stops wanting offers leaves every heap (the others refuse the slave as
they did, and the walk would pass over them as before), and one that starts -- or whose
filters were cleared (a revive) -- joins each, refusing the slave until its own filter
there lapses, or not at all (`join`: then it is the one the round asks, or the walk
between those not refusing). A framework's minimum is no part of it: the round asks the
one it names whether the slave is of use to it, as the walk would.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from master.allocation.sorter import Millis

NOBODY = ""  # (`lapsed`: every framework refuses the slave)
NEVER = float("-inf")  # (`join`: a framework that refuses the slave not at all)


@dataclass(slots=True)
class Refusals:
    """When each framework wanting offers stops refusing one slave, which has `free`."""

    lapses: list[tuple[float, str]]  # a heap of (when its filter lapses, framework)
    free: Millis  # the slave's free resources when it was made (a copy)

    def lapsed(self, free: Mapping[str, int], now: float) -> str | None:
        """The one framework whose filter has lapsed by `now` (NOBODY: none has); None
        when more have, or the slave's free resources changed (then ask the walk)."""
        if free != self.free:
            return None
        h = self.lapses
        if h[0][0] > now:
            return NOBODY
        n = len(h)
        if (n > 1 and h[1][0] <= now) or (n > 2 and h[2][0] <= now):
            return None  # (two or more lapsed: the order decides between them)
        return h[0][1]

    def refused_again(self, framework_id: str, until: float, now: float) -> bool:
        """A framework whose filter had lapsed declined the slave again, refusing it
        until `until` (False, and nothing changed: its filter had not lapsed)."""
        h = self.lapses
        if h[0][1] == framework_id:  # (the usual: the one that lapsed)
            if h[0][0] > now:
                return False
            heapq.heapreplace(h, (until, framework_id))
            return True
        for i, (when, who) in enumerate(h):
            if who == framework_id:
                if when > now:
                    return False
                h[i] = (until, framework_id)
                heapq.heapify(h)
                return True
        return False

    def lapsed_all(self, now: float) -> set[str]:
        """Every framework whose filter has lapsed by `now` (asked while its free stands)."""
        return {who for when, who in self.lapses if when <= now}

    def declined_again(self, decliners: list[str], until: float, now: float) -> bool:
        """Frameworks whose filters had lapsed declined the slave again, each refusing it
        until `until` (False, and nothing changed: the filter of one had not lapsed)."""
        if len(decliners) == 1:
            return self.refused_again(decliners[0], until, now)
        h = self.lapses
        at = {who: i for i, (when, who) in enumerate(h) if when <= now}
        if not all(d in at for d in decliners):
            return False
        for d in decliners:
            h[at[d]] = (until, d)
        heapq.heapify(h)
        return True

    def lapsed_declined(self, decliners: list[str], until: float) -> None:
        """`decliners`, each of whose filters had lapsed, declined the slave again, each
        refusing it until `until` (`declined_again`, known to hold: their walk asked only
        those lapsed)."""
        h = self.lapses
        if len(decliners) == 1 and h[0][1] == decliners[0]:  # (the usual: the one lapsed)
            heapq.heapreplace(h, (until, decliners[0]))
            return
        # (next: every one lapsed declined, the heap's least entries: each new one in and
        # the least out, `until` later than every lapse -- one in is never one out)
        replace, back = heapq.heapreplace, []
        for framework_id in decliners:
            out = replace(h, (until, framework_id))
            if out[1] not in decliners:
                back.append(out)
        if back:  # (one lapsed and passed over came out: it goes back, decliners' old go)
            gone = set(decliners)
            h[:] = [entry for entry in h if entry[1] not in gone or entry[0] == until]
            h.extend(back)
            heapq.heapify(h)

    def all_refuse(self, now: float) -> bool:
        return self.lapses[0][0] > now

    def join(self, framework_id: str, until: float, there: bool) -> None:
        """A framework wants offers now, refusing the slave until `until` (NEVER: not at
        all); in its place if it is `there` (it wanted offers already: its filters were
        cleared, a revive)."""
        h = self.lapses
        if there:
            for i, (_, who) in enumerate(h):
                if who == framework_id:
                    h[i] = (until, framework_id)
                    heapq.heapify(h)
                    return
        heapq.heappush(h, (until, framework_id))

    def leave(self, framework_id: str) -> bool:
        """A framework wants no offers now: out of the heap (the others' refusals stand).
        False when nobody is left in it (then it says nothing: dropped)."""
        h = self.lapses
        for i, (_, who) in enumerate(h):
            if who == framework_id:
                last = h.pop()
                if i < len(h):  # (the last one leaving: nothing to move)
                    h[i] = last
                    heapq.heapify(h)
                break
        return bool(h)
