"""The tasks of `benchmarks.slaves`: frameworks that fill the simulated slaves with
long-running tasks through offers, as a real cluster gets its tasks, and that reconcile
them with a new leader after a failover.

Each framework is an SDK `SchedulerDriver` in the benchmark's process, its own principal
and connection. It launches its share of the tasks on the offers it gets (as many as fit
in each, `--tasks` split evenly), suppresses offers once it has, and counts:

- `running`: its tasks reported RUNNING;
- `bad`: updates of any other state but STAGING or STARTING (LOST, GONE, FAILED, ...),
  by state: a failover must cause none;
- `answered`: after `expect_failover()`, its tasks a reconciliation answered RUNNING;
- `relaunched`: tasks whose launch the master refused before the failover (TASK_LOST,
  REASON_RATE_LIMITED: a round offers thousands of slaves at once, an Accept each, past
  the framework's rate limit; or REASON_INVALID_OFFERS), launched again on the offers a
  revive brings, as the refusal asks. A TASK_LOST for any other reason is of a task that
  was launched (the master gave up on it: a slave removed, or reconciled without it) and
  counts in `bad` as `TASK_LOST/<reason>`: relaunched, it hid the loss (and, were the
  task still running, the double booking that followed: the slave refused the relaunch).

After a failover it reconciles as Mesos asks a framework to (explicit reconciliation, the
unanswered again until all are answered): as soon as it has re-subscribed with the new
leader, and then the unanswered again, the wait before each ask growing with how many it
asks about: a second per `RECONCILE_PACE` tasks, between 1 and 8 s. Asked every two
seconds, 50,000 unanswered tasks put the framework in more debt to its rate limit than
the limit pays off (1 per 10 tasks at 1,000 a second) and the new leader walks them all
each time; backing off by doubling to 8 s whatever was left, the last slave's tasks
waited up to 8 s after it was back for the ask that answers them. A new leader answers
nothing for a task on a slave that has not re-registered yet, so the first rounds answer
part of them; as fewer are unanswered each ask costs less, and the next comes sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler, build_task
from protocol.transport.aio import within
from protocol.wire.messages import Filters, Offer, Reason, TaskState, TaskStatus
from protocol.wire.resources import Resources

RECONCILE_PACE = 5_000  # tasks asked about a second, at most: half the default rate limit
RECONCILE_LEAST = 1.0  # seconds before the unanswered tasks are asked about again, at
RECONCILE_MOST = 8.0  # least and at most (50,000 unanswered: 8 s, as before; 5,000: 1 s)
LONG = f"sleep {7 * 24 * 3600}"  # a simulated slave runs it as a week's task
NOT_BAD = {TaskState.STAGING, TaskState.STARTING, TaskState.RUNNING}
# a launch refused before any failover (TASK_LOST to a framework not partition-aware),
# by the master's reason: never sent to a slave
NEVER_LAUNCHED = {TaskState.LOST, TaskState.DROPPED}
REFUSED_LAUNCH = {Reason.RATE_LIMITED, Reason.INVALID_OFFERS}
REVIVE_EVERY = 2.0  # seconds between revives while launches refused are not launched again


def task_size(slave: Resources, per_slave: int) -> Resources:
    """A task such that `per_slave` of them fill a slave exactly."""
    return Resources({name: amount / per_slave for name, amount in slave.items()})


def framework_name(i: int) -> str:
    """The `i`th framework's name, and its principal."""
    return f"bench{i}"


class Filler(Scheduler):
    """Launches `target` tasks of `size` on its offers, then keeps them."""

    def __init__(self, name: str, target: int, size: Resources) -> None:
        self.name, self.target, self.size = name, target, size
        self.launched: dict[str, str] = {}  # task id -> slave id
        self.running: set[str] = set()
        self.answered: set[str] = set()
        self.bad: dict[str, int] = {}
        self.all_running = asyncio.Event()
        self.all_answered = asyncio.Event()
        self.failover = False  # a failover is expected: count reconciliation's answers
        self.reregistered_at: float | None = None
        self.relaunched = 0  # tasks whose Accept the master refused at our rate limit
        self._reviver: asyncio.Task[None] | None = None  # revives until all are launched
        self._made = 0  # task ids made (one relaunched gets a new one)
        self._reconciler: asyncio.Task[None] | None = None

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        forever = Filters(refuse_seconds=365 * 24 * 3600)
        for offer in offers:
            fits = min(
                self.target - len(self.launched),
                *(math.floor(offer.resources.get(n, 0.0) / a + 1e-9) for n, a in self.size.items()),
            )
            if fits <= 0:
                driver.decline_offer(offer.offer_id, forever)
                continue
            tasks = []
            for _ in range(fits):
                task_id, self._made = f"{self.name}-{self._made}", self._made + 1
                tasks.append(build_task(offer, self.name, self.size, command=LONG, task_id=task_id))
                self.launched[task_id] = offer.slave_id
            driver.launch_tasks([offer.offer_id], tasks, forever)
        if len(self.launched) >= self.target:
            driver.suppress_offers()

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if (
            not self.failover
            and status.state in NEVER_LAUNCHED
            and status.reason in REFUSED_LAUNCH
            and status.task_id in self.launched
        ):
            del self.launched[status.task_id]
            # its Accept came past our rate limit's capacity (a round offers thousands of
            # slaves at once, an Accept each: REASON_RATE_LIMITED), or behind one that was
            # and named the same offer (REASON_INVALID_OFFERS): never launched, so launched
            # again on the offers a revive brings (it clears our filters too)
            self.relaunched += 1
            if self._reviver is None or self._reviver.done():
                self._reviver = asyncio.create_task(self._revive(driver))
            return
        if status.state not in NOT_BAD:
            name = status.state.value
            if status.state in NEVER_LAUNCHED and status.reason is not None:
                name = f"{name}/{status.reason.value}"
            self.bad[name] = self.bad.get(name, 0) + 1
            return
        if status.state != TaskState.RUNNING:
            return
        if self.failover and status.reason == Reason.RECONCILIATION:
            self.answered.add(status.task_id)
            if len(self.answered) >= self.target:
                self.all_answered.set()
        else:
            self.running.add(status.task_id)
            if len(self.running) >= self.target:
                self.all_running.set()

    async def reregistered(self, driver: Driver, master_id: str) -> None:
        if self.failover and self._reconciler is None:
            self.reregistered_at = time.perf_counter()
            self._reconciler = asyncio.create_task(self._reconcile(driver))

    async def _revive(self, driver: Driver) -> None:
        """Revive (clearing our filters) until every task is launched again: a revive
        sent past the rate limit's capacity is refused like the launches were."""
        while len(self.launched) < self.target:
            driver.revive_offers()
            await asyncio.sleep(REVIVE_EVERY)  # (a pace: the offers it brings are awaited)

    async def _reconcile(self, driver: Driver) -> None:
        """Ask about every task not yet answered, until all are."""
        while not self.all_answered.is_set():
            unanswered = [
                TaskStatus(task_id=t, state=TaskState.RUNNING, slave_id=s)
                for t, s in self.launched.items()
                if t not in self.answered
            ]
            driver.reconcile_tasks(unanswered)
            wait = min(RECONCILE_MOST, max(RECONCILE_LEAST, len(unanswered) / RECONCILE_PACE))
            with contextlib.suppress(TimeoutError):
                await within(self.all_answered.wait(), wait)

    async def close(self) -> None:
        for task in (self._reconciler, self._reviver):
            if task is not None:
                task.cancel()


class Frameworks:
    """`count` Fillers sharing `tasks` between them, each its own driver and principal."""

    def __init__(self, broker: str, cluster: str, count: int, tasks: int, size: Resources) -> None:
        self.fillers = [
            Filler(framework_name(i), tasks // count + (1 if i < tasks % count else 0), size)
            for i in range(count)
        ]
        self.drivers = [
            SchedulerDriver(
                f,
                name=f.name,
                broker=broker.replace("mqtt://", f"mqtt://{f.name}@", 1),
                cluster=cluster,
                failover_timeout=3600.0,
            )
            for f in self.fillers
        ]

    async def start(self) -> None:
        for driver in self.drivers:
            await driver.start(timeout=120)

    async def all_running(self, timeout: float) -> None:
        try:
            await within(asyncio.gather(*(f.all_running.wait() for f in self.fillers)), timeout)
        except TimeoutError:
            running = {f.name: (len(f.running), f.target) for f in self.fillers}
            raise TimeoutError(
                f"tasks running (of their targets) after {timeout:.0f}s: {running}"
            ) from None

    def expect_failover(self) -> None:
        for f in self.fillers:
            f.failover = True

    async def all_answered(self, timeout: float) -> None:
        await within(asyncio.gather(*(f.all_answered.wait() for f in self.fillers)), timeout)

    def counts(self) -> dict[str, object]:
        bad: dict[str, int] = {}
        for f in self.fillers:
            for state, n in f.bad.items():
                bad[state] = bad.get(state, 0) + n
        return {
            "frameworks": len(self.fillers),
            "tasks_running": sum(len(f.running) for f in self.fillers),
            "tasks_answered": sum(len(f.answered) for f in self.fillers),
            "tasks_lost": sum(bad.values()),
            "tasks_lost_by_state": bad,
            "tasks_relaunched": sum(f.relaunched for f in self.fillers),
        }

    async def stop(self) -> None:
        for f in self.fillers:
            await f.close()
        for driver in self.drivers:
            driver.stop(failover=True)  # (the cluster goes with the run: no teardown)
            await driver.join()
