"""The invariant of ports (issue 49): two tasks are never given one port. Hypothesis runs
the master's books (`master.books`, `master.slave_values`) through any sequence of
offers, launches (honest or hostile: any ports at all, asked of any offer), declines,
task ends and slave re-registrations, and checks after each step that what the live
tasks and the outstanding offers hold is disjoint and the slave's, and that the
allocator's count of free ports is the number of ports neither held nor offered."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.books import Books, Framework, OfferRecord, Slave, Task
from master.slave_values import for_offer, free, in_use
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.launches import values_problem
from protocol.wire.messages import CommandInfo, TaskInfo
from protocol.wire.resources import SCALE, Resources

LOW, HIGH = 100, 163  # the slave's ports: 64 of them
SLAVE_PORTS = Discrete({"ports": Ranges([(LOW, HIGH)])})

spans = st.lists(
    st.tuples(st.integers(LOW - 5, HIGH + 5), st.integers(0, 6)).map(lambda s: (s[0], s[0] + s[1])),
    min_size=1,
    max_size=3,
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("offer"), st.integers(0, 70)),
        st.tuples(st.just("launch"), st.integers(0, 9), spans, st.booleans()),
        st.tuples(st.just("decline"), st.integers(0, 9)),
        st.tuples(st.just("end"), st.integers(0, 20)),
        st.just(("reregister",)),
    ),
    max_size=40,
)

TASK_IDS = itertools.count()


class Model:
    """One slave's books, changed only as the master changes them."""

    def __init__(self) -> None:
        self.books = Books()
        self.slave = Slave("s", "p", "s", Resources(ports=HIGH - LOW + 1), {}, "", 0.0)
        self.slave.discrete = SLAVE_PORTS
        self.books.slaves["s"] = self.slave
        self.fw = Framework("f", "p", "f", "*", "inbox", "", 0.0, 0.0)
        self.books.frameworks["f"] = self.fw
        self.allocator = Allocator()
        self.allocator.add_framework("f", "*")
        self.allocator.add_slave("s", self.slave.total)
        self.made = 0

    def offer(self, count: int) -> None:
        left = self.allocator.free("s").get_millis("ports") // SCALE
        count = min(count, left)
        if not count:
            return
        counted = Resources(ports=count)
        self.allocator.allocate_existing("f", "s", counted)
        self.made += 1
        oid = f"o{self.made}"
        values = for_offer(self.books, self.slave, counted.millis)
        self.books.offers[oid] = OfferRecord(oid, "f", "s", counted, 0.0, values)
        self.slave.offers.add(oid)

    def _offer(self, i: int) -> OfferRecord | None:
        live = sorted(self.books.offers)
        return self.books.offers[live[i % len(live)]] if live else None

    def launch(self, i: int, asked: list[tuple[int, int]], honest: bool) -> None:
        record = self._offer(i)
        if record is None:
            return
        values = Discrete({"ports": Ranges(asked)})
        if honest:  # what the SDK would pick
            values = Discrete({"ports": record.discrete["ports"].take(len(asked))})
        info = TaskInfo(
            task_id=f"t{next(TASK_IDS)}",  # (each its own: the master refuses a live id)
            slave_id="s",
            resources=Resources(),
            discrete=values,
            command=CommandInfo(value="true"),
        )
        del self.books.offers[record.offer_id]  # (answered: it leaves the books first)
        self.slave.offers.discard(record.offer_id)
        problem = values_problem(info, record.discrete, in_use(self.books, self.slave), "s")
        used = Resources() if problem else info.resources
        if not problem:
            self.fw.tasks[info.task_id] = Task(info, "f", "s")
            self.slave.add_task("f", info)
        self.allocator.recover("f", "s", record.resources - used)

    def decline(self, i: int) -> None:
        record = self._offer(i)
        if record is not None:
            del self.books.offers[record.offer_id]
            self.slave.offers.discard(record.offer_id)
            self.allocator.recover("f", "s", record.resources)

    def end(self, i: int) -> None:
        live = sorted(self.fw.tasks)
        if live:
            task = self.fw.tasks.pop(live[i % len(live)])
            self.slave.tasks.discard(("f", task.task_id))
            self.allocator.recover("f", "s", task.resources)

    def reregister(self) -> None:
        """As after a failover: the books start again from what the slave reports."""
        tasks = list(self.fw.tasks.values())
        self.__init__()  # type: ignore[misc]
        for task in tasks:
            self.fw.tasks[task.task_id] = task
            self.slave.add_task("f", task.info)
            self.allocator.allocate_existing("f", "s", task.resources)

    def check(self) -> None:
        holders = [r.discrete for r in self.books.offers.values()]
        holders += [t.info.discrete for t in self.fw.tasks.values()]
        for i, d in enumerate(holders):
            assert SLAVE_PORTS.contains(d), d
            for other in holders[i + 1 :]:
                assert not d.overlap(other), (d, other)
        counted = self.allocator.free("s").get_millis("ports") // SCALE
        assert counted == free(self.books, self.slave).get("ports", Ranges()).size


@settings(max_examples=300, deadline=None)
@given(steps)
def test_no_port_is_ever_held_twice(script: list[tuple[object, ...]]) -> None:
    m = Model()
    for step in script:
        getattr(m, str(step[0]))(*step[1:])
        m.check()
