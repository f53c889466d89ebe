"""The master's books as the offer cycle reads them (`master.cycle.State`): the offers
outstanding, what each framework declared it wants, and the tasks not ended."""

from __future__ import annotations

from collections.abc import Iterator

from master.allocation.planning import RunningTask
from master.books import Books, Framework, OfferRecord
from master.cycle import Wish


class CycleBooks:
    def __init__(self, books: Books) -> None:
        self.books = books

    def offers_held(self) -> dict[str, int]:
        return {fid: len(fw.offers) for fid, fw in self.books.frameworks.items() if fw.offers}

    def outstanding(self) -> Iterator[OfferRecord]:
        return iter(self.books.offers.values())

    def wishes(self, now: float) -> Iterator[Wish]:
        return map(_wish, self.books.frameworks.values())

    def wish(self, framework_id: str, now: float) -> Wish | None:
        fw = self.books.frameworks.get(framework_id)
        return None if fw is None else _wish(fw)

    def running(self) -> Iterator[RunningTask]:
        for fw in self.books.frameworks.values():
            for task in fw.tasks.values():
                if not task.terminal:
                    yield RunningTask(
                        fw.framework_id,
                        task.task_id,
                        task.slave_id,
                        dict(task.resources.millis),
                        task.launched_at,
                        fw.role_of(task.info),
                    )

    def task_live(self, framework_id: str, task_id: str) -> bool:
        fw = self.books.frameworks.get(framework_id)
        return fw is not None and task_id in fw.tasks


def _wish(fw: Framework) -> Wish:
    return Wish(
        fw.framework_id,
        fw.role,
        connected=fw.connected,
        demand=None
        if fw.demand is None
        else [(dict(r.resources.millis), r.count) for r in fw.demand],
        shape=dict(fw.last_shape.millis) if fw.last_shape else None,
        tenant=fw.principal,
    )
