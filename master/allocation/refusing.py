"""A framework refusing a slave: its decline filter set, the slave visited when the
filter lapses, and whether every framework wanting offers refuses the slave now -- then
no round need visit it until something changes (`visits`), and when each of their
filters lapses is kept for the round's shortcut (`lone`)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from master.allocation.ledger import (
    Filter,
    FrameworkBook,
    Lapse,
    SlaveBook,
    refusals_lapse,
    standing_refusals,
    within,
)
from master.allocation.lone import NEVER, Refusals
from master.allocation.sorter import Millis
from master.allocation.visits import Visits

# passes over every slave's refusals (`Refusing.wanting`) between two rounds, past which
# they are dropped instead: a round after the first frameworks that start or stop wanting
# offers reads them, but a thousand reviving at once (a master's failover) would cost a
# thousand passes over every slave, where one drop and a round's walks cost one
PASSES = 4


class Refusing:
    def __init__(
        self,
        wanting: Mapping[str, FrameworkBook],
        visits: Visits,
        quotas: Mapping[str, object],
        reservations: Mapping[str, object],
        slaves: Mapping[str, SlaveBook],
    ) -> None:
        """`wanting`: the frameworks that want offers; `quotas`, `reservations` (holds,
        by slave) and `slaves`: the allocator's, read in place."""
        self._wanting, self._visits, self._slaves = wanting, visits, slaves
        self._quotas, self._reservations = quotas, reservations
        # slaves every framework wanting offers refuses, or all but one (`lone`), by slave
        self.lone: dict[str, Refusals] = {}
        self.passes = PASSES  # left before the next round (`wanting`: the round sets it)

    def refuse(
        self,
        fw: FrameworkBook,
        slave: SlaveBook,
        delta: Mapping[str, int],
        until: float,
        now: float,
        lone: Refusals | None,
    ) -> None:
        """`fw` refuses `delta` of the slave (what it declined) until `until`; `lone`: the
        slave's refusals as they stood before (taken out of `self.lone`)."""
        slave_id, free = slave.slave_id, slave.unallocated
        # what it refused, naming the slave's other resources at 0 as its free does: the
        # same filter (within reads a name missing as 0), but the usual refusal -- the very
        # resources free now, cpus all taken -- then compares equal at C speed
        refused = dict.fromkeys(free, 0)
        refused.update(delta)
        fw.filters[slave_id] = Filter(until, refused)
        refused_by = slave.refused_by
        refused_by.add(fw.framework_id)
        self._visits.lapses.at(until, slave_id)  # (when it lapses)
        if (
            lone is not None
            and lone.free == free
            and lone.refused_again(fw.framework_id, until, now)
        ):
            # the one whose filter had lapsed declined it again: the others' filters are as
            # they were, so whether everyone refuses it is known
            self.lone[slave_id] = lone
            if lone.all_refuse(now):
                self._visits.refused_by_all(slave_id)
        else:
            self._if_all_refuse(slave, now)

    def declined_again(
        self, until: float, decliners: list[str], slave_id: str, refusals: Refusals
    ) -> None:
        """`decliners`, frameworks whose filters on the slave had lapsed (in `refusals`:
        the slave's in `lone`, its free as they were), declined it again as a walk
        offered it, nobody taking it: each refuses it until `until`, the others as they
        did. (What `refused_in_walk` does with them, in place.) Called by the round alone
        (`ledger.Again`, with `until` bound), 437,000 times in the simulator's section 7.3
        run: the slave is no longer among those to visit (the round took it out), so
        whether all refuse it now is not asked -- `Visits.refused_by_all` would do nothing."""
        shared = Filter(until, refusals.free)  # (the very free resources: never changed)
        wanting = self._wanting
        for framework_id in decliners:
            wanting[framework_id].filters[slave_id] = shared
        self._slaves[slave_id].refused_by.update(decliners)
        self._visits.lapses.at(until, slave_id)
        refusals.lapsed_declined(decliners, until)

    def refused_in_walk(
        self,
        until: float,
        now: float,
        decliners: list[str],
        slave_id: str,
        free: Millis,
        nobody_took: bool,
        everyone: bool = False,
        standing: list[Lapse] | None = None,
    ) -> None:
        """`decliners` (frameworks wanting offers: the walk's) declined the slave's free
        resources as one walk offered them in turn (`ledger.Declines`): each refuses them
        until `until` -- one filter for them all, read in place by each, and one visit
        when it lapses. `nobody_took`: the walk found nobody (else the slave's free
        resources change now, and what stood on it goes); `everyone`: the walk passed
        every framework wanting offers for a decline (then nobody need be asked), and
        `standing` says when the filters it passed over lapse (else they are read).
        `free`: the slave's free resources, read in place (the round's `ledger.Refused`
        with `until` and `now` bound: a partial, no frame between)."""
        slave = self._slaves[slave_id]
        lone = self.lone.pop(slave_id, None)  # (what stood on it is asked anew)
        shared = Filter(until, dict(free))  # (what each refused: the very free resources)
        wanting, refused_by = self._wanting, slave.refused_by
        for framework_id in decliners:
            wanting[framework_id].filters[slave_id] = shared
        refused_by.update(decliners)
        self._visits.lapses.at(until, slave_id)
        if not nobody_took:
            return
        if lone is not None and lone.free == free and lone.declined_again(decliners, until, now):
            self.lone[slave_id] = lone  # (as `refuse` keeps it: the others' stand)
            if lone.all_refuse(now):
                self._visits.refused_by_all(slave_id)
        elif everyone:
            slave.refused_by = set(wanting)  # (as `declined_by_all` keeps it)
            self._visits.refused_by_all(slave_id)
            if not wanting:
                return
            if standing is not None and len(standing) + len(decliners) == len(wanting):
                lapses = standing + [(until, framework_id) for framework_id in decliners]
                heapq.heapify(lapses)
            else:
                lapses = refusals_lapse(wanting, slave_id)
            self.lone[slave_id] = Refusals(lapses, dict(free))
        else:
            self._if_all_refuse(slave, now)

    def wanting(self, fw: FrameworkBook, wants: bool, already: bool = False) -> None:
        """`fw` wants offers now (`wants`: it joins each slave's refusals, refusing where
        its filter covers what was free then, until it lapses; `already`: it wanted them
        before, its filters cleared since, a revive), or no longer (it leaves each: a
        slave nobody is left in is dropped). The rest of each stands (`lone`). Past
        PASSES since the last round, every slave's is dropped instead."""
        framework_id, lone = fw.framework_id, self.lone
        if not lone:
            return
        if self.passes <= 0:
            lone.clear()  # (the round walks the order for each: as without them)
            return
        self.passes -= 1
        if wants:
            filters = fw.filters
            for slave_id, refusals in lone.items():
                f = filters.get(slave_id)
                if f is not None and within(refusals.free, f.refused):
                    refusals.join(framework_id, f.expires, already)
                else:
                    refusals.join(framework_id, NEVER, already)
            return
        for slave_id in [s for s, refusals in lone.items() if not refusals.leave(framework_id)]:
            del lone[slave_id]

    def _if_all_refuse(self, slave: SlaveBook, now: float) -> None:
        """If every framework that wants offers declined this slave's free resources and
        refuses them still, a round would offer them to nobody: no visit until one lapses,
        and when each does is kept (`lone`). Not with quotas or holds (a round offers what
        they leave of them, not all)."""
        # (while fewer refuse it than want offers, not all do: `declined_by_all`)
        wanting, slave_id = self._wanting, slave.slave_id
        if len(slave.refused_by) < len(wanting) or self._quotas or slave_id in self._reservations:
            return
        lapses = standing_refusals(slave, wanting, slave.unallocated, now)
        if lapses is None:
            return
        self._visits.refused_by_all(slave_id)
        if lapses:  # (nobody wanting offers: no round picks anyone)
            self.lone[slave_id] = Refusals(lapses, dict(slave.unallocated))
