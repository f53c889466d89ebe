"""Taking a slave down for maintenance on a real secured cluster: mosquitto with TLS, a
master and slaves as processes, a framework through the SDK, the `drfmesos slaves`
command and Mesos's operator API over HTTP. The drained slave is offered to no one, its
task ends within the grace, and it is DRAINED -- with the master SIGKILLed and restarted
in the middle (its registry journal in its work dir), which changes none of that. Only an
operator principal may drain, deactivate or reactivate."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cluster.local.launcher import Launcher
from cluster.local.secure import as_principal
from cluster.local.view import wait_state
from frameworks import SchedulerDriver, build_task
from protocol.tooling.brokers import BrokerURL, MosquittoBroker
from protocol.tooling.credentials import Store
from protocol.wire.messages import KillPolicy, Reason, State, TaskState
from protocol.wire.resources import Resources

from conftest import need_mosquitto
from harness.helpers import Recorder, basic, secure_master

CLUSTER = "drain-e2e"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("slave-1", "slave"), ("printer", "framework")]  # fmt: skip
# a task that takes SIGTERM and carries on: only SIGKILL ends it
STUBBORN = "trap 'echo ignored' TERM; while :; do sleep 0.05; done"


@dataclass
class Live:
    broker: MosquittoBroker
    store: Store
    launcher: Launcher
    work: Path

    @property
    def url(self) -> BrokerURL:
        return self.broker.url

    def as_(self, name: str) -> BrokerURL:
        return as_principal(self.url, self.store, name)

    async def state(self, condition: Any, timeout: float = 30.0) -> State:
        return await wait_state(self.as_("ops"), CLUSTER, condition, timeout=timeout)

    async def master(self) -> None:
        await self.launcher.start(
            "master", "master", "--principals", str(self.store.principals_file),
            "--http", "127.0.0.1:0", "--allocation-interval", "0.1",
            "--work-dir", str(self.work / "master"), "--heartbeat-interval", "1",
        )  # fmt: skip

    async def slave(self, i: int) -> None:
        await self.launcher.start(
            "slave", f"slave-{i}", "--resources", "cpus:2;mem:1024",
            "--work-dir", str(self.work / f"slave-{i}"),
        )  # fmt: skip

    async def drfmesos(self, *args: str, principal: str = "ops") -> tuple[int, str]:
        """`drfmesos slaves ...` as `principal`, as an operator runs it."""
        url = self.url
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", *args[:2],
            "--broker", f"{url.scheme}://{principal}@{url.host}:{url.port}",
            "--secret-file", str(self.store.secret_file(principal)), "--ca", url.ca or "",
            "--cluster", CLUSTER, *args[2:],
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await proc.communicate()
        return proc.returncode or 0, out.decode()

    async def api(self, web: str, body: dict[str, Any], principal: str = "ops") -> tuple[int, Any]:
        auth = basic(principal, self.store.secret_file(principal).read_text().strip())
        async with (
            aiohttp.ClientSession() as session,
            session.post(web + "api/v1", json=body, headers={"Authorization": auth}) as r,
        ):
            text = await r.text()
            return r.status, (await r.json()) if text else None


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[Live]:
    need_mosquitto()
    async with secure_master(tmp_path, CLUSTER, PRINCIPALS) as (broker, store, launcher):
        # (secure_master's own master has no work dir: this cluster's survives a restart)
        await launcher.stop(launcher.parties.pop())
        live = Live(broker, store, launcher, tmp_path)
        await live.master()
        yield live


@contextlib.asynccontextmanager
async def framework(live: Live) -> AsyncIterator[tuple[Recorder, SchedulerDriver]]:
    rec = Recorder()
    driver = SchedulerDriver(
        rec, name="printer", broker=live.as_("printer"), cluster=CLUSTER, role="printer",
        failover_timeout=120,
    )  # fmt: skip
    await driver.start()
    try:
        yield rec, driver
    finally:
        await driver.stop()


def slave_state(state: State, slave_id: str) -> str | None:
    return next((s.maintenance for s in state.slaves if s.slave_id == slave_id), "gone")


async def test_a_slave_drained_across_a_master_failover(live: Live) -> None:
    await live.slave(0)
    first = await live.state(lambda s: len(s.slaves) == 1)
    [drained] = [s.slave_id for s in first.slaves]
    async with framework(live) as (rec, driver):
        await rec.wait(lambda: any(o.slave_id == drained for o in rec.offers))
        offer = next(o for o in rec.offers if o.slave_id == drained)
        task = build_task(
            offer, "stubborn", Resources(cpus=0.5, mem=64), command=STUBBORN, task_id="stubborn"
        ).model_copy(update={"kill_policy": KillPolicy(grace_period=4)})
        await driver.launch_tasks([offer.offer_id], [task])
        await rec.update("stubborn", TaskState.RUNNING, timeout=30)
        await live.slave(1)
        await live.state(lambda s: len(s.slaves) == 2)

        # drfmesos slaves drain: the task's own 4 s grace (the drain allows 30)
        sent = time.time()
        code, said = await live.drfmesos("slaves", "drain", drained, "--grace-period", "30")
        assert code == 0, said
        assert f"slave {drained} draining" in said
        offers_then = len(rec.offers)
        await live.state(lambda s: slave_state(s, drained) == "draining", timeout=10)

        # the master is SIGKILLed mid-grace, and a new one starts on its work dir
        [master] = [p for p in live.launcher.parties if p.kind == "master"]
        master.proc.kill()
        await master.proc.wait()
        await live.master()
        after = await live.state(lambda s: s.master_id != first.master_id, timeout=30)
        killed = await rec.update("stubborn", TaskState.KILLED, timeout=30)
        assert killed.reason == Reason.SLAVE_DRAINING
        assert 4.0 <= killed.timestamp - sent < 15.0  # its grace, the failover's none more
        await live.state(lambda s: slave_state(s, drained) == "drained", timeout=30)
        code, said = await live.drfmesos("state")
        assert code == 0, said
        # (its row in the slaves' table says so)
        assert any(drained in row and "drained" in row for row in said.splitlines()), said
        # no offer of the drained slave since the drain, from either master
        assert not [o for o in rec.offers[offers_then:] if o.slave_id == drained]
        web = (await live.state(lambda s: bool(s.web_ui))).web_ui

        # only an operator principal may reactivate it (or drain, or deactivate)
        agent = {"agent_id": {"value": drained}}
        for kind in ("REACTIVATE_AGENT", "DEACTIVATE_AGENT", "DRAIN_AGENT"):
            call = {"type": kind, kind.lower(): agent}
            status, body = await live.api(web, call, principal="printer")
            assert status == 403, (kind, body)
        status, body = await live.api(web, {"type": "GET_AGENTS"})
        [agent_json] = [a for a in body["get_agents"]["agents"]
                        if a["agent_info"]["id"]["value"] == drained]  # fmt: skip
        assert agent_json["deactivated"] is True
        assert agent_json["drain_info"] == {
            "state": "DRAINED",
            "config": {"mark_gone": False, "max_grace_period": {"nanoseconds": 30 * 10**9}},
        }
        # the operator reactivates it: it is offered again
        status, body = await live.api(web, {"type": "REACTIVATE_AGENT", "reactivate_agent": agent})
        assert status == 200, body
        await driver.revive_offers()
        await rec.wait(lambda: any(o.slave_id == drained for o in rec.offers[offers_then:]))
        assert after.epoch > first.epoch
    # (a framework principal's command is refused by the broker: not an operator topic)
    code, said = await live.drfmesos("slaves", "deactivate", drained, principal="printer")
    assert code != 0
    assert "takes an operator principal" in said, said
    state = await live.state(lambda s: len(s.slaves) == 2)
    assert slave_state(state, drained) is None
