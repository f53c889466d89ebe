"""Tasks a second through Mesos's v1 Scheduler HTTP API, beside the MQTT SDK, in one run
on the same cluster.

    python -m benchmarks.mesos_http [--seconds 10] [--slaves 10]

mosquitto with TLS and a credentials store, a master process, one process with 10
logical slaves (`--simulated-tasks`: tasks finish at once). First a framework on our SDK
(the bus) fills every offer with small tasks for `--seconds`; then a framework speaking
the HTTP API (benchmarks.mesos_client: JSON calls, the RecordIO stream, an ACKNOWLEDGE
call for every update, as a Mesos framework sends them) does the same; then HTTP and the
bus again, in that order. Prints each path's mean tasks completed a second, and whether
the HTTP path reaches half the bus's rate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import bounds, stop_cluster, table
from benchmarks.e2e import TASK, Flood
from benchmarks.mesos_client import MesosScheduler, basic
from cluster.local.secure import as_principal, provision
from cluster.local.view import wait_state
from cluster.testing.bytecode import keep_bytecode
from frameworks import SchedulerDriver
from protocol import mesos_json as mj
from protocol.tooling.brokers import BrokerURL, MosquittoBroker

PRINCIPALS = [("master", "master"), ("slaves", "slave"), ("bus", "framework"),
              ("http", "framework"), ("ops", "operator")]  # fmt: skip


class HttpFlood:
    """Fills every offer with TASK-sized `true` tasks; acknowledges every update."""

    def __init__(self, client: MesosScheduler) -> None:
        self.client = client
        self.finished: list[float] = []
        self.n = 0
        self.calls: set[asyncio.Task[Any]] = set()

    def _call(self, kind: str, body: dict[str, Any]) -> None:
        task = asyncio.create_task(self.client.call(kind, body))  # (as pymesos: not awaited)
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    async def run(self) -> None:
        async for event in self.client.events():
            if event["type"] == "OFFERS":
                for offer in event["offers"]["offers"]:
                    self._accept(offer)
            elif event["type"] == "UPDATE":
                status = event["update"]["status"]
                if status["state"] == "TASK_FINISHED":
                    self.finished.append(time.perf_counter())
                if "uuid" in status:
                    ack = {k: status[k] for k in ("agent_id", "task_id", "uuid")}
                    self._call("ACKNOWLEDGE", ack)

    def _accept(self, offer: dict[str, Any]) -> None:
        free, _ = mj.resources_and_values_from_mesos(offer["resources"])
        tasks = []
        while free.contains(TASK):
            free = free - TASK
            self.n += 1
            tasks.append({
                "name": "t", "task_id": {"value": f"http-{self.n}"},
                "agent_id": offer["agent_id"], "command": {"value": "true"},
                "resources": mj.resources_to_mesos(TASK),
            })  # fmt: skip
        launch = {"type": "LAUNCH", "launch": {"task_infos": tasks}}
        body = {"offer_ids": [offer["id"]], "operations": [launch],
                "filters": {"refuse_seconds": 0}}  # fmt: skip
        self._call("ACCEPT", body)


async def rate(finished: list[float], seconds: float) -> float:
    """Tasks finished a second over `seconds`, after a 2 s warm-up."""
    await asyncio.sleep(2)
    before, start = len(finished), time.perf_counter()
    await asyncio.sleep(seconds)
    return (len(finished) - before) / (time.perf_counter() - start)


async def run(seconds: float, slaves: int) -> tuple[float, float]:  # (bus, HTTP) means
    store = provision(Path(tempfile.mkdtemp(prefix="drfmesos-mesos-http-")), PRINCIPALS)
    broker = MosquittoBroker(auth=store.path, tls=True)
    await broker.start()
    url, cluster = broker.url, f"mesoshttp{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}

    def common(name: str) -> list[str]:
        return ["--broker", f"{url.scheme}://{name}@{url.host}:{url.port}",
                "--secret-file", str(store.secret_file(name)), "--ca", url.ca or "",
                "--cluster", cluster, "--log-level", "warning"]  # fmt: skip

    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "master", *common("master"),
            "--allocation-interval", "0.5", "--http", "127.0.0.1:0",
            "--principals", str(store.principals_file), env=env,
        ),
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "slave", *common("slaves"),
            "--count", str(slaves), "--simulated-tasks", "--resources", "cpus:4;mem:4096",
            "--work-dir", tempfile.mkdtemp(prefix="drfmesos-mesos-http-"), env=env,
        ),
    ]  # fmt: skip
    rates: dict[str, list[float]] = {"bus": [], "http": []}
    try:
        ops = as_principal(url, store, "ops")
        up = await wait_state(ops, cluster, lambda s: len(s.slaves) == slaves, timeout=60)
        # bus, HTTP, HTTP, bus: on a busy machine a run inherits what the slaves have not
        # yet done of the one before; in this order each path has the same share of that
        for path in ("bus", "http", "http", "bus"):
            secret = store.secret_file(path).read_text().strip()
            if path == "bus":
                rates[path].append(
                    await bus_rate(as_principal(url, store, "bus"), cluster, seconds)
                )
            else:
                rates[path].append(await http_rate(up.web_ui, basic("http", secret), seconds))
            await wait_state(ops, cluster, lambda s: not s.frameworks, timeout=60)
    finally:
        await stop_cluster(procs, broker)
    print("runs, in order: bus {:.0f}, HTTP {:.0f}, HTTP {:.0f}, bus {:.0f} tasks/s".format(
        rates["bus"][0], *rates["http"], rates["bus"][1]))  # fmt: skip
    return sum(rates["bus"]) / 2, sum(rates["http"]) / 2


async def bus_rate(broker: BrokerURL, cluster: str, seconds: float) -> float:
    """Our SDK's framework (the bus)."""
    flood = Flood("bus")
    driver = SchedulerDriver(flood, name="bus", broker=broker, cluster=cluster, role="bus")
    await driver.start()
    try:
        return await rate(flood.finished, seconds)
    finally:
        driver.stop()
        await driver.join()


async def http_rate(web: str, auth: str, seconds: float) -> float:
    """A framework on Mesos's scheduler API."""
    client = MesosScheduler(web, auth)
    info = {"user": "", "name": "http", "roles": ["http"], "principal": "http"}
    assert await client.subscribe(info) == 200
    http = HttpFlood(client)
    reader = asyncio.create_task(http.run())
    try:
        return await rate(http.finished, seconds)
    finally:
        await client.call("TEARDOWN")
        reader.cancel()
        await asyncio.gather(reader, *http.calls, return_exceptions=True)
        await client.close()


async def main(seconds: float, slaves: int) -> None:
    keep_bytecode()  # (the parties it starts: cluster.testing.bytecode)
    bus, http = await run(seconds, slaves)
    print(f"tasks/s: {slaves} simulated slaves, one framework at a time, {seconds:g}s each, "
          "auth + TLS, mosquitto")  # fmt: skip
    print(table(["path", "tasks/s"], [["MQTT bus (SDK)", f"{bus:,.0f}"],
                                       ["Mesos HTTP API", f"{http:,.0f}"]]))  # fmt: skip
    ratio = http / bus if bus else 0.0
    print(bounds([("HTTP / bus", f"{ratio:.2f}", ">= 0.50", ratio >= 0.5)]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--slaves", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.seconds, args.slaves))
