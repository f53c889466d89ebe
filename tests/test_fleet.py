"""At scale (issue #34): a process's logical slaves (slave.fleet) hold one subscription,
send their heartbeats in lists and register paced; the master takes a list only for the
sender's own slaves, counts a big cluster's slaves in its snapshot instead of listing
them, pages them without sorting them all, and sends a round's offers in bounded
messages."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.console import Console

from cluster.local.view import render_state, wait_state
from master.http.slave_pages import slave_page
from master.master import Master, MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from protocol.transport.base import Transport
from protocol.transport.bus import Bus
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    CommandInfo,
    Error,
    Heartbeat,
    Heartbeats,
    KillTask,
    Leader,
    Offers,
    Register,
    Registered,
    Reregister,
    RunTasks,
    StatusAck,
    StatusUpdate,
    TaskInfo,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.backoff import RETRY_CAP, RegistrationBackoff
from slave.cli import FDS_PER_SLAVE
from slave.fleet import Fleet
from slave.recovery import recover
from slave.reports import TaskReports
from slave.slave import Slave, SlaveConfig

from harness.disk import HeldSync
from harness.fakes import FakeFramework, party
from harness.helpers import Inbox, eventually, open_transport, start_master

T = Topics("fleet")
SLAVES = 1000
CONFIG = MasterConfig(heartbeat_interval=0.5, slave_timeout=60, state_interval=0.5)


def configs(work: Path, count: int, factor: float) -> list[SlaveConfig]:
    return [
        SlaveConfig(
            slave_id=f"s{i:05d}",
            hostname=f"h{i}",
            resources=Resources(cpus=4, mem=4096),
            work_dir=work / f"s{i:05d}",
            simulated_tasks=True,
            cluster=T.cluster,
            registration_backoff_factor=factor,
            in_fleet=True,
        )
        for i in range(count)
    ]


@contextlib.asynccontextmanager
async def fleet_cluster(
    broker: MosquittoBroker, work: Path, count: int, factor: float = 0.5
) -> AsyncIterator[tuple[Master, Fleet]]:
    url = dataclasses.replace(broker.url, username="rack1")
    async with contextlib.AsyncExitStack() as stack:
        master_bus = await stack.enter_async_context(Bus(broker.url, name="master"))
        master = Master(master_bus, T, CONFIG)
        await master.start()
        stack.push_async_callback(master.stop)
        bus = await stack.enter_async_context(
            Bus(url, name="fleet", inbox=T.outbox("slave", "rack1"), persistent=True)
        )
        fleet = Fleet(bus, T, "rack1")
        runner = asyncio.create_task(fleet.run(configs(work, count, factor)))
        stack.push_async_callback(cancel, runner)
        yield master, fleet


async def cancel(task: asyncio.Task[None]) -> None:
    """Stop a fleet as a SIGTERM does: one cancel, and it ends (a test fails, not hangs)."""
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    assert task.done(), "the fleet did not stop when cancelled"
    if not task.cancelled():
        task.result()


async def test_a_fleet_registers_on_one_subscription_and_heartbeats_in_lists(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with fleet_cluster(mosquitto, tmp_path, SLAVES) as (master, fleet):
        await eventually(lambda: len(master.books.slaves) == SLAVES, timeout=60)
        assert {s.principal for s in master.books.slaves.values()} == {"rack1"}
        # one subscription brings every slave's inbox (and one the leader's announcement)
        assert set(fleet.bus._subs) == {T.slaves_of("rack1"), T.leader}

        # every slave's heartbeat reaches the master, thousands to a payload
        beats = master.messages.received
        before, payloads = beats["Heartbeat"], master.bus.stats["payloads_in"]
        await eventually(lambda: beats["Heartbeat"] >= before + 2 * SLAVES, timeout=60)
        arrived = master.bus.stats["payloads_in"] - payloads
        assert arrived < 2 * SLAVES / 20  # (and other messages besides)

        # what is sent to one slave's topic reaches that slave alone
        answers = Inbox()
        async with Bus(mosquitto.url, name="asker", inbox=T.operator("asker")) as asker:
            await asker.subscribe(T.operator("asker"), answers)
            kill = KillTask(framework_id="f", task_id="t")
            await asker.publish(T.slave("rack1", "s00007"), kill)
            [error] = await answers.wait_count(Error, 1, timeout=30)
        assert "slave s00007" in error.message
        assert error.code == "unknown-task"


async def test_the_master_takes_heartbeats_only_for_the_senders_own_slaves(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with fleet_cluster(mosquitto, tmp_path, 20, factor=0) as (master, _):
        await eventually(lambda: len(master.books.slaves) == 20)
        last = {s.slave_id: s.last_seen for s in master.books.slaves.values()}
        intruder = dataclasses.replace(mosquitto.url, username="rack2")
        async with Bus(intruder, name="rack2") as bus:
            bus.post(T.inbound("slave", "rack2"), Heartbeats(slave_ids=list(last)))
            bus.post(T.inbound("slave", "rack2"), Heartbeat(source="s00003"))
            refused = master.messages.outcomes
            key = ("Heartbeat", "refused", "unknown-slave")
            await eventually(lambda: refused[key] >= 21)
        # (the fleet's own heartbeats go on: what rack2 said changed nothing)
        assert all(master.books.slaves[sid].principal == "rack1" for sid in last)


def test_registration_is_paced_by_the_backoff_factor() -> None:
    rng = random.Random(1)
    firsts = [RegistrationBackoff(10.0, rng).first() for _ in range(1000)]
    assert 0 <= min(firsts) < 1
    assert 9 < max(firsts) <= 10
    backoff = RegistrationBackoff(10.0, rng)
    retries = [backoff.retry() for _ in range(6)]
    assert 10 <= retries[0] <= 20
    assert retries[-1] <= RETRY_CAP
    # a big factor's retries never come sooner than its first did (the cap does not
    # shorten them): a master behind in its reading is not sent second copies sooner
    big = RegistrationBackoff(40.0, rng)
    assert all(40 <= big.retry() <= 80 for _ in range(6))
    assert RegistrationBackoff(0.0).first() == 0  # no factor: at once
    assert all(0.5 <= RegistrationBackoff(0.0).retry() <= 1 for _ in range(100))  # no spin


async def test_a_big_clusters_state_counts_its_slaves_without_listing_them(
    mosquitto: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("master.http.read_side.LISTED_SLAVES", 10)  # 20 slaves: a big cluster here
    async with fleet_cluster(mosquitto, tmp_path, 20, factor=0) as (master, _):
        await eventually(lambda: len(master.books.slaves) == 20)
        state = await wait_state(mosquitto.url, T.cluster, lambda s: s.slave_count == 20)
        assert state.slaves == []  # (paged at /api/v1/slaves)
        assert state.slaves_registered == 20
        console = Console(record=True, width=160)
        console.print(render_state(state))
        assert "20 not listed" in console.export_text()  # drfmesos state says so


async def test_a_round_on_many_free_slaves_sends_offers_in_bounded_messages(
    mosquitto: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("master.offers.MAX_OFFERS_PER_MESSAGE", 2)  # (1,000 in production)
    async with fleet_cluster(mosquitto, tmp_path, 5, factor=0) as (master, _):
        await eventually(lambda: len(master.books.slaves) == 5)
        async with party(mosquitto.url, "fw", T) as bus:
            fw = FakeFramework(bus, T, "fw")
            await bus.subscribe(T.framework("framework", "fw"), fw.inbox)
            await fw.subscribe("A")
            await fw.inbox.wait_until(lambda: fw.offer_count() == 5)
            assert sorted(len(m.offers) for m in fw.inbox.of(Offers)) == [1, 2, 2]


def test_a_page_of_slaves_is_chosen_without_sorting_them_all() -> None:
    @dataclasses.dataclass
    class Listed:
        slave_id: str
        hostname: str
        last_seen: float

    slaves = {f"s{i:05d}": Listed(f"s{i:05d}", f"rack{i % 7}", -i) for i in range(50_000)}
    assert slave_page(slaves, "", 100, 3) == (["s00100", "s00101", "s00102"], 50_000)
    assert slave_page(slaves, "-slave_id", 0, 2)[0] == ["s49999", "s49998"]
    assert slave_page(slaves, "last_heartbeat", 0, 1)[0] == ["s49999"]  # the longest unheard
    ids, total = slave_page(slaves, "", 0, 2, search="rack3")
    assert (ids, total) == (["s00003", "s00010"], 7143)
    assert slave_page(slaves, "", 0, 5, search="s01234") == (["s01234"], 1)


async def test_what_reaches_a_fleets_slave_while_it_recovers_waits_for_its_handlers(
    mosquitto: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill sent to a restarted slave while it is still recovering its tasks is handled
    once it has: the process's wildcard subscription brought it before the slave's own
    route was up, and it used to be dropped as unrouted (the task ran on, unkilled)."""
    recovering, resume = asyncio.Event(), asyncio.Event()

    async def slow_recover(slave: Slave, reports: TaskReports) -> None:
        recovering.set()
        await resume.wait()
        await recover(slave, reports)

    monkeypatch.setattr("slave.slave.recover", slow_recover)
    url = dataclasses.replace(mosquitto.url, username="rack1")
    answers = Inbox()
    async with contextlib.AsyncExitStack() as stack:
        bus = await stack.enter_async_context(
            Bus(url, name="fleet", inbox=T.outbox("slave", "rack1"), persistent=True)
        )
        fleet = Fleet(bus, T, "rack1")
        runner = asyncio.create_task(fleet.run(configs(tmp_path, 1, 0)))
        stack.push_async_callback(cancel, runner)
        asker = await stack.enter_async_context(
            Bus(mosquitto.url, name="asker", inbox=T.operator("asker"))
        )
        await asker.subscribe(T.operator("asker"), answers)
        await within(recovering.wait(), 10)
        await asker.publish(T.slave("rack1", "s00000"), KillTask(framework_id="f", task_id="t"))
        await eventually(lambda: fleet.bus.messages.received["KillTask"] >= 1)
        assert answers.of(Error) == []  # held, not answered, while it recovers
        resume.set()
        [error] = await answers.wait_count(Error, 1, timeout=10)
        assert error.code == "unknown-task"  # handled by the slave itself


async def memory_fleet(
    stack: contextlib.AsyncExitStack, broker: MemoryBroker, work: Path, count: int
) -> tuple[Master, Fleet]:
    """A master and a fleet of `count` slaves (principal rack1) on the memory transport,
    once the master has every slave."""
    master = await start_master(stack, broker.connector(None), T, CONFIG)
    inbox = T.outbox("slave", "rack1")
    bus = await open_transport(stack, broker.connector("rack1"), "fleet", inbox=inbox)
    fleet = Fleet(bus, T, "rack1")  # type: ignore[arg-type]
    runner = asyncio.create_task(fleet.run(configs(work, count, 0)))
    stack.push_async_callback(cancel, runner)
    await eventually(lambda: len(master.books.slaves) == count)
    return master, fleet


async def test_a_fleet_runs_on_the_memory_transport_each_slave_on_its_own_route(
    tmp_path: Path,
) -> None:
    """The fleet's slaves are routed their own topics off one wildcard subscription on
    any transport (the in-process one too): a kill for one is that slave's alone."""
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        _, fleet = await memory_fleet(stack, broker, tmp_path, 3)
        bus = fleet.bus
        asker = await open_transport(stack, broker.connector(None), "asker", T.operator("a"))
        answers = Inbox()
        await asker.subscribe(T.operator("a"), answers)
        await asker.publish(T.slave("rack1", "s00001"), KillTask(framework_id="f", task_id="t"))
        error = await answers.wait_for(Error)
        assert error.code == "unknown-task"
        assert "slave s00001" in error.message  # the one it was sent to answered
        assert bus.messages.received["KillTask"] == 1


async def test_a_fleets_slaves_are_out_of_the_collectors_walks_while_it_runs(
    tmp_path: Path,
) -> None:
    """A fleet's slaves live as long as it runs: made with the cyclic collector paused,
    then frozen, so that its full walks pass them over (walking them again and again was
    80% of the time 4,000 slaves took to make), and the collector's again once it stops
    (a stopped fleet's memory may go)."""
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        _, fleet = await memory_fleet(stack, broker, tmp_path, 20)
        walked = {id(o) for o in gc.get_objects()}
        assert not any(id(s) in walked for s in fleet.slaves)
    assert gc.get_freeze_count() == 0
    walked = {id(o) for o in gc.get_objects()}
    assert all(id(s) in walked for s in fleet.slaves)


def test_a_process_of_many_slaves_may_open_the_files_they_need_or_says_so() -> None:
    """10,000 logical slaves keep 20,000 journals open: a process of them ran out of
    this host's 20,000 open files, and its journal writes failed with EMFILE, silently
    for the operator. The limit is lifted to what they need where the process may (root
    with CAP_SYS_RESOURCE); elsewhere the slave says how many slaves the limit holds."""
    code = (
        "import resource; from slave.cli import raise_fd_limit; raise_fd_limit(10_000); "
        "print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    soft, hard = map(int, out.stdout.split())
    if soft >= 10_000 * FDS_PER_SLAVE:
        assert hard >= soft
    else:
        assert soft == hard  # as far as it may go
        assert "slave.fd_limit" in out.stderr
        assert f"at most {(hard - 1024) // FDS_PER_SLAVE} slaves" in out.stderr


async def test_a_fleets_slaves_launch_while_the_disk_syncs_and_tell_nothing_before_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launches of a process's slaves wait for no disk: while the journals' file
    syncs one slave's RUNNING update, another slave of the process takes its launch (the
    process's dispatch used to wait for each launch's sync: a fleet's launches one disk
    trip at a time). What they report is sent only once it is on disk."""
    disk = HeldSync(monkeypatch, holding=False)
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        _, fleet = await memory_fleet(stack, broker, tmp_path, 2)
        framework = await open_transport(stack, broker.connector(None), "fw", T.operator("fw"))
        told = Inbox()  # what the slaves send the master
        await framework.subscribe(T.inbound("slave", "rack1"), told)

        def running() -> set[str]:
            return {
                u.status.task_id
                for u in told.of(StatusUpdate)
                if u.status.state.value == "TASK_RUNNING"
            }

        async def launch(slave: int, task_id: str) -> None:
            sid = f"s{slave:05d}"
            task = TaskInfo(
                task_id=task_id,
                slave_id=sid,
                resources=Resources(cpus=0.1, mem=16),
                command=CommandInfo(value="sleep 60"),
            )
            await framework.publish(T.slave("rack1", sid), RunTasks(framework_id="f", tasks=[task]))

        for i in (0, 1):  # (each slave's first launch of the framework: its owner written)
            await launch(i, f"warm-{i}")
        await told.wait_until(lambda: running() == {"warm-0", "warm-1"})
        disk.hold.set()
        await launch(0, "a")
        await asyncio.to_thread(disk.started.wait, 10)  # a's update is being synced
        await launch(1, "b")
        await eventually(lambda: ("f", "b") in fleet.slaves[1].tasks)  # taken meanwhile
        assert running() == {"warm-0", "warm-1"}  # neither told before it is on disk
        disk.release.set()
        await told.wait_until(lambda: {"a", "b"} <= running())


async def test_a_fleet_sends_an_unacknowledged_update_again_looking_only_at_slaves_that_owe(
    tmp_path: Path,
) -> None:
    """An update the master does not acknowledge goes again, and stops once acknowledged;
    the fleet's one re-send loop looks only at the slaves with one to send (it walked all
    4,000 of a process five times a second, most of an idle process's CPU)."""
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        fleet, master, told = await owing_fleet(stack, broker, tmp_path, resend_after=0.2)
        assert fleet.owing <= {fleet.slaves[1]}  # (the others owe nothing)

        def sent() -> list[StatusUpdate]:
            return told.of(StatusUpdate)

        await told.wait_until(lambda: len(sent()) >= 3)  # the first, and again, and again
        assert {u.status.uuid for u in sent()} == {sent()[0].status.uuid}
        assert fleet.owing == {fleet.slaves[1]}  # the only one looked at
        ack = StatusAck(
            slave_id="s00001", framework_id="f", task_id="t", uuid=sent()[0].status.uuid
        )
        await master.publish(T.slave("rack1", "s00001"), ack)
        await eventually(lambda: not fleet.owing)
        after = len(sent())
        await asyncio.sleep(1.0)  # (a second of re-send looks: none sends it again)
        assert len(sent()) == after


async def owing_fleet(
    stack: contextlib.AsyncExitStack, broker: MemoryBroker, work: Path, resend_after: float
) -> tuple[Fleet, Transport, Inbox]:
    """A fleet of 3 slaves whose master answers their Registers (not a Reregister) and
    acknowledges nothing; slave s00001 runs a task, its RUNNING update owed."""
    master = await open_transport(stack, broker.connector(None), "master")
    told = Inbox()

    async def answer(message: Wire, reply_to: str | None) -> None:
        await told(message, reply_to)
        if isinstance(message, Register):
            registered = Registered(slave_id=message.slave_id, heartbeat_interval_seconds=60)
            await master.publish(T.slave("rack1", message.slave_id), registered)

    await master.subscribe(T.inbound("slave", "rack1"), answer)
    inbox = T.outbox("slave", "rack1")
    bus = await open_transport(stack, broker.connector("rack1"), "fleet", inbox=inbox)
    fleet = Fleet(bus, T, "rack1")  # type: ignore[arg-type]
    slaves = [dataclasses.replace(c, resend_after=resend_after) for c in configs(work, 3, 0)]
    runner = asyncio.create_task(fleet.run(slaves))
    stack.push_async_callback(cancel, runner)
    await told.wait_until(lambda: len(told.of(Register)) == 3)
    await eventually(lambda: all(s.registered.is_set() for s in fleet.slaves))
    task = TaskInfo(
        task_id="t",
        slave_id="s00001",
        resources=Resources(cpus=1, mem=16),
        command=CommandInfo(value="sleep 60"),  # (simulated: it runs for ever)
    )
    await master.publish(T.slave("rack1", "s00001"), RunTasks(framework_id="f", tasks=[task]))
    await told.wait_until(lambda: len(told.of(StatusUpdate)) == 1)
    return fleet, master, told


async def test_a_fleet_looks_at_a_slave_owing_an_update_only_when_its_resend_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a failover most slaves of a process owe an update (their frameworks are not back
    yet) and back off their re-sends to 30 s: the fleet's re-send loop looked at each of
    them five times a second all the same (a fifth of a 20,000-slave failover's CPU in a
    slave process). It looks at a slave when its next re-send is due."""
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        fleet, _, told = await owing_fleet(stack, broker, tmp_path, resend_after=1.5)
        owing = fleet.slaves[1]
        looks: list[float] = []
        resend_due = owing.updates.resend_due

        def looked(now: float) -> None:
            looks.append(now)
            resend_due(now)

        monkeypatch.setattr(owing.updates, "resend_due", looked)
        await told.wait_until(lambda: len(told.of(StatusUpdate)) == 2, timeout=5)  # again
        await told.wait_until(lambda: len(told.of(StatusUpdate)) == 3, timeout=8)  # 3 s on
        assert fleet.owing == {owing}
        assert len(looks) == 2  # once each time it was due, not 5 times a second
        assert {u.status.uuid for u in told.of(StatusUpdate)} == {
            told.of(StatusUpdate)[0].status.uuid
        }


async def test_an_update_owed_while_a_fleets_slave_re_registers_goes_again_once_it_has(
    tmp_path: Path,
) -> None:
    """A slave not registered when its re-send is due is set aside (its update would be
    refused), and sends it again as soon as a master has it registered again."""
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        fleet, master, told = await owing_fleet(stack, broker, tmp_path, resend_after=0.2)
        owing = fleet.slaves[1]
        leader = Leader(master_id="m2", epoch=owing.registration.master_epoch + 10)
        await master.publish(T.leader, leader, retain=True)  # a new leader: re-register
        await told.wait_until(lambda: bool(told.of(Reregister)))
        assert not owing.registered.is_set()
        # unanswered, it tries again (0.5-1 s on): its re-sends came due meanwhile (0.2 s)
        await told.wait_until(lambda: len(told.of(Reregister)) >= 2, timeout=5)
        await eventually(lambda: owing not in fleet.owing)  # set aside till it is back
        before = len(told.of(StatusUpdate))
        # the master answers its re-registration at last
        registered = Registered(slave_id=owing.slave_id, heartbeat_interval_seconds=60)
        await master.publish(T.slave("rack1", owing.slave_id), registered)
        await told.wait_until(lambda: len(told.of(StatusUpdate)) > before, timeout=5)
        assert owing.registered.is_set()
