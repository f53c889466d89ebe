"""Under flat `fifo`, the allocator settles where the `fifo` ideal says, whatever roles
the frameworks are in: frameworks come (each in a random role, wanting a random number of
tasks) and some leave; every task then ends at once and the cluster is offered again
(the case where the order, not who came when the room was free, decides). Round after
round, each framework takes what it still wants of an offer and declines the rest; once
nobody is offered anything more, each holds the tasks preemption's ideal
(`fair_allocation`, told the frameworks in the order they came) owes it: the first come
all it wants, the next what is left, and so on.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from master.allocation.allocator import Allocator
from master.allocation.fair_shares import Contender, fair_allocation
from protocol.wire.resources import Resources

TASK = {"cpus": 1000, "mem": 1024}
SLAVE = {"cpus": 4000, "mem": 4096}  # four tasks a slave
SLAVES = 3
OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "join", "join", "leave"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 7),  # tasks wanted (joining) / whom (leaving)
    ),
    min_size=1,
    max_size=12,
)


class Cluster:
    """The allocator and frameworks that take what they still want of each offer."""

    def __init__(self) -> None:
        self.a = Allocator("fifo")
        for i in range(SLAVES):
            self.a.add_slave(f"s{i}", Resources.from_millis(SLAVE))
        self.wants: dict[str, int] = {}  # framework: tasks it wants in all
        self.tasks: dict[tuple[str, str], int] = {}  # (framework, slave): tasks running
        self.now = 0.0

    def held(self, framework_id: str) -> int:
        return sum(n for (f, _), n in self.tasks.items() if f == framework_id)

    def settle(self) -> None:
        for _ in range(4 * SLAVES * (len(self.wants) + 1)):
            offers = self.a.allocate(self.now, full=True)
            self.now += 1.0
            if not offers:
                return
            for offer in offers:
                f, slave = offer.framework_id, offer.slave_id
                fits = min(offer.resources.millis.get(r, 0) // v for r, v in TASK.items())
                take = min(fits, self.wants[f] - self.held(f))
                used = Resources.from_millis({r: v * take for r, v in TASK.items()})
                self.tasks[f, slave] = self.tasks.get((f, slave), 0) + take
                rest = offer.resources - used
                if rest:
                    self.a.recover(f, slave, rest, refuse_seconds=1e9, now=self.now)
                if self.held(f) >= self.wants[f]:
                    self.a.suppress(f)
        raise AssertionError("offers never stopped")

    def all_tasks_end(self) -> None:
        for (f, slave), n in list(self.tasks.items()):
            if n:
                used = Resources.from_millis({r: v * n for r, v in TASK.items()})
                self.a.recover(f, slave, used, now=self.now)
        self.tasks.clear()
        for f in self.wants:
            self.a.revive(f)  # (its decline filters go too)


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_flat_fifo_settles_on_its_ideal_whatever_the_roles(
    ops: list[tuple[str, str, int]],
) -> None:
    c = Cluster()
    role: dict[str, str] = {}
    for n, (op, r, k) in enumerate(ops):
        if op == "join":
            f = f"f{n}"
            c.a.add_framework(f, r)
            c.wants[f], role[f] = k, r
            c.settle()
        elif c.wants:
            gone = sorted(c.wants)[k % len(c.wants)]
            c.a.remove_framework(gone)
            del c.wants[gone]
            c.tasks = {key: v for key, v in c.tasks.items() if key[0] != gone}
            c.settle()
    c.all_tasks_end()
    c.settle()

    came = list(c.wants)  # (joined in this order: dicts keep it)
    contenders = [
        Contender(f, role[f], 1.0, {}, True, demand=[(TASK, c.wants[f])], tenant=f) for f in came
    ]
    total = {r: v * SLAVES for r, v in SLAVE.items()}
    fair = fair_allocation("fifo", total, contenders)
    owed = {f: round(fair[f][1].get("cpus", 0.0)) for f in came}
    held = {f: c.held(f) for f in came}
    assert held == owed, (list(zip(came, (role[f] for f in came), strict=True)), c.wants)
