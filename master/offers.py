"""Offers outstanding: made from a round's decisions, answered, rescinded.

An offer is booked (`books.offers`, and with its framework and slave) and sent when a
round decides it, a framework's in messages of at most MAX_OFFERS_PER_MESSAGE; it leaves
the books when it is answered (accepted or declined) or rescinded. The allocator counts
an outstanding offer as allocated to its framework until then.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from master.allocation.allocator import Allocator
from master.allocation.ledger import Allocation
from master.books import Books, Framework, OfferRecord
from master.outbox import Outbox
from master.slave_values import for_offer
from protocol.wire.messages import MAX_OFFERS_PER_MESSAGE, Offer, Offers, Rescind, new_id


class OfferBook:
    def __init__(self, books: Books, allocator: Allocator, outbox: Outbox) -> None:
        self.books, self.allocator, self.outbox = books, allocator, outbox

    def make(self, allocations: Iterable[Allocation], now: float) -> int:
        """Book and send what a round decided; how many frameworks were offered."""
        by_framework: dict[str, list[Offer]] = defaultdict(list)
        running: dict[str, dict[str, list[str]]] = {}  # its executors by slave, if it has any
        for a in allocations:
            fw = self.books.frameworks[a.framework_id]
            slave = self.books.slaves[a.slave_id]
            if fw.executors and a.framework_id not in running:
                running[a.framework_id] = executors_by_slave(fw)
            offer_id = f"o-{new_id()[:20]}"
            values = for_offer(self.books, slave, a.resources.millis)
            record = OfferRecord(
                offer_id, a.framework_id, a.slave_id, a.resources, now, values, a.role
            )
            self.books.offers[offer_id] = record
            fw.offers.add(offer_id)
            slave.offers.add(offer_id)
            by_framework[a.framework_id].append(
                Offer(
                    offer_id=offer_id,
                    framework_id=a.framework_id,
                    slave_id=a.slave_id,
                    hostname=slave.hostname,
                    resources=a.resources,
                    discrete=values,
                    attributes=slave.attributes,
                    executor_ids=running.get(a.framework_id, {}).get(a.slave_id, []),
                    role=a.role or fw.role,
                )
            )
            self.outbox.emit(
                "offer",
                framework_id=a.framework_id,
                slave_id=a.slave_id,
                offer_id=offer_id,
                resources=a.resources,
            )
        for framework_id, offers in by_framework.items():
            fw, most = self.books.frameworks[framework_id], MAX_OFFERS_PER_MESSAGE
            for start in range(0, len(offers), most):
                self.outbox.send_framework(fw, Offers(offers=offers[start : start + most]))
        return len(by_framework)

    def own(self, fw: Framework, offer_ids: list[str]) -> tuple[list[OfferRecord], list[str]]:
        """The outstanding offers of `fw` an answer names (each once), and what is wrong
        with the others."""
        records: list[OfferRecord] = []
        problems: list[str] = []
        for offer_id in dict.fromkeys(offer_ids):  # a repeated id counts once
            record = self.books.offers.get(offer_id)
            if record is None:
                problems.append(f"offer {offer_id} is not outstanding (unknown, used or rescinded)")
            elif record.framework_id != fw.framework_id:
                problems.append(f"offer {offer_id} belongs to another framework")
            else:
                records.append(record)
        return records, problems

    def drop(self, record: OfferRecord) -> None:
        """Out of the books (answered): what it held is the answer's to give back."""
        self.books.offers.pop(record.offer_id, None)
        fw = self.books.frameworks.get(record.framework_id)
        if fw is not None:
            fw.offers.discard(record.offer_id)
        slave = self.books.slaves.get(record.slave_id)
        if slave is not None:
            slave.offers.discard(record.offer_id)

    def rescind(self, record: OfferRecord, *, recover: bool = True, tell: bool = True) -> None:
        """Taken back from its framework (which is told, unless `tell` is False: another
        scheduler process took the framework over, which never heard of it), and what it
        held back to the pool (unless `recover` is False: the caller gave it back
        already, or it is gone)."""
        self.drop(record)
        fw = self.books.frameworks.get(record.framework_id)
        if recover:
            self.allocator.recover(
                record.framework_id, record.slave_id, record.resources, role=record.role
            )
        if tell and fw is not None and fw.connected:
            self.outbox.send_framework(fw, Rescind(offer_id=record.offer_id))
        self.outbox.emit(
            "rescind",
            framework_id=record.framework_id,
            slave_id=record.slave_id,
            offer_id=record.offer_id,
            resources=record.resources,
        )


def executors_by_slave(fw: Framework) -> dict[str, list[str]]:
    """The ids of `fw`'s custom executors running on each slave."""
    out: dict[str, list[str]] = defaultdict(list)
    for slave_id, executor_id in fw.executors:
        out[slave_id].append(executor_id)
    return out
