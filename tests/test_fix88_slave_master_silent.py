"""fix88: a slave notices a stopped master.

A Mesos agent counts its master's pings and, once they stop (agent ping timeout), looks
for a master again. A slave here sent heartbeats one way and heard nothing back in the
steady state: with its master stopped it went on heartbeating into the void and logged
nothing, for as long as it ran (what a user saw). It did register again once a master
came back: the new master's announcement (a newer epoch) had it re-register with its
tasks, or, a master started again in the same epoch, that master's answer to its next
heartbeat (`unknown-slave`). Only the silence went unsaid.

Now the leading master beats on its leader topic every heartbeat interval (one message
an interval for every slave process's bus), and a slave counts the beats as a framework
counts its heartbeats (protocol.master_silence): `slave.master_silent` at warning once
three intervals pass unheard, with how long, and `slave.master_heard` when a master
answers again; a beat from a master other than the one it registered with has it
re-register at once (slave.master_link).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from frameworks import Filters, Resources, SchedulerDriver, TaskState, build_task
from master.config import MasterConfig
from master.master import Master
from protocol.transport.aio import cancel_and_wait
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Leader
from protocol.wire.topics import Topics
from slave.fleet import Fleet
from slave.master_link import MasterLink
from slave.slave import SlaveConfig

from harness.helpers import InProcess, Recorder, eventually, in_process_cluster, open_transport

CLUSTER = "silent"
INTERVAL = 0.3  # the heartbeat interval the master asks of slaves (and beats at), here
TASK = Resources(cpus=0.25, mem=32)
CONFIG = MasterConfig(allocation_interval=0.1, heartbeat_interval=INTERVAL)
pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def running_task(tmp_path: Path) -> AsyncIterator[tuple[InProcess, str]]:
    """A cluster of one slave, running a framework's task `t` (the framework id)."""
    async with in_process_cluster(CLUSTER, tmp_path, CONFIG, slaves=1) as c:
        rec = Recorder()
        driver = SchedulerDriver(rec, name="f", broker=c.connect, cluster=CLUSTER)
        await driver.start()
        try:
            offer = await rec.offer_on(driver)
            task = build_task(offer, "t", TASK, command="sleep 300", task_id="t")
            await driver.launch_tasks([offer.offer_id], [task], Filters())
            await rec.update("t", TaskState.RUNNING)
            yield c, driver.framework_id or ""
        finally:
            driver.stop()
            await driver.join()


async def stop(master: Master) -> None:
    """As Ctrl-C of `drfmesos master`: it stops, and its connection closes."""
    await master.stop()
    await master.bus.close()


async def start_again(
    stack: contextlib.AsyncExitStack, broker: MemoryBroker, topics: Topics, epoch: int = 0
) -> Master:
    """`drfmesos master` started again (no registry: it knows no slave)."""
    bus = await open_transport(stack, broker.connector(None), "master")
    master = Master(bus, topics, CONFIG, epoch=epoch)
    await master.start()
    stack.push_async_callback(master.stop)
    return master


def events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_a_slave_whose_master_stops_says_so_and_registers_again_when_one_starts(
    tmp_path: Path,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        c, fid = await stack.enter_async_context(running_task(tmp_path))
        [slave] = c.slaves
        with structlog.testing.capture_logs() as logs:
            # the master's beats keep it quiet while it runs: MISSED intervals and more pass
            heard = 0
            silence = slave.master.silence
            hear = silence.heard

            def counted() -> None:
                nonlocal heard
                heard += 1
                hear()

            silence.heard = counted  # type: ignore[method-assign]
            await eventually(lambda: heard >= 5)
            assert not events(logs, "slave.master_silent")

            await stop(c.master)
            await eventually(lambda: bool(events(logs, "slave.master_silent")))
            [said] = events(logs, "slave.master_silent")
            assert said["log_level"] == "warning"
            assert said["slave_id"] == slave.slave_id
            assert said["silent"] >= 3 * INTERVAL
            assert said["heartbeat_interval"] == INTERVAL
            assert f"drfmesos master --cluster {CLUSTER}" in said["detail"]
            assert "this slave registers again by itself" in said["detail"]

            # a master started again: the slave registers with it, its task known there
            again = await start_again(stack, c.broker, c.topics)
            await eventually(lambda: slave.slave_id in again.books.slaves)
            await eventually(lambda: (fid, "t") in again.books.slaves[slave.slave_id].tasks)
            await eventually(lambda: bool(events(logs, "slave.master_heard")))
            assert len(events(logs, "slave.master_silent")) == 1  # (said again after 30 s)


async def test_a_master_started_again_in_the_same_epoch_has_the_slave_register_again(
    tmp_path: Path,
) -> None:
    """No announcement tells a slave of a master started again in the epoch it knows (a
    restart within the second, with no registry): the new master's beat, of another
    master id, or its answer to a heartbeat, has the slave register again."""
    async with contextlib.AsyncExitStack() as stack:
        c, fid = await stack.enter_async_context(running_task(tmp_path))
        [slave] = c.slaves
        epoch, was = c.master.epoch, c.master.master_id
        await stop(c.master)
        again = await start_again(stack, c.broker, c.topics, epoch=epoch)
        assert again.master_id != was
        await eventually(lambda: slave.slave_id in again.books.slaves)
        await eventually(lambda: (fid, "t") in again.books.slaves[slave.slave_id].tasks)
        await eventually(lambda: slave.master.master_id == again.master_id)


async def test_a_beat_of_another_master_has_the_slave_register_again() -> None:
    registered, announced = asyncio.Event(), []

    class Bus:
        connected = True
        incarnation = "i"

    class Log:
        def info(self, event: str, **fields: object) -> None:
            pass

    link = MasterLink(
        Bus(),  # type: ignore[arg-type]
        "to-master",
        "s1",
        "c",
        registered,
        lambda: announced.append(True),
        Log(),
    )
    link.beat(Leader(master_id="m2", epoch=1))  # not registered: nothing to do
    registered.set()
    link.registered_with("m1", 5.0)
    link.beat(Leader(master_id="m1", epoch=1))  # its own master: heard, no more
    assert announced == []
    link.beat(Leader(master_id="m2", epoch=1))  # another master leads: its tasks may be unknown
    assert announced == [True]


async def test_a_fleet_says_its_masters_silence_once_for_all_its_slaves(tmp_path: Path) -> None:
    topics = Topics(CLUSTER)
    configs = [
        SlaveConfig(
            slave_id=f"s{i}",
            hostname=f"h{i}",
            resources=Resources(cpus=1, mem=512),
            work_dir=tmp_path / f"s{i}",
            simulated_tasks=True,
            cluster=CLUSTER,
            in_fleet=True,
        )
        for i in range(3)
    ]
    async with contextlib.AsyncExitStack() as stack:
        broker = MemoryBroker()
        master_bus = await open_transport(stack, broker.connector(None), "master")
        master = Master(master_bus, topics, CONFIG)
        await master.start()
        stack.push_async_callback(master.stop)
        inbox = topics.outbox("slave", "rack")
        bus = await open_transport(stack, broker.connector("rack"), "fleet", inbox=inbox)
        fleet = Fleet(bus, topics, "rack")  # type: ignore[arg-type]
        runner = asyncio.create_task(fleet.run(configs))
        stack.push_async_callback(cancel_and_wait, runner)
        await eventually(lambda: len(master.books.slaves) == len(configs))
        await eventually(lambda: fleet.silence.interval == INTERVAL)
        with structlog.testing.capture_logs() as logs:
            await stop(master)
            await eventually(lambda: bool(events(logs, "slave.master_silent")))
            [said] = events(logs, "slave.master_silent")  # (once: not a line a slave)
            assert (said["principal"], said["slaves"]) == ("rack", len(configs))
            assert said["silent"] >= 3 * INTERVAL
            again = await start_again(stack, broker, topics)
            await eventually(lambda: len(again.books.slaves) == len(configs))
            await eventually(lambda: bool(events(logs, "slave.master_heard")))
