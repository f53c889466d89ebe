"""Which of a slave's ports (and other ranges and sets) are free, read from the books.

The allocator counts a slave's ports as a number (`ports: 1001`), as it counts cpus; which
ports those are is never kept as a book of its own that could drift from the rest. It is
read from what holds them: the slave's live tasks, its outstanding offers, and the
orphaned tasks it runs. An offer takes its count's worth of the lowest free values; a
launch may use only values of its offer that no live task holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from master.books import Books, Slave
from protocol.wire.discrete import EMPTY, Discrete


def in_use(books: Books, slave: Slave) -> Discrete:
    """Values of `slave` that its live tasks hold (the master's and orphans')."""
    return Discrete.union(_held_by_tasks(books, slave))


def free(books: Books, slave: Slave) -> Discrete:
    """Values of `slave` neither held by a task nor offered."""
    if not slave.discrete:
        return EMPTY
    return slave.discrete.subtract(Discrete.union(_holders(books, slave)))


def for_offer(books: Books, slave: Slave, counts: Mapping[str, int]) -> Discrete:
    """The values an offer of `counts` (fixed point, as the allocator gives them) takes:
    the lowest free ones of each range or set it counts."""
    values = slave.discrete
    if not values:
        return EMPTY
    busy = slave.offers or slave.tasks or books.orphans.on(slave.slave_id)
    if busy or books.dying.values_on(slave.slave_id):  # (else all are free)
        held = _holders(books, slave)
        if held:
            values = values.subtract(Discrete.union(held))
    return values.take(counts)


def _holders(books: Books, slave: Slave) -> list[Discrete]:
    """What holds some of `slave`'s values: its outstanding offers and its live tasks."""
    offered = [books.offers[o].discrete for o in slave.offers if o in books.offers]
    return [d for d in offered if d] + _held_by_tasks(books, slave)


def _held_by_tasks(books: Books, slave: Slave) -> list[Discrete]:
    """The values of `slave`'s live tasks: its frameworks' and its orphans'."""
    held = []
    # (those of its tasks that hold values, not every task: most hold none, and every
    # offer and launch asks; a key whose task left the slave is pruned here)
    for key in list(slave.valued):
        if key not in slave.tasks:
            slave.valued.discard(key)
            continue
        task = books.task(*key)
        if task is not None and not task.terminal and task.info.discrete:
            held.append(task.info.discrete)
    held.extend(o.task.discrete for o in books.orphans.on(slave.slave_id) if o.task.discrete)
    held.extend(books.dying.values_on(slave.slave_id))  # (a removed framework's, ending)
    return held
