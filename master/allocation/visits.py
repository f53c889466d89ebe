"""Which slaves the next round visits: the round's source, as Nomad's `stack.go` names its
first stage. A round need not visit every slave: one on which nothing changed would be
offered to nobody again. So the books say here when a slave may have something new to
offer -- resources freed or added, a decline filter or a hold lapsing (`Lapses`), a retry
due -- and after someone new wants offers (a framework arrives, is revived, reconnects,
or a minimum or a quota changes) every slave is. A slave every framework wanting offers
declined and refuses still is left out until one of those makes it worth a visit again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from master.allocation.holds import Holds
from master.allocation.lapses import Lapse, Lapses
from master.allocation.ledger import FrameworkBook


class Visits:
    def __init__(self, frameworks: Mapping[str, FrameworkBook], holds: Holds) -> None:
        """`frameworks` and `holds`: the books whose filters and holds lapse."""
        self._frameworks, self._holds = frameworks, holds
        self._dirty: set[str] = set()  # slaves that may have something new to offer
        self._wake = False  # every slave may: someone new wants offers (`wake_all`)
        self.lapses = Lapses(self._standing)  # when filters and holds lapse

    def _standing(self) -> set[Lapse]:
        """When each filter and hold standing now lapses (what `Lapses` keeps)."""
        frameworks, holds = self._frameworks.values(), self._holds.by_slave.items()
        standing = {(f.expires, sid) for fw in frameworks for sid, f in fw.filters.items()}
        standing.update((r.until, sid) for sid, held in holds for r in held)
        return standing

    def visit(self, slave_id: str) -> None:
        """The slave may have something new to offer: the next round visits it."""
        self._dirty.add(slave_id)

    def forget(self, slave_id: str) -> None:
        """The slave is gone."""
        self._dirty.discard(slave_id)

    def lapse(self, when: float, slave_id: str) -> None:
        """A filter of the slave lapses at `when`: visit it then."""
        self.lapses.at(when, slave_id)

    def retry(self, when: float, slave_id: str) -> None:
        """Visit the slave again at `when`, whatever stands then (`Lapses.retry`)."""
        self.lapses.retry(when, slave_id)

    def wake_all(self) -> None:
        """Someone new wants offers: every slave with free resources is worth a visit
        (the next round visits them all; a slave with nothing free is passed over there)."""
        self._wake = True

    def due(
        self, now: float, slaves: Iterable[str], slave_ids: list[str] | None, full: bool
    ) -> list[str]:
        """The slaves a round at `now` visits, in the order it visits them: `slave_ids`
        if given, every slave if `full` (or woken), else those worth a visit."""
        lapsed = self.lapses.due(now)
        if lapsed:
            self._dirty.update(lapsed)
        if slave_ids is not None:
            self._dirty.difference_update(slave_ids)
            return list(slave_ids)
        if full or self._wake:
            self._wake = False
            self._dirty.clear()
            return list(slaves) if full else sorted(slaves)
        order = sorted(self._dirty)  # sorted: a set's order varies from run to run
        self._dirty.clear()
        return order

    def refused_by_all(self, slave_id: str) -> None:
        """Every framework wanting offers declined the slave and refuses it still: the
        next round's visit would pass every one of them by, so none is made (what makes
        it worth one again makes it dirty again -- a filter lapsing, more freed, someone
        new wanting offers -- or, a hold, puts it back: `held`)."""
        self._dirty.discard(slave_id)

    def held(self, slave_id: str, until: float) -> None:
        """Room is held on the slave until `until`: offered past its framework's filter,
        so visited next, even if every framework refuses it (also one left out rounds ago:
        a hold is rare, a visit cheap)."""
        self.lapses.at(until, slave_id)
        self._dirty.add(slave_id)
