"""Seeing a master fall behind: its inbound backlog, its message counters, the slaves'
comings and goings and their last heartbeats, from /metrics, /health and /api/v1/slaves
(a master on a real broker, spoken to by bare protocol messages)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from master.ha.registry import MemoryStore, Registry
from master.http.config import HttpConfig, address_of
from master.http.models import Health, Slaves
from master.http.openapi import openapi
from master.master import Master, MasterConfig
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus, Dispatcher
from protocol.wire.messages import (
    Gone,
    Heartbeat,
    MarkSlaveGone,
    Register,
    Reregister,
    Subscribe,
    Suppress,
    Wire,
)
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import FAST, T, encode_raw

N = 5
WATCHED = dataclasses.replace(FAST, http=HttpConfig(port=0, max_backlog_age=0.5))


async def get(master: Master, path: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(master.web_ui + path.lstrip("/")) as r,
    ):
        text = await r.text()
        return r.status, json.loads(text) if r.content_type == "application/json" else text


async def metrics(master: Master) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, sorted labels) -> value."""
    status, text = await get(master, "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
           **labels: str) -> float:  # fmt: skip
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class Slaves_:
    """Many logical slaves of the `slave` principal, on one connection."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.to_master = T.inbound("slave", "slave")

    async def send(self, *messages: Wire) -> None:
        await asyncio.gather(*(self.bus.publish(self.to_master, m) for m in messages))

    def register(self, slave_id: str, incarnation: str = "i0") -> Register:
        return Register(
            slave_id=slave_id,
            hostname=f"{slave_id}.local",
            resources=Resources(cpus=1, mem=64),
            incarnation=incarnation,
        )

    def reregister(self, slave_id: str) -> Reregister:
        return Reregister(**self.register(slave_id, "i1").model_dump())


@contextlib.asynccontextmanager
async def watched(
    broker: MosquittoBroker, config: MasterConfig = WATCHED, registry: Registry | None = None
) -> AsyncIterator[tuple[Master, Slaves_]]:
    async with (
        Bus(broker.url, name="master") as master_bus,
        Bus(broker.url, name="slaves") as slave_bus,
    ):
        master = Master(master_bus, T, config, registry=registry)
        await master.start()
        try:
            yield master, Slaves_(slave_bus)
        finally:
            await master.stop()


async def test_n_messages_of_each_kind_read_back_n_from_metrics_by_outcome(
    mosquitto: MosquittoBroker,
) -> None:
    async with watched(mosquitto) as (master, slaves):
        ids = [f"w{i}" for i in range(N)]
        await slaves.send(*(slaves.register(s) for s in ids))
        await eventually(lambda: len(master.books.slaves) == N)
        await slaves.send(*(Heartbeat(source=s) for s in ids))  # handled
        await slaves.send(*(Heartbeat(source=f"nobody{i}") for i in range(N)))  # unknown
        await slaves.send(*(Subscribe(name="x", inbox="x") for _ in range(N)))  # not a slave's call
        for _ in range(N):  # a Register the master cannot read
            await slaves.bus.publish_raw(slaves.to_master, encode_raw("Register", "", {"x": 1}))
        for _ in range(N):  # a framework's call, naming no framework of its own
            await slaves.bus.publish(T.inbound("framework", "fw"), Suppress(framework_id="no"))
        await eventually(lambda: sum(master.messages.outcomes.values()) == 6 * N)

        m = await metrics(master)
        received = "drfmesos_messages_received_total"
        assert sample(m, received, type="Register") == 2 * N
        assert sample(m, received, type="Heartbeat") == 2 * N
        assert sample(m, received, type="Subscribe") == N
        outcome = "drfmesos_messages_total"
        assert sample(m, outcome, type="Register", outcome="handled", code="") == N
        assert sample(m, outcome, type="Register", outcome="refused", code="invalid") == N
        assert sample(m, outcome, type="Heartbeat", outcome="handled", code="") == N
        assert sample(m, outcome, type="Heartbeat", outcome="refused", code="unknown-slave") == N
        assert sample(m, outcome, type="Subscribe", outcome="refused", code="forbidden") == N
        assert sample(m, received, type="Suppress") == N
        refused = {("type", "Suppress"), ("outcome", "refused")}
        suppress = [
            v for (name, labels), v in m.items() if name == outcome and refused <= set(labels)
        ]
        assert suppress == [N]  # refused, with one code
        # the bus counter sees what the master reads itself (it read 0 before)
        assert sample(m, "drfmesos_bus_messages_total", direction="in") == 6 * N
        assert sample(m, "drfmesos_slave_registrations_total") == N
        assert sample(m, "drfmesos_slaves_connected") == N
        assert sample(m, "drfmesos_elected") == 1


async def test_registrations_disconnects_and_removals_are_counted_by_cause(
    mosquitto: MosquittoBroker,
) -> None:
    config = dataclasses.replace(WATCHED, slave_timeout=1.0)
    async with watched(mosquitto, config) as (master, slaves):
        await slaves.send(slaves.register("a", "inc-a"), slaves.register("b"), slaves.register("c"))
        await eventually(lambda: len(master.books.slaves) == 3)
        await slaves.send(slaves.reregister("c"))
        await slaves.bus.publish(T.gone("slave", "slave"), Gone(kind="slave", id="a",
                                                                incarnation="inc-a"))  # fmt: skip
        await eventually(lambda: not master.books.slaves["a"].connected)
        m = await metrics(master)
        assert sample(m, "drfmesos_slaves_connected") == 2
        assert sample(m, "drfmesos_slaves_disconnected") == 1
        assert sample(m, "drfmesos_slave_disconnects_total") == 1
        assert sample(m, "drfmesos_slave_reregistrations_total") == 1
        await slaves.bus.publish(T.inbound("operator", "ops"), MarkSlaveGone(slave_id="b"))
        # nobody heartbeats: a and c are removed past the slave timeout
        await eventually(lambda: not master.books.slaves)
        m = await metrics(master)
        assert sample(m, "drfmesos_slave_registrations_total") == 3
        assert sample(m, "drfmesos_slave_removals_total", cause="operator") == 1
        assert sample(m, "drfmesos_slave_removals_total", cause="unreachable") == 2
        assert sample(m, "drfmesos_slaves_connected") == 0


async def test_a_failovers_recovery_counts_the_slaves_expected_back_and_removed(
    mosquitto: MosquittoBroker,
) -> None:
    store = MemoryStore()
    async with watched(mosquitto, registry=Registry(store)) as (first, slaves):
        await slaves.send(slaves.register("r1"), slaves.register("r2"))
        await eventually(lambda: len(first.books.slaves) == 2)
        await eventually(lambda: len(first.registry.slaves) == 2)
    registry = Registry(store)
    await registry.load()
    config = dataclasses.replace(WATCHED, slave_reregister_timeout=1.0)
    async with watched(mosquitto, config, registry) as (second, slaves):
        m = await metrics(second)
        assert sample(m, "drfmesos_recovery_slaves", state="expected") == 2
        assert sample(m, "drfmesos_recovery_slaves", state="waiting") == 2
        await slaves.send(slaves.reregister("r1"))
        await eventually(lambda: not second.books.recovering)
        m = await metrics(second)
        assert sample(m, "drfmesos_recovery_slaves", state="back") == 1
        assert sample(m, "drfmesos_recovery_slaves", state="removed") == 1
        assert sample(m, "drfmesos_recovery_slaves", state="waiting") == 0
        assert sample(m, "drfmesos_slave_removals_total", cause="recovery") == 1
        assert sample(m, "drfmesos_slave_reregistrations_total") == 1


async def test_the_slaves_last_heartbeats_and_connections_sorted_late_first(
    mosquitto: MosquittoBroker,
) -> None:
    async with watched(mosquitto) as (master, slaves):
        await slaves.send(*(slaves.register(s) for s in ("s0", "s1", "s2")))
        await eventually(lambda: len(master.books.slaves) == 3)
        before = time.time()
        await slaves.send(Heartbeat(source="s2"), Heartbeat(source="s0"))
        await eventually(lambda: all(master.books.slaves[s].last_seen > master.books.slaves["s1"]
                                     .last_seen for s in ("s0", "s2")))  # fmt: skip
        status, body = await get(master, "/api/v1/slaves?sort=last_heartbeat")
        assert status == 200
        page = Slaves.model_validate(body).slaves
        assert page[0].slave_id == "s1"  # the one not heard from since it registered
        assert page[0].last_heartbeat is not None
        assert page[0].last_heartbeat <= before
        assert all(v.connected for v in page)
        assert all(v.last_heartbeat and v.last_heartbeat >= before for v in page[1:])
        _, body = await get(master, "/api/v1/slaves?sort=-last_heartbeat")
        assert Slaves.model_validate(body).slaves[-1].slave_id == "s1"
        status, body = await get(master, "/api/v1/slaves?sort=hostname")
        assert status == 400
        assert "last_heartbeat" in body["error"]
        params = openapi()["paths"]["/api/v1/slaves"]["get"]["parameters"]
        assert "-last_heartbeat" in next(p for p in params if p["name"] == "sort")["schema"]["enum"]


@pytest.mark.timing  # a backlog timed against a 1.5 s slave timeout, on the wall clock
async def test_a_master_behind_shows_it_and_removes_no_slave_whose_heartbeat_it_holds(
    mosquitto: MosquittoBroker,
) -> None:
    """Heartbeats from many logical slaves, each handled slowly (a master whose loop is
    overloaded), for twice the slave timeout: the probe's wait and /health say `behind`;
    no live slave is removed for the heartbeats waiting in the master's own backlog
    (its silence is counted from what the master could have read, as Mesos's ping
    timeout); a dead slave is still removed once the master has caught up."""
    config = dataclasses.replace(WATCHED, slave_timeout=1.5)
    async with watched(mosquitto, config) as (master, slaves):
        ids = [f"f{i:03}" for i in range(150)]
        dead = [f"dead{i}" for i in range(5)]
        await slaves.send(*(slaves.register(s) for s in ids + dead))
        await eventually(lambda: len(master.books.slaves) == len(ids) + len(dead))
        await eventually(lambda: master.lag.returned > 0)  # the probe is back: it works
        await slaves.send(*(Heartbeat(source=s) for s in ids + dead))  # every slave heard from
        await eventually(lambda: master.messages.received["Heartbeat"] == len(ids) + len(dead))
        _, health = await get(master, "/health")
        assert Health.model_validate(health).status == "ok"

        heartbeat = master.routes["slave"][Heartbeat]
        handled = 0  # of the burst below, and after it
        live_when_drained: set[str] = set()

        async def beat_on() -> None:  # the live slaves' next rounds, as real slaves send
            while True:
                await slaves.send(*(Heartbeat(source=s) for s in ids))
                await asyncio.sleep(0.5)

        beating: list[asyncio.Task[None]] = []

        async def slow_heartbeat(msg: Any, caller: Any) -> None:
            nonlocal handled
            if handled < len(ids):  # the burst: the overloaded master, on purpose
                time.sleep(0.04)  # noqa: ASYNC251
            handled += 1
            await heartbeat(msg, caller)
            if handled == len(ids):  # the burst drained: which live slaves are still listed
                live_when_drained.update(s for s in ids if s in master.books.slaves)

        master.routes["slave"][Heartbeat] = slow_heartbeat
        worst, latest = 0.0, 0.0  # the oldest wait; the longest a listed slave was unheard
        said_behind: list[Health] = []

        async def watch() -> None:
            """What an operator polling /health and the late slaves would have seen."""
            nonlocal worst, latest
            while True:
                worst = max(worst, master.backlog().oldest_wait)
                _, body = await get(master, "/health")
                seen = Health.model_validate(body)
                if seen.status == "behind":
                    said_behind.append(seen)
                _, body = await get(master, "/api/v1/slaves?sort=last_heartbeat&limit=1")
                for view in Slaves.model_validate(body).slaves:
                    if view.slave_id not in dead:
                        latest = max(latest, time.time() - (view.last_heartbeat or time.time()))
                await asyncio.sleep(0.1)

        try:  # (the live slaves beat on until the dead ones are gone, whatever fails)
            watcher = asyncio.create_task(watch())
            try:
                # 150 heartbeats at 40 ms each: 6 s of work, and a 1.5 s timeout. The later
                # ones wait past the timeout in the master's backlog; the dead slaves send none.
                await slaves.send(*(Heartbeat(source=s) for s in ids))
                # the live slaves heartbeat on meanwhile, as real ones do: their rounds queue
                # behind the burst, and are handled at full speed once it is
                beating.append(asyncio.create_task(beat_on()))
                await eventually(lambda: handled >= 2 * len(ids), timeout=30)  # a round after
                assert said_behind, "health never said behind"
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            assert worst > 1.5, "the backlog never outgrew the slave timeout: it shows nothing"
            first = said_behind[0]  # its waits, past the limit (rounded to the millisecond)
            assert first.max_backlog_age == 0.5
            assert max(first.oldest_wait_seconds, first.last_wait_seconds) >= first.max_backlog_age
            # a live slave whose heartbeat waited in the backlog was unheard past the timeout,
            # and is still there
            assert latest > 1.5
            assert live_when_drained == set(ids)
            m = await metrics(master)
            late = sample(m, "drfmesos_messages_total", type="Heartbeat", outcome="refused",
                          code="unknown-slave")  # fmt: skip
            assert late == 0
            # caught up: the dead ones are removed, the live ones (heartbeating on) stay
            await eventually(lambda: not any(s in master.books.slaves for s in dead), timeout=15)
        finally:
            for task in beating:
                task.cancel()
            await asyncio.gather(*beating, return_exceptions=True)
        m = await metrics(master)
        removed = sample(m, "drfmesos_slave_removals_total", cause="unreachable")
        assert removed == len(dead)
        assert all(s in master.books.slaves for s in ids)
        assert sample(m, "drfmesos_slaves_connected") == len(ids)
        print(
            f"\nflooded: oldest wait up to {worst:.2f} s against a 1.5 s timeout, /health "
            f"behind {len(said_behind)} times, a live slave unheard up to {latest:.2f} s: "
            f"0 of {len(ids)} live removed, {removed:g} of {len(dead)} dead removed"
        )


async def test_health_is_ok_without_a_threshold(mosquitto: MosquittoBroker) -> None:
    config = dataclasses.replace(WATCHED, http=HttpConfig(port=0, max_backlog_age=None))
    async with watched(mosquitto, config) as (master, _):
        _, body = await get(master, "/health")
        health = Health.model_validate(body)
        assert health.status == "ok"
        assert health.elected
        assert health.leader == address_of(master.web_ui)  # HOST:PORT, as a standby says it
        assert not (health.leader or "http").startswith("http")


async def test_a_partys_bus_counts_its_messages_by_type_and_outcome(
    mosquitto: MosquittoBroker,
) -> None:
    """What a slave or a framework driver is given is counted as the master's calls are."""
    inbox = T.slave("slave", "counted")
    async with (
        Bus(mosquitto.url, name="party", inbox=inbox) as bus,
        Bus(mosquitto.url, name="sender") as sender,
    ):
        dispatch = Dispatcher(bus, "slave")

        async def on_heartbeat(message: Heartbeat, reply_to: str | None) -> None:
            pass

        dispatch.on(Heartbeat, on_heartbeat)
        await bus.subscribe(inbox, dispatch)
        for _ in range(N):
            await sender.publish(inbox, Heartbeat(source="m"))
            await sender.publish(inbox, Subscribe(name="x", inbox="x"))  # not a slave's
            await sender.publish_raw(inbox, encode_raw("Heartbeat", "", {"source": 1}))
        await eventually(lambda: sum(bus.messages.outcomes.values()) == 3 * N)
        assert bus.messages.received == {"Heartbeat": 2 * N, "Subscribe": N}
        assert bus.messages.outcomes == {
            ("Heartbeat", "handled", ""): N,
            ("Heartbeat", "refused", "invalid"): N,
            ("Subscribe", "refused", "unexpected-type"): N,
        }
