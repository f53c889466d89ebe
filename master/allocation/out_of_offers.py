"""Slaves out of the offers -- deactivated by an operator, draining, or disconnected --
and what is free on them: room nobody can be offered now. A guarantee's headroom is not
held there, and preemption's fair shares divide the cluster less it (what runs on those
slaves still counts: it is held)."""

from __future__ import annotations

from collections.abc import Mapping

from master.allocation.ledger import SlaveBook
from master.allocation.sorter import Millis
from protocol.wire.reservations import is_plain, stripped


class OutOfOffers:
    def __init__(self, slaves: Mapping[str, SlaveBook]) -> None:
        self._slaves = slaves  # (the allocator's, read in place)
        self.ids: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.ids)

    def unreserved_free(self) -> Millis:
        """What is free and unreserved on them (no role's headroom: a quota's business)."""
        out: Millis = {}
        for slave_id in self.ids:
            for k, v in self._slaves[slave_id].unallocated.items():
                if v > 0 and is_plain(k):
                    out[k] = out.get(k, 0) + v
        return out

    def total_less_free(self, total: Millis) -> Millis:
        """`total` (the cluster's, as shares count it) less what is free on them."""
        out = dict(total)
        for slave_id in self.ids:
            slave = self._slaves[slave_id]
            free = {k: v for k, v in slave.unallocated.items() if v > 0}
            for k, v in (stripped(free) if slave.reserved else free).items():
                out[k] = max(0, out.get(k, 0) - v)
        return out
