"""The books the offer cycle reads and does not keep (`master.cycle.State`), in memory: the
offers outstanding, what each framework declared it wants, the tasks that run (as Nomad
tests its schedulers on a harness); and the start and the steps the preemption claim
tests share: a hog, A, filling the slaves, and a claimant, B."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from master.allocation.allocator import Allocator
from master.allocation.ledger import Allocation
from master.allocation.planning import RunningTask
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle, Wish
from protocol.wire.resources import Resources


@dataclass
class Offer:
    offer_id: str
    framework_id: str
    slave_id: str
    resources: Resources
    created_at: float
    role: str | None = None  # a multi-role framework's offer's


@dataclass
class Books:
    """The books the cycle does not keep, in memory (`master.cycle.State`)."""

    roles: dict[str, str] = field(default_factory=dict)  # framework -> role
    offers: dict[str, Offer] = field(default_factory=dict)
    demand: dict[str, list[tuple[dict[str, int], int]]] = field(default_factory=dict)
    tasks: dict[tuple[str, str], RunningTask] = field(default_factory=dict)
    tenants: dict[str, str] = field(default_factory=dict)  # framework -> principal
    # what a framework that declared nothing runs (it wants more of it: no end to it)
    shapes: dict[str, dict[str, int]] = field(default_factory=dict)

    def offers_held(self) -> dict[str, int]:
        return dict(Counter(o.framework_id for o in self.offers.values()))

    def outstanding(self) -> Iterator[Offer]:
        return iter(self.offers.values())

    def wishes(self, now: float) -> Iterator[Wish]:
        for fid in self.roles:
            wish = self.wish(fid, now)
            if wish is not None:
                yield wish

    def wish(self, framework_id: str, now: float) -> Wish | None:
        role = self.roles.get(framework_id)
        if role is None:
            return None
        demand, shape = self.demand.get(framework_id), self.shapes.get(framework_id)
        tenant = self.tenants.get(framework_id, "")
        return Wish(framework_id, role, demand=demand, shape=shape, tenant=tenant)

    def running(self) -> Iterator[RunningTask]:
        return iter(self.tasks.values())

    def task_live(self, framework_id: str, task_id: str) -> bool:
        return (framework_id, task_id) in self.tasks


TASK = Resources(cpus=1, mem=1024)  # each of the hog's and the claimant's tasks
SLAVE = Resources(cpus=4, mem=4096)


def hog_and_claimant(slaves: int, demand: int) -> tuple[Allocator, Books, OfferCycle]:
    """The preemption claim tests' start: frameworks A and B (each its own role), `slaves`
    slaves of SLAVE that A fills with TASKs, and B declaring `demand` TASKs; preemption
    with a 5 s timeout and 2 s notice."""
    config = CycleConfig(preemption=PreemptionConfig(timeout=5.0, notice=2.0))
    allocator, books = Allocator("drf"), Books()
    for name in ("A", "B"):
        allocator.add_framework(name, name)
        books.roles[name] = name
    for i in range(slaves):
        allocator.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(allocator, books, config)
    for i in range(4 * slaves):
        slave = f"s{i % slaves}"
        book_running(allocator, books, "A", slave, f"t{i}", TASK, i)
    books.demand["B"] = [(dict(TASK.millis), demand)]
    return allocator, books, cycle


def end_kills(cycle: OfferCycle, books: Books, now: float, ran: float = 1.0) -> int:
    """Every victim due is killed and ends at once (having run `ran` seconds), its TASK
    given back: how many."""
    killed = 0
    for kill in cycle.kills_due(now):
        books.tasks.pop((kill.framework_id, kill.task_id))
        cycle.task_ended(kill.framework_id, kill.task_id, finished=False, ran=ran, now=now)
        cycle.allocator.recover(kill.framework_id, kill.slave_id, TASK)
        killed += 1
    return killed


def hog_fills(cycle: OfferCycle, books: Books, offer: Allocation, now: float) -> None:
    """A takes `offer` and launches a TASK in each CPU of it."""
    allocator = cycle.allocator
    allocator.recover(offer.framework_id, offer.slave_id, offer.resources)
    for n in range(int(offer.resources.quantities().get("cpus", 0))):
        book_running(allocator, books, "A", offer.slave_id, f"r{now}-{n}", TASK, now)


def end_after_grace(
    cycle: OfferCycle, books: Books, ending: dict[tuple[str, str], tuple[float, str]],
    now: float, grace: float,
) -> int:  # fmt: skip
    """Every victim due is sent its SIGTERM now and ends `grace` later (in `ending`: when,
    and on which slave); those whose grace is over end, their TASK given back: how many."""
    for kill in cycle.kills_due(now):
        ending[(kill.framework_id, kill.task_id)] = (now + grace, kill.slave_id)
    ended = 0
    for key, (at, slave) in list(ending.items()):
        if at <= now:
            del ending[key]
            books.tasks.pop(key)
            cycle.task_ended(*key, finished=False, ran=100.0, now=now)
            cycle.allocator.recover(key[0], slave, TASK)
            ended += 1
    return ended


def claimant_finishes(
    cycle: OfferCycle, books: Books, ending: dict[str, tuple[float, str]], now: float, ran: float
) -> None:
    """B's tasks due to finish by `now` (in `ending`: when, and on which slave) finish,
    having run `ran` seconds, their TASK given back."""
    for task_id, (at, slave) in list(ending.items()):
        if at <= now:
            del ending[task_id]
            books.tasks.pop(("B", task_id))
            cycle.task_ended("B", task_id, finished=True, ran=ran, now=now, on=(slave, TASK))
            cycle.allocator.recover("B", slave, TASK)


def doomed(cycle: OfferCycle, times: Iterable[float]) -> list[RunningTask]:
    """The victims of the claims of a check at each of `times` in turn, in order."""
    return [v for now in times for c in cycle.check(now).claims for p in c.plans for v in p.victims]


def book_running(
    allocator: Allocator, books: Books, framework_id: str, slave_id: str, task_id: str,
    resources: Resources, at: float, role: str | None = None,
) -> None:  # fmt: skip
    """A task of `framework_id` running on the slave since `at` (in `role`, of a framework
    of several): its resources allocated, and it in the books."""
    allocator.allocate_existing(framework_id, slave_id, resources, role)
    books.tasks[(framework_id, task_id)] = RunningTask(
        framework_id, task_id, slave_id, dict(resources.millis), at
    )


def hydra_and_xena(roles: list[str]) -> tuple[OfferCycle, Books]:
    """Review 69's multi-role guarantee: three slaves (12 CPUs), roles h-web (guaranteed 6
    CPUs), h-batch and x, weight 1 each; hydra in `roles` holds 6 tasks in h-batch, and
    wants 6 more; xena (role x) holds the other 6, 2 over its third. (hdrf; a guarantee
    waits 1 s, a notice 1 s.)"""
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(guarantee_timeout=1.0, notice=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("h-web", Quota(guarantee=Resources(cpus=6)))
    a.add_framework("hydra", roles=roles)
    a.add_framework("xena", "x")
    books.roles.update({"hydra": roles[0], "xena": "x"})  # (as the master's: its first)
    for i in range(3):
        a.add_slave(f"s{i}", SLAVE)
    cycle = OfferCycle(a, books, config)
    for i in range(12):
        fid, slave = ("hydra", f"s{i // 4}") if i < 6 else ("xena", f"s{i // 4}")
        book_running(a, books, fid, slave, f"t{i}", TASK, i, "h-batch" if fid == "hydra" else None)
    books.demand["hydra"] = [(dict(TASK.millis), 6)]
    return cycle, books
