"""Rate limits that throttle instead of losing calls (Mesos's framework rate limiting):
a principal's queue on its own, the operator's file, and a cluster held to its limits (a master
and slaves in process on the memory transport, configured as the master's CLI does, and
read through its HTTP API)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frameworks import (
    Filters,
    Offer,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskState,
    TaskStatus,
    build_task,
)
from master.authz import Caller
from master.cli import rate_limits
from master.http.api import HttpApi
from master.http.config import HttpConfig
from master.intake.costs import call_cost
from master.intake.queues import PrincipalCounts, PrincipalQueues
from master.master import MasterConfig
from master.rate_limits import (
    AGGREGATE,
    DEFAULT_CAPACITY,
    DEFAULT_QPS,
    Limit,
    RateLimits,
    RateLimitsError,
    RateLimitsFile,
    load_rate_limits,
)
from master.refusal_sampling import TOLD_BURST, TOLD_RATE, RateLimitedTold, RefusalSampling
from protocol.transport.aio import within
from protocol.wire.codec import encode, encode_batch
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    CommandInfo,
    Decline,
    Error,
    Reason,
    Reconcile,
    ReconcileTask,
    Revive,
    TaskInfo,
)

from harness.helpers import (
    Inbox,
    InProcess,
    Recorder,
    eventually,
    in_process_cluster,
    open_transport,
    until,
)

# --- each principal's queue, at its rate limit ---------------------------------------------


def limits(qps: float | None, capacity: int | None) -> RateLimits:
    return RateLimits.defaults(qps, capacity)


def submit(queues: PrincipalQueues, principal: str, cost: float, work: Any) -> bool:
    """One call of `principal`'s through its queue, as the intake puts it: admitted (True)
    or refused past its capacity."""
    if queues.over_capacity(principal, 1):
        queues.refused(principal, 1)
        return False
    key = f"framework/{principal}"

    async def serve() -> None:
        await queues.charge(key, principal, cost, work)

    queues.put(key, 1.0, principal, 1, serve)
    return True


async def nothing() -> None:
    pass


async def test_calls_over_the_rate_wait_and_are_handled_in_order_at_the_rate() -> None:
    loop = asyncio.get_running_loop()
    submitting = [True]  # (time stands still while the 400 go in, however slow this machine)
    started = loop.time()
    queues = PrincipalQueues(limits(200, 1000), lambda: started if submitting[0] else loop.time())
    handled: list[tuple[int, float]] = []
    done = asyncio.Event()

    def work(i: int) -> Any:
        async def run() -> None:
            handled.append((i, loop.time()))
            if i == 399:
                done.set()

        return run

    admitted = [submit(queues, "a", 1, work(i)) for i in range(400)]
    await eventually(lambda: len(handled) >= 200)
    submitting[0] = False
    await within(done.wait(), 10)
    assert all(admitted)
    assert [i for i, _ in handled] == list(range(400))  # in order, none lost
    assert handled[-1][1] - started >= 200 / 200 * 0.95  # the other 200 at 200 a second
    counts = queues.counts["a"]
    assert (counts.handled, counts.throttled, counts.refused, counts.queued) == (400, 200, 0, 0)
    assert queues.waiting("a") == 0
    await queues.close()


async def test_past_its_capacity_a_call_is_refused_and_other_principals_are_not_held() -> None:
    loop = asyncio.get_running_loop()
    queues = PrincipalQueues(limits(1, 2), loop.time)
    assert submit(queues, "a", 1, nothing)  # handled at once: the bucket is empty after
    await eventually(lambda: queues.counts.get("a", PrincipalCounts()).handled == 1)
    assert submit(queues, "a", 1, nothing)
    assert submit(queues, "a", 1, nothing)
    assert not submit(queues, "a", 1, nothing)  # two wait: its capacity
    handled = asyncio.Event()

    async def b() -> None:
        handled.set()

    assert submit(queues, "b", 1, b)  # a queue and a limit of its own
    await within(handled.wait(), 5)
    assert queues.counts["a"].refused == 1
    assert queues.counts["a"].queued == 2
    assert queues.waiting("a") == 2
    await queues.close()
    assert queues.counts["a"].queued == 0


async def test_a_payload_that_would_not_fit_in_the_queue_is_seen_full_before_it_is_read() -> None:
    loop = asyncio.get_running_loop()
    queues = PrincipalQueues(limits(1, 10), loop.time)
    assert not queues.over_capacity("a", 200)  # nothing waits: charged as it is read
    assert submit(queues, "a", 1, nothing)
    for _ in range(8):
        assert submit(queues, "a", 1, nothing)
    await eventually(lambda: queues.counts.get("a", PrincipalCounts()).queued == 8)
    assert not queues.over_capacity("a", 2)  # 8 waiting, 2 more fit
    assert queues.over_capacity("a", 3)  # (what a payload of 200 flooding calls would find)
    assert queues.over_capacity("a", 200)
    await queues.close()


async def test_one_big_call_is_charged_per_item_and_the_calls_behind_it_wait() -> None:
    loop = asyncio.get_running_loop()
    queues = PrincipalQueues(limits(10, 100), loop.time)
    assert submit(queues, "a", 50, nothing)  # handled, into debt: 10 - 50
    assert submit(queues, "a", 1, nothing)  # waits ~4 s of it off
    await eventually(lambda: queues.counts.get("a", PrincipalCounts()).queued == 1)
    assert queues.counts["a"].handled == 1
    await queues.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=30), st.integers(0, 5))
def test_no_call_is_lost_each_is_handled_queued_or_refused(
    principals: list[str], capacity: int
) -> None:
    """Every call that arrives is counted exactly once: handled, waiting, or refused; and
    no queue ever holds more calls for its limit than its capacity."""

    async def scenario() -> None:
        queues = PrincipalQueues(limits(1, capacity), lambda: 0.0)  # (time stands still)
        admitted = [submit(queues, p, 1, nothing) for p in principals]
        await eventually(lambda: queues.backlog() == 0)
        for p in set(principals):
            c = queues.counts[p]
            mine = [a for q, a in zip(principals, admitted, strict=True) if q == p]
            assert c.handled == 1  # what the bucket holds, one second's worth
            assert c.queued == mine.count(True) - 1 <= capacity
            assert c.refused == mine.count(False)
            assert c.handled + c.queued + c.refused == len(mine)
        await queues.close()

    asyncio.run(scenario())


def test_what_frees_resources_is_free_and_a_reconcile_pays_per_task_asked() -> None:
    task = TaskInfo(
        task_id="t", slave_id="s", resources=Resources(cpus=1), command=CommandInfo(value="true")
    )
    assert call_cost(Decline(framework_id="f", offer_ids=["o"])) is None
    assert call_cost(Acknowledge(framework_id="f", slave_id="s", task_id="t", uuid="u")) is None
    assert call_cost(Accept(framework_id="f", offer_ids=["o"], tasks=[])) is None  # a release
    assert call_cost(Accept(framework_id="f", offer_ids=["o"], tasks=[task] * 40)) == 1
    assert call_cost(Accept(framework_id="f", offer_ids=["o"], tasks=[task] * 1000)) == 11
    asked = [ReconcileTask(task_id=f"t{i}") for i in range(30)]
    assert call_cost(Reconcile(framework_id="f", tasks=asked)) == 4  # 1, and 1 per 10 tasks
    asked = [ReconcileTask(task_id=f"t{i}") for i in range(4096)]
    assert call_cost(Reconcile(framework_id="f", tasks=asked)) == 410
    assert call_cost(Reconcile(framework_id="f")) == 1
    assert call_cost(Revive(framework_id="f")) == 1


# --- the operator's file -------------------------------------------------------------


def test_a_mesos_rate_limits_file_sets_limits_per_principal_and_an_aggregate(
    tmp_path: Path,
) -> None:
    path = tmp_path / "limits.json"
    path.write_text(
        json.dumps(
            {
                "limits": [{"principal": "a", "qps": 5, "capacity": 10}, {"principal": "b"}],
                "aggregate_default_qps": 100,
                "aggregate_default_capacity": 1000,
            }
        )
    )
    got = load_rate_limits(path, 10_000, 10_000)
    assert got.for_principal("a") == ("a", Limit(5, 10))
    assert got.for_principal("b") == ("b", Limit(None, None))  # listed without qps: free
    assert got.for_principal("c") == (AGGREGATE, Limit(100, 1000))  # the rest share one
    assert got.for_principal("d")[0] == AGGREGATE
    # without an aggregate, each unlisted principal has the flags' limit, its own
    path.write_text(json.dumps({"limits": [{"principal": "a", "qps": 5}]}))
    got = load_rate_limits(path, 300, 40)
    assert got.for_principal("c") == ("c", Limit(300, 40))
    assert isinstance(got.spec, RateLimitsFile)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        ('{"limits": [{"principal": "a", "qps": -1}]}', "limits.0.qps"),
        ('{"limits": [{"qps": 3}]}', "limits.0.principal"),
        ('{"aggregate_qps": 3}', "aggregate_qps"),
    ],
)
def test_a_bad_rate_limits_file_is_refused_saying_where(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "limits.json"
    path.write_text(text)
    with pytest.raises(RateLimitsError, match=says):
        load_rate_limits(path, None, None)


# --- a real cluster held to its limits -----------------------------------------------

CLUSTER = "limits"
TASK = Resources(cpus=0.1, mem=16)


class OneOfferAtATime(Scheduler):
    """Launches `total` tasks, one task on one offer per call; declines the rest."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.launched = 0
        self.finished: set[str] = set()
        self.statuses: list[TaskStatus] = []
        self.errors: list[str] = []
        self.changed = asyncio.Event()

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        unused = []
        for offer in offers:
            if self.launched < self.total and offer.resources.contains(TASK):
                self.launched += 1
                task = build_task(offer, "t", TASK, command="true", task_id=f"t{self.launched}")
                await driver.launch_tasks([offer.offer_id], [task], Filters(refuse_seconds=0))
            else:
                unused.append(offer.offer_id)
        if unused:
            await driver.decline_offers(unused, Filters(refuse_seconds=0 if self.wants() else 60))

    def wants(self) -> bool:
        return self.launched < self.total

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.statuses.append(status)
        if status.state == TaskState.FINISHED:
            self.finished.add(status.task_id)
        elif status.state.terminal:
            self.launched -= 1  # launch it again
        self.changed.set()

    async def error(self, driver: SchedulerDriver, message: str) -> None:
        self.errors.append(message)
        self.changed.set()


@pytest.mark.timing  # a rate
async def test_a_framework_held_to_20_calls_a_second_finishes_all_200_tasks(
    tmp_path: Path,
) -> None:
    """The issue's low-rate run: 200 launches at 20 calls/s wait their turn, none lost,
    and at the end no offer is outstanding."""
    config = MasterConfig(allocation_interval=0.1, rate_limits=rate_limits(None, 20, 1000))
    async with in_process_cluster(CLUSTER, tmp_path, config) as cluster, served(cluster) as web:
        fw = OneOfferAtATime(200)
        driver = SchedulerDriver(fw, name="slow", broker=cluster.connect, cluster=CLUSTER)
        await driver.start()
        started = time.monotonic()
        try:
            await until(fw.changed, lambda: len(fw.finished) == 200, timeout=60)
            took = time.monotonic() - started
            await eventually(lambda: not cluster.master.views.state().offers)
            view = await asyncio.to_thread(limits_view, web)
        finally:
            driver.stop()
            await driver.join()
    assert not fw.errors
    assert not [s for s in fw.statuses if s.state == TaskState.LOST]
    assert took >= 200 / 20 * 0.8  # held to its rate: a second's burst, then 20 a second
    held = [p for p in view["principals"] if p["throttled"]]
    assert held, view
    assert held[0]["qps"] == 20
    assert held[0]["refused"] == 0


@contextlib.asynccontextmanager
async def served(cluster: InProcess) -> AsyncIterator[str]:
    """The in-process master's HTTP API on a free port: its address."""
    api = HttpApi(cluster.master.views, HttpConfig(port=0))
    try:
        yield await api.start()
    finally:
        await api.stop()


def limits_view(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}api/v1/limits", timeout=10) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return body


class Greedy(Recorder):
    """Launches on its first `tries` offers (its limit refuses them); declines the rest."""

    def __init__(self, tries: int) -> None:
        super().__init__()
        self.tries = tries
        self.offered: dict[str, Offer] = {}  # the offers it tried to launch on

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        for offer in offers:
            if len(self.offered) < self.tries:
                self.offered[offer.offer_id] = offer
                n = len(self.offered)
                task = build_task(offer, "g", TASK, command="sleep 60", task_id=f"g{n}")
                await driver.launch_tasks([offer.offer_id], [task], Filters(refuse_seconds=0))
            else:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=3600))
        self.changed.set()


async def test_what_a_principal_has_waiting_counts_once_against_its_capacity(
    tmp_path: Path,
) -> None:
    """Calls waiting to be read and calls read and waiting for the limit are one backlog,
    bounded by the principal's capacity: what arrives past it is refused on arrival,
    unread."""
    capacity = 20
    config = MasterConfig(allocation_interval=0.1, rate_limits=limits(0.01, capacity))
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=0) as cluster:
        master, queues = cluster.master, cluster.master.queues
        topic = cluster.topics.inbound("framework", "flooder")
        revive = encode(Revive(framework_id="fw-nope"))
        counts = queues.counts

        def waiting() -> int:
            return queues.waiting("flooder")

        for _ in range(capacity):  # the intake takes them all; one is handled at once
            await master.intake.arrive(topic, revive)
        await eventually(lambda: queues.backlog() == 0)
        assert waiting() == capacity - 1
        for _ in range(capacity):
            await master.intake.arrive(topic, revive)
        assert waiting() == capacity
        assert counts["flooder"].refused == capacity - 1


async def test_a_call_by_the_http_door_is_admitted_against_the_same_backlog_as_the_bus(
    tmp_path: Path,
) -> None:
    """A principal's calls by Mesos's HTTP API and by the bus wait in one queue and count
    against one capacity: a call by the HTTP door finds the bus's backlog, and past the
    capacity it is refused (another principal's is not)."""
    capacity = 5
    config = MasterConfig(allocation_interval=0.1, rate_limits=limits(0.01, capacity))
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=0) as cluster:
        master, queues = cluster.master, cluster.master.queues
        topic = cluster.topics.inbound("framework", "flooder")
        # waiting: the first is handled as it arrives (the intake was idle), the second
        # too, and held for the bucket the first emptied; the rest wait unread
        for _ in range(capacity + 1):
            await master.intake.arrive(topic, encode(Revive(framework_id="fw-nope")))
        assert queues.waiting("flooder") == capacity
        await master.intake.call(
            Revive(framework_id="fw-nope"), Caller("framework", "flooder", None)
        )
        assert queues.counts["flooder"].refused == 1
        await master.intake.call(Revive(framework_id="fw-nope"), Caller("framework", "other", None))
        assert "other" not in queues.counts or not queues.counts["other"].refused


@given(st.lists(st.tuples(st.floats(0, 2), st.integers(1, 300)), min_size=1, max_size=60))
def test_a_flooder_hears_every_refused_call_counted_in_a_few_errors(
    refusals: list[tuple[float, int]],
) -> None:
    """Refusals for a rate limit are told an error each while few, then a few errors a
    second, each counting the calls refused since the last: no call refused goes
    uncounted (it is told, or waits for the next error), and the errors stay few."""
    told, now, errors, refused = RateLimitedTold(), 0.0, 0, 0
    heard: Counter[str] = Counter()
    for wait, n in refusals:
        now += wait
        refused += n
        answer = told.tell("f", Counter({"Reconcile": n}), now)
        if answer is not None:
            errors += 1
            heard.update(answer)
    assert heard.total() + told.untold.get("f", Counter()).total() == refused
    assert errors <= TOLD_BURST + TOLD_RATE * now + 1


def test_lines_counted_for_client_addresses_are_remembered_boundedly() -> None:
    """Refusals' lines counted per client address (the HTTP side's, before credentials):
    anybody who reaches a port has an address of its own, so only the `most_keys` heard
    of last are remembered; each of them is still sampled as a principal is."""
    sampling = RefusalSampling(most_keys=3)
    logged = sum(
        sampling.line(f"address 10.0.{i // 256}.{i % 256}", "unauthorized", 0.0) is not None
        for i in range(1000)
        for _ in range(30)
    )
    assert logged == 1000 * 20  # (each address's burst, then none at this instant)
    assert len(sampling.unlogged) <= 3
    assert sum(c.total() for c in sampling.unlogged.values()) <= 3 * 10


async def test_a_flood_refused_unread_is_told_in_a_few_errors_counting_its_calls(
    tmp_path: Path,
) -> None:
    """A flood past its capacity hears of it where its payloads ask for answers: not an
    error a refused call (a flood's answers would be a flood), a few, naming the calls."""
    config = MasterConfig(allocation_interval=0.1, rate_limits=limits(0.01, 20))
    async with (
        in_process_cluster(CLUSTER, tmp_path, config, slaves=0) as cluster,
        contextlib.AsyncExitStack() as stack,
    ):
        master, topics, errors = cluster.master, cluster.topics, Inbox()
        inbox = topics.framework("flooder", "inbox")
        await (await open_transport(stack, cluster.connect, "spy")).subscribe(inbox, errors)
        payload = encode_batch([encode(Revive(framework_id="fw-nope"))] * 100, inbox)
        for _ in range(50):  # 5,000 calls against a queue of 20
            await master.intake.arrive(topics.inbound("framework", "flooder"), payload)
        refused = master.queues.counts["flooder"].refused
        limited = lambda: [e for e in errors.of(Error) if e.code == "rate-limited"]  # noqa: E731
        await errors.wait_until(lambda: len(limited()) >= TOLD_BURST)
    assert refused >= 4_900
    assert len(limited()) <= TOLD_BURST + 1
    said = [e.message for e in limited()]
    assert all(m.startswith("rate limit: ") and "flooder's queue is full" in m for m in said)
    assert "100 calls refused since the last error (Revive 100)" in said[0]


async def test_a_framework_past_its_capacity_gets_its_offers_back_in_the_pool(
    tmp_path: Path,
) -> None:
    """greedy may make one call (its Subscribe) and queue none: each launch is refused as
    if declined (its offers back to the pool, TASK_LOST to retry, an error naming the
    call), and calm, unlimited, runs all its tasks without noticing."""
    limits_file = tmp_path / "limits.json"
    limits_file.write_text(
        json.dumps(
            {
                "limits": [
                    {"principal": "greedy", "qps": 0.01, "capacity": 0},
                    {"principal": "calm"},
                ]
            }
        )
    )
    limits = rate_limits(limits_file, DEFAULT_QPS, DEFAULT_CAPACITY)
    config = MasterConfig(allocation_interval=0.1, rate_limits=limits)
    async with in_process_cluster(CLUSTER, tmp_path, config) as cluster, served(cluster) as web:
        greedy, calm = Greedy(3), OneOfferAtATime(20)
        drivers = [
            SchedulerDriver(greedy, name="greedy", broker=cluster.connect, cluster=CLUSTER),
            SchedulerDriver(calm, name="calm", broker=cluster.connect, cluster=CLUSTER),
        ]
        for d in drivers:
            await d.start()
        try:
            lost = lambda: [s for s in greedy.statuses if s.state == TaskState.LOST]  # noqa: E731
            await until(greedy.changed, lambda: len(lost()) == 3 and len(greedy.errors) == 3, 30)
            await until(calm.changed, lambda: len(calm.finished) == 20, timeout=60)
            # greedy's refused offers went back: the whole cluster is free again, and
            # nothing it was offered is held for it
            await eventually(
                lambda: (
                    not (s := cluster.master.views.state()).allocated
                    and not s.offers
                    and not any(t.state == TaskState.RUNNING for t in s.tasks)
                ),
            )
            view = await asyncio.to_thread(limits_view, web)
        finally:
            for d in drivers:
                d.stop()
                await d.join()
    for status in lost():
        assert status.reason == Reason.RATE_LIMITED
        assert "Accept refused" in status.message
    assert all("rate limit: Accept refused" in e for e in greedy.errors)
    assert not calm.errors
    assert not [s for s in calm.statuses if s.state != TaskState.FINISHED and s.state.terminal]
    rows = {p["principal"]: p for p in view["principals"]}
    assert rows["greedy"]["refused"] == 3
    assert rows["calm"]["qps"] is None
