"""A master serving Mesos's scheduler HTTP API, and a client of it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from benchmarks.mesos_client import MesosScheduler, basic
from cluster.local.secure import provision
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from master.mesos_api.doors import mesos_doors
from master.mesos_api.scheduler_http import SchedulerApi, SchedulerStream
from protocol.tooling.credentials import Store
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import FrameworkMessage, State
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.fakes import FakeSlave
from harness.helpers import (
    SECURE_SLAVE,
    eventually,
    open_transport,
    start_secure_slaves,
    state_when,
)


@dataclass
class Live:
    store: Store
    web: str
    master: Master | None = None  # in process

    def auth(self, name: str) -> str:
        return basic(name, self.store.secret_file(name).read_text().strip())

    def scheduler(self, name: str = "team-a") -> MesosScheduler:
        return MesosScheduler(self.web, self.auth(name))

    async def state(self, condition: Callable[[State], bool]) -> State:
        """The master's state once `condition` holds of it."""
        assert self.master is not None
        return await state_when(self.master, condition)


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    """A master serving the Mesos APIs (as `drfmesos master --http` does, with
    `--principals`) and slave-0 (4 CPUs, 1 GB), in process on the memory transport.
    team-a may reserve resources for its role (`drfmesos auth reserve`); team-b not."""
    async with live_cluster(tmp_path, reserve=("team-a",)) as cluster:
        yield cluster


async def mesos_master(
    stack: contextlib.AsyncExitStack, store: Store, broker: MemoryBroker, topics: Topics
) -> Master:
    """A master in process with the Mesos HTTP APIs, its principals `store`'s, stopped
    with `stack`."""
    config = MasterConfig(
        allocation_interval=0.1,
        principals=store.principals_file,
        http=HttpConfig(port=0, credentials=store.path),
    )
    bus = await open_transport(stack, broker.connector("master"), "master")
    master = Master(bus, topics, config)
    master.http_doors.extend(mesos_doors(master))
    await master.start()
    stack.push_async_callback(master.stop)
    return master


@contextlib.asynccontextmanager
async def live_cluster(
    tmp_path: Path,
    resources: Resources = SECURE_SLAVE,
    *,
    simulated: bool = False,
    reserve: tuple[str, ...] = (),
) -> AsyncIterator[Live]:
    """The `live` fixture's master and slave-0 (of `resources`; `simulated` tasks or
    real processes), its principals (PRINCIPALS), those of `reserve` granted RESERVE
    before the master starts."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    for name in reserve:
        store.may_reserve(name, True)
    broker, topics = MemoryBroker(store.principals.values()), Topics(CLUSTER)
    async with contextlib.AsyncExitStack() as stack:
        master = await mesos_master(stack, store, broker, topics)
        await start_secure_slaves(
            stack, broker.connector, topics, tmp_path, [("slave-0", "s0")],
            simulated=simulated, resources=resources,
        )  # fmt: skip
        await eventually(lambda: len(master.books.slaves) == 1 and bool(master.web_ui))
        yield Live(store, master.web_ui, master)


async def operator_call(live: Live, call: dict[str, Any], name: str = "ops") -> tuple[int, Any]:
    """A v1 operator call (`POST /api/v1`) as principal `name`: (status, its JSON)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            live.web + "api/v1",
            data=json.dumps(call).encode(),
            headers={"Content-Type": "application/json", "Authorization": live.auth(name)},
        ) as r,
    ):
        text = await r.text()
        return r.status, json.loads(text) if text else None


def framework_info(name: str = "team-a", **more: Any) -> dict[str, Any]:
    # `role`, as older clients send it, beside a field we do not use
    return {"user": "", "name": name, "role": name, "principal": name,
            "labels": {"labels": []}, **more}  # fmt: skip


async def next_of(s: MesosScheduler, kind: str, timeout: float = 30.0) -> dict[str, Any]:
    """The next event of `kind` (HEARTBEATs and others on the way are passed over)."""
    async with asyncio.timeout(timeout):
        while True:
            event = await s.next_event()
            assert event, f"the stream ended before a {kind}"
            if event["type"] == kind:
                return dict(event.get(kind.lower(), event))


CLUSTER = "mesos"


PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("team-a", "framework"), ("team-b", "framework")]  # fmt: skip


@dataclass
class StreamRig:
    """A master with the Mesos HTTP APIs, a fake slave s0 (4 cpus) whose connection
    plays a slave forwarding its executors' messages, and team-a's credentials: the rig
    of the tests of what a scheduler stream that does not read holds."""

    master: Master
    slave: FakeSlave
    auth: str

    def stream(self, framework_id: str) -> SchedulerStream | None:
        assert self.master.http is not None
        [api] = [d for d in self.master.http.doors if isinstance(d, SchedulerApi)]
        return api.streams.get(framework_id)

    async def launch_with_executor(self, s: MesosScheduler, task_id: str) -> None:
        """Launch a task of 0.1 cpus with executor e1 on `s`'s next offer."""
        [offer] = (await next_of(s, "OFFERS"))["offers"][:1]
        cpu = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}}]
        task = {
            "name": "t",
            "task_id": {"value": task_id},
            "agent_id": offer["agent_id"],
            "resources": cpu,
            "executor": {
                "executor_id": {"value": "e1"},
                "command": {"value": "my-executor"},
                "resources": cpu,
            },
        }
        launch = {"type": "LAUNCH", "launch": {"task_infos": [task]}}
        status, _ = await s.call("ACCEPT", {"offer_ids": [offer["id"]], "operations": [launch]})
        assert status == 202

    async def executor_says(self, framework_id: str, data: bytes, times: int) -> None:
        """Executor e1 of `framework_id` on s0 sends `data` to its scheduler `times` times."""
        for _ in range(times):
            await self.slave.bus.publish(
                self.slave.to_master,
                FrameworkMessage(
                    framework_id=framework_id, slave_id="s0", executor_id="e1", data=data
                ),
            )

    async def answered(self, messages: int) -> None:
        """Wait until the master has handled or refused `messages` FrameworkMessages, then
        for 3 offer rounds more (a stream let go has gone by then)."""
        outcomes = self.master.messages.outcomes

        def answered() -> int:
            return sum(n for (kind, *_), n in outcomes.items() if kind == "FrameworkMessage")

        await eventually(lambda: answered() >= messages, timeout=30)
        target = self.master.offer_rounds.count + 3
        await eventually(lambda: self.master.offer_rounds.count >= target)


@contextlib.asynccontextmanager
async def stream_rig(tmp_path: Path) -> AsyncIterator[StreamRig]:
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics("mesos")
    async with contextlib.AsyncExitStack() as stack:
        master = await mesos_master(stack, store, broker, topics)
        slave_bus = await open_transport(stack, broker.connector("slave-0"), "s0")
        slave = FakeSlave(slave_bus, topics, "s0", Resources(cpus=4, mem=1024))
        await slave.register()
        await eventually(lambda: "s0" in master.books.slaves and bool(master.web_ui))
        secret = store.secret_file("team-a").read_text().strip()
        yield StreamRig(master, slave, basic("team-a", secret))
