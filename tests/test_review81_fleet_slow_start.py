"""What reaches a fleet's slave before its route is up (review81): since 758e8ef it waits
in the bus's unheard store, which keeps it `HOLD_FOR` (60 s) and then drops it. A fleet
starts its slaves one after another, each recovering its tasks first, so a slave's route
may come up minutes after the wildcard brought its messages (a slow recovery, or many
slaves before it); before, each slave held what came for it (`hold_early`) until its
handlers were in place, however long that took. A kill sent to such a slave must still
reach it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.transport import unheard
from protocol.transport.aio import within
from protocol.transport.base import Transport
from protocol.transport.bus import Bus
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Error, KillTask
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from slave.fleet import Fleet
from slave.recovery import recover
from slave.reports import TaskReports
from slave.slave import Slave, SlaveConfig

from harness.helpers import Inbox, eventually, open_transport

T = Topics("fleet")
HOLD = 0.5  # the store's hold, standing in for its 60 s
FLEET_INBOX = T.outbox("slave", "rack1")


async def test_a_kill_for_a_slave_recovering_longer_than_the_hold_reaches_it_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = MemoryBroker()
    async with contextlib.AsyncExitStack() as stack:
        fleet_bus = await open_transport(
            stack, broker.connector("rack1"), "fleet", inbox=FLEET_INBOX
        )
        asker = await open_transport(
            stack, broker.connector(None), "asker", inbox=T.operator("asker")
        )
        await kill_while_recovering_longer_than_the_hold(
            stack, fleet_bus, asker, tmp_path, monkeypatch
        )


async def test_a_kill_for_a_slave_recovering_longer_than_the_hold_reaches_it_mqtt(
    mosquitto: MosquittoBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = dataclasses.replace(mosquitto.url, username="rack1")
    async with contextlib.AsyncExitStack() as stack:
        fleet_bus = await stack.enter_async_context(
            Bus(url, name="fleet", inbox=FLEET_INBOX, persistent=True)
        )
        asker = await stack.enter_async_context(
            Bus(mosquitto.url, name="asker", inbox=T.operator("asker"))
        )
        await kill_while_recovering_longer_than_the_hold(
            stack, fleet_bus, asker, tmp_path, monkeypatch
        )


async def kill_while_recovering_longer_than_the_hold(
    stack: contextlib.AsyncExitStack,
    fleet_bus: Transport,
    asker: Transport,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fleet of one slave whose recovery outlasts the hold; a kill sent to it meanwhile
    is answered by the slave (`unknown-task`: it runs no such task)."""
    monkeypatch.setattr(unheard, "HOLD_FOR", HOLD)
    recovering, resume = asyncio.Event(), asyncio.Event()

    async def slow_recover(slave: Slave, reports: TaskReports) -> None:
        recovering.set()
        await resume.wait()
        await recover(slave, reports)

    monkeypatch.setattr("slave.slave.recover", slow_recover)
    answers = Inbox()
    fleet = Fleet(fleet_bus, T, "rack1")  # type: ignore[arg-type]
    runner = asyncio.create_task(fleet.run(one_slave(tmp_path)))
    stack.push_async_callback(stop, runner)
    await asker.subscribe(T.operator("asker"), answers)
    await within(recovering.wait(), 10)
    await asker.publish(T.slave("rack1", "s00000"), KillTask(framework_id="f", task_id="t"))
    await eventually(lambda: fleet_bus.stats["payloads_in"] >= 1)  # (the kill, at the bus)
    # the recovery lasts three times the hold (the scenario itself, not a wait for a
    # condition: with the real hold, a recovery of three minutes)
    await asyncio.sleep(3 * HOLD)
    resume.set()
    [error] = await answers.wait_count(Error, 1, timeout=10)
    assert error.code == "unknown-task"  # handled by the slave itself


def one_slave(work: Path) -> list[SlaveConfig]:
    return [
        SlaveConfig(
            slave_id="s00000",
            hostname="h0",
            resources=Resources(cpus=4, mem=4096),
            work_dir=work / "s00000",
            simulated_tasks=True,
            cluster=T.cluster,
            in_fleet=True,
        )
    ]


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    assert task.done(), "the fleet did not stop when cancelled"
