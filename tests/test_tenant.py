"""A tenant's own input: a framework principal with valid credentials, on a secured cluster
(TLS, a credentials store, the ACL), sends ids, commands and lists it chose itself.

It cannot make a sandbox outside a slave's work dir, cannot leave a task stuck, cannot
make the master forget a task that still runs, and cannot stall the master with one
message. The cluster is test_trust's, with real processes in real sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_trust import Secure, T, intact, secure_cluster

from frameworks.scheduler import Scheduler, SchedulerDriver, build_task
from master.ideal import User, ideal
from master.master import Master
from protocol.ids import MAX_COMMAND, id_problem, reply_problem, task_problem
from protocol.messages import (
    CommandInfo,
    ExecutorInfo,
    Filters,
    Offer,
    Reason,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.resources import Resources
from slave.paths import sandbox_path

from helpers import books_balance, eventually

SMALL = Resources(cpus=0.1, mem=8)
AGAIN = Filters(refuse_seconds=0)  # what a launch leaves is offered again at once


class Tenant(Scheduler):
    """Keeps its offers for the test to use, and every status it hears."""

    def __init__(self) -> None:
        self.offers: list[Offer] = []
        self.statuses: list[TaskStatus] = []
        self.changed = asyncio.Event()

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        self.offers += offers
        self.changed.set()

    async def offer_rescinded(self, driver: SchedulerDriver, offer_id: str) -> None:
        self.offers = [o for o in self.offers if o.offer_id != offer_id]

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        self.statuses.append(status)
        self.changed.set()

    def last(self, task_id: str) -> TaskStatus | None:
        return next((s for s in reversed(self.statuses) if s.task_id == task_id), None)

    def ended(self, task_id: str) -> bool:
        last = self.last(task_id)
        return last is not None and last.state.terminal

    async def offer(self) -> Offer:
        await eventually(lambda: bool(self.offers), timeout=10)
        return self.offers.pop(0)


@pytest.fixture(params=["embedded", "mosquitto"])
async def real(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Secure]:
    """test_trust's secured cluster, its slaves running real processes."""
    async with secure_cluster(request.param, tmp_path, simulated=False) as sec:
        yield sec


@contextlib.asynccontextmanager
async def tenant(sec: Secure) -> AsyncIterator[tuple[SchedulerDriver, Tenant]]:
    """mallory, subscribed through the real SDK driver with its own credentials."""
    scheduler = Tenant()
    driver = SchedulerDriver(
        scheduler, name="mallory", broker=sec.as_("mallory"), cluster=T.cluster, role="mallory"
    )
    await driver.start()
    try:
        yield driver, scheduler
    finally:
        await driver._close()


def files_outside(root: Path, work_dirs: list[Path]) -> list[Path]:
    """What is under `root` but not under `work_dirs` (nor the credentials store), and
    whatever exists where the hostile ids pointed."""
    outside = [
        p
        for p in root.rglob("*")
        if not any(p == w or p.is_relative_to(w) for w in [*work_dirs, root / "auth"])
    ]
    aimed_at = [*root.parent.glob("escaped*"), Path("/tmp/absolute")]
    return outside + [p for p in aimed_at if p.exists()]


# -- the checks themselves --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "empty"),
        (".", "'.' or '..'"),
        ("..", "'.' or '..'"),
        ("../../x", "'/'"),
        ("/etc/x", "'/'"),
        ("a b", "whitespace"),
        ("a\tb", "whitespace"),
        ("a\0b", "control"),
        ("a\x1bb", "control"),
        ("x" * 201, "at most 200"),
    ],
)
def test_an_id_is_checked_by_mesoss_rules(value: str, rule: str) -> None:
    problem = id_problem(value, "task id")
    assert problem is not None
    assert problem.startswith("task id must")
    assert rule in problem
    assert id_problem("task-1.a:b@c_d", "task id") is None  # what Mesos allows, we allow


def test_a_reply_address_may_hold_no_mqtt_wildcard() -> None:
    assert "wildcards" in (reply_problem("in+") or "")
    assert "wildcards" in (reply_problem("#") or "")
    assert reply_problem("inbox-1") is None


def test_a_sandbox_path_stays_under_the_work_dir(tmp_path: Path) -> None:
    assert sandbox_path(tmp_path, "fw", "t1") == (tmp_path / "sandboxes" / "fw" / "t1").resolve()
    for framework_id, name in [("fw", ".."), ("..", "x"), ("fw", "../../x"), ("fw", "/x")]:
        with pytest.raises(ValueError, match="must"):
            sandbox_path(tmp_path, framework_id, name)
    # a link planted where a sandbox would be does not lead it elsewhere
    (tmp_path / "sandboxes" / "fw").mkdir(parents=True)
    (tmp_path / "sandboxes" / "fw" / "planted").symlink_to(tmp_path.parent)
    with pytest.raises(ValueError, match="outside"):
        sandbox_path(tmp_path, "fw", "planted")


def test_a_command_that_execve_would_refuse_is_refused_first() -> None:
    def task(command: str, env: dict[str, str] | None = None) -> TaskInfo:
        return TaskInfo(
            task_id="t",
            slave_id="s",
            resources=SMALL,
            command=CommandInfo(value=command, environment=env or {}),
        )

    assert "NUL" in (task_problem(task("echo \0")) or "")
    assert "'='" in (task_problem(task("true", {"A=B": "1"})) or "")
    assert "NUL" in (task_problem(task("true", {"A": "\0"})) or "")
    assert f"at most {MAX_COMMAND}" in (task_problem(task("x" * 200_000)) or "")
    executor = ExecutorInfo(executor_id="../e", command=CommandInfo(value="true"))
    bad = TaskInfo(task_id="t", slave_id="s", resources=SMALL, executor=executor)
    assert "executor id" in (task_problem(bad) or "")
    assert task_problem(task("echo hi", {"A": "b c"})) is None


@pytest.mark.parametrize("policy", ["hdrf", "naive-hdrf"])
def test_any_valid_framework_id_has_a_fair_share(policy: str) -> None:
    """Framework ids name users of the ideal; the role tree it builds must take any."""
    names = ["fw:1@x", "f" * 200, "fw-plain"]
    users = [User(name, {"cpus": 1, "mem": 1}, path=("team",)) for name in names]
    shares = ideal(policy, {"cpus": 3, "mem": 3}, users)
    assert set(shares) == set(names)
    assert all(abs(float(s.dominant_share) - 1 / 3) < 0.01 for s in shares.values())


# -- on a secured cluster -------------------------------------------------------------------


HOSTILE: list[tuple[str, str, dict[str, str], str]] = [
    # (task id, command, environment, what the refusal names)
    ("../../../escaped", "true", {}, "'/'"),
    ("/tmp/absolute", "true", {}, "'/'"),
    ("..", "true", {}, "'.' or '..'"),
    ("nul\0id", "true", {}, "control"),
    ("nul-command", "echo \0", {}, "NUL"),
    ("eq-env", "true", {"A=B": "1"}, "'='"),
    ("nul-env", "true", {"A": "x\0"}, "NUL"),
    ("huge", "x" * 200_000, {}, f"at most {MAX_COMMAND}"),
]


@pytest.mark.parametrize("caught_by", ["master", "slave", "start"])
async def test_a_tenant_cannot_make_a_sandbox_outside_a_work_dir_or_leave_a_task_stuck(
    real: Secure, tmp_path: Path, caught_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hostile launch ends at once, TASK_ERROR naming the rule it broke; nothing is
    created outside the slaves' work dirs; nothing of the tenant's holds resources. Each
    layer holds alone: with the master's check taken out the slave's admission refuses
    them, and with that out too, starting them fails them (TASK_FAILED), never stuck."""
    if caught_by in ("slave", "start"):
        monkeypatch.setattr("master.framework_calls.task_problem", lambda task: None)
    if caught_by == "start":
        monkeypatch.setattr("slave.slave.task_problem", lambda task: None)
    async with tenant(real) as (driver, mallory):
        offer = await mallory.offer()
        tasks = [
            TaskInfo(
                task_id=task_id,
                slave_id=offer.slave_id,
                resources=SMALL,
                command=CommandInfo(value=command, environment=env),
            )
            for task_id, command, env, _ in HOSTILE
        ]
        await driver.launch_tasks([offer.offer_id], tasks, AGAIN)
        await eventually(lambda: all(mallory.ended(t.task_id) for t in tasks))
        for task_id, _, _, rule in HOSTILE:
            status = mallory.last(task_id)
            assert status is not None
            if caught_by == "start":
                assert status.state == TaskState.FAILED, status
                assert status.reason == Reason.COMMAND_EXECUTOR_FAILED
                assert status.message.startswith("could not start"), status.message
            else:
                assert status.state == TaskState.ERROR, status
                assert status.reason == Reason.TASK_INVALID
                assert rule in status.message, status.message
        fw = real.master.books.frameworks[driver.framework_id or ""]
        await eventually(lambda: not fw.tasks)  # none holds resources
        # a good task on the same kind of offer still runs and finishes
        offer = await mallory.offer()
        good = build_task(offer, "good", SMALL, task_id="good", command="echo ok")
        await driver.launch_tasks([offer.offer_id], [good])
        await eventually(lambda: getattr(mallory.last("good"), "state", None) == "TASK_FINISHED")
    work_dirs = [tmp_path / "sa", tmp_path / "sb"]
    assert files_outside(tmp_path, work_dirs) == []
    intact(real)


async def test_a_reused_task_id_is_refused_alone_and_the_running_task_keeps_its_books(
    real: Secure,
) -> None:
    async with tenant(real) as (driver, mallory):
        offer = await mallory.offer()
        first = build_task(offer, "t", SMALL, task_id="t1", command="sleep 60")
        await driver.launch_tasks([offer.offer_id], [first], AGAIN)
        await eventually(lambda: getattr(mallory.last("t1"), "state", None) == "TASK_RUNNING")
        fw = real.master.books.frameworks[driver.framework_id or ""]
        held = real.master.allocator.allocated_total()
        offer = await mallory.offer()
        again = build_task(offer, "t", SMALL, task_id="t1", command="sleep 60")
        other = build_task(offer, "t", SMALL, task_id="t2", command="sleep 60")
        await driver.launch_tasks([offer.offer_id], [again, other])
        await eventually(lambda: getattr(mallory.last("t2"), "state", None) == "TASK_RUNNING")
        errors = [s for s in mallory.statuses if s.state == TaskState.ERROR]
        assert [(s.task_id, s.reason) for s in errors] == [("t1", Reason.TASK_INVALID)]
        assert "already in use" in errors[0].message
        # the first t1 still runs, in the master's books and on its slave, and is counted
        assert fw.tasks["t1"].state == TaskState.RUNNING
        assert set(fw.tasks) == {"t1", "t2"}
        assert fw.tasks["t1"].resources == SMALL
        assert held.contains(fw.tasks["t1"].resources)
        books_balance(real.master)
        await driver.kill_task("t1")
        await eventually(lambda: getattr(mallory.last("t1"), "state", None) == "TASK_KILLED")
    intact(real)


SLEEPER = f"{sys.executable} -m frameworks.samples.sleep_executor"


def on_executor(offer: Offer, task_id: str, executor: Resources, executor_id: str) -> TaskInfo:
    """A small long task on a custom executor that asks for `executor` of its own."""
    return TaskInfo(
        task_id=task_id,
        slave_id=offer.slave_id,
        resources=Resources(cpus=0.01, mem=1),
        executor=ExecutorInfo(
            executor_id=executor_id, command=CommandInfo(value=SLEEPER), resources=executor
        ),
        data=json.dumps({"duration": 300}).encode(),
    )


def counted_alike(sec: Secure) -> bool:
    """Every slave runs within its total, and runs what the master's books count there:
    its tasks and its executors, no more and no less."""
    for sid, slave in sec.slaves.items():
        booked = Resources()
        for fw in sec.master.books.frameworks.values():
            booked = sum((t.resources for t in fw.tasks.values() if t.slave_id == sid), booked)
            booked = sum((r for (s, _), r in fw.executors.items() if s == sid), booked)
        used = slave.used()
        if not slave.config.resources.contains(used) or used != booked:
            return False
    return True


def held_is_offered(master: Master, tenant: Tenant, fid: str, slave_id: str) -> bool:
    offered = sum((o.resources for o in tenant.offers if o.slave_id == slave_id), Resources())
    return master.allocator.held(fid, slave_id) == offered


async def test_a_greedy_executor_cannot_push_a_slave_past_its_total(real: Secure) -> None:
    """As Mesos: a new executor's resources come out of the offer with its first task, are
    the framework's until the executor exits, and are given back then."""
    master = real.master
    async with tenant(real) as (driver, mallory):
        fid = driver.framework_id or ""
        offer = await mallory.offer()
        whole = real.slaves[offer.slave_id].config.resources
        greedy = on_executor(offer, "greedy", whole, "hog")
        await driver.launch_tasks([offer.offer_id], [greedy], AGAIN)
        await eventually(lambda: mallory.ended("greedy"))
        refused = mallory.last("greedy")
        assert refused is not None
        assert refused.state == TaskState.ERROR
        assert not master.books.frameworks[fid].executors

        # an executor that takes all the offer leaves: accepted, and counted as mallory's
        offer = await mallory.offer()
        task = Resources(cpus=0.01, mem=1)
        rest = offer.resources - task
        fits = on_executor(offer, "fits", rest, "taker")
        # a second task on it asking the executor be bigger is refused alone
        bigger = on_executor(offer, "bigger", rest + Resources(cpus=1), "taker")
        await driver.launch_tasks([offer.offer_id], [fits, bigger], AGAIN)
        await eventually(lambda: getattr(mallory.last("fits"), "state", None) == "TASK_RUNNING")
        assert getattr(mallory.last("bigger"), "state", None) == TaskState.ERROR
        fw = master.books.frameworks[fid]
        assert fw.executors == {(offer.slave_id, "taker"): rest}
        assert master.allocator.held(fid, offer.slave_id).contains(offer.resources)
        assert not master.allocator.free(offer.slave_id)  # nothing left to offer anyone
        await eventually(lambda: counted_alike(real))
        books_balance(master)

        # the executor ends: what it held is given back
        slave = real.slaves[offer.slave_id]
        pid = slave.executors[f"{fid}.taker"].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await eventually(lambda: mallory.ended("fits"))
        await eventually(lambda: not fw.executors)
        await eventually(lambda: counted_alike(real))
        # mallory holds there only what it is offered again
        await eventually(lambda: held_is_offered(master, mallory, fid, offer.slave_id))
        books_balance(master)
    assert not [s for s in real.victim.statuses if s.state == TaskState.ERROR]
    intact(real)
