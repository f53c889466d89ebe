"""A tenant floods the master while another runs the e2e workload: the master's default
rate limits must keep the flood from costing the other more than a fifth of its rate
beside a process as busy as the flooder's (issue 51's bound: the flooder's own process
costs the other its share of the machine's cores, flood or not), and the flooder must
lose nothing it was owed.

    python -m benchmarks.flood [--seconds 10] [--slaves 10]

A secure cluster as `benchmarks.e2e` runs it (mosquitto with TLS, a master with its
defaults, 10 simulated slaves). Tenant A fills every offer with small tasks (e2e's
workload) for three phases of `--seconds`: alone, with the flood, alone again (its rate
without the flood is the mean of the two, measured in the same run on a machine whose
speed drifts), then a fourth, the control: beside a process as busy as F was that sends
nothing (what F's own process costs A on a shared machine, flood or not); each process's
CPU in each phase is printed. The flooder, principal F in a process of its own, is a
framework too: it launches 20 tasks on its first offers, declines the rest, and, as fast
as its process can send them, reconciles its tasks and declares its demand. Owed to it: an update
ending every task it launched (FINISHED, or LOST with REASON_RATE_LIMITED for a launch
its limit refused), and, after it stops, no offer of its left outstanding.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    bounds,
    cpu_seconds,
    held_by_limits,
    machine_busy,
    stop_cluster,
    table,
)
from benchmarks.e2e import Flood
from cluster.local.secure import as_principal, provision
from cluster.local.view import wait_state
from cluster.testing.bytecode import keep_bytecode
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
from frameworks.scheduler import Driver
from protocol import logs
from protocol.tooling.brokers import BrokerURL, MosquittoBroker
from protocol.transport.aio import within
from protocol.wire.messages import Reason

PRINCIPALS = [("master", "master"), ("slaves", "slave"), ("A", "framework"),
              ("F", "framework"), ("ops", "operator")]  # fmt: skip
TASK = Resources(cpus=0.1, mem=16)


class Flooder(Scheduler):
    """A framework with a few tasks of its own that floods the master with calls about
    them: reconciliations and declarations of demand, as fast as its process can send."""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.launched: set[str] = set()
        self.ended: dict[str, TaskStatus] = {}
        self.errors = 0
        self.sent = 0
        self.settled = asyncio.Event()  # every task launched has ended and been told

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            if len(self.launched) >= self.tasks or not offer.resources.contains(TASK):
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=3600))
                continue
            n = len(self.launched) + 1
            task = build_task(offer, "f", TASK, command="true", task_id=f"f-{n}")
            await driver.launch_tasks([offer.offer_id], [task], Filters(refuse_seconds=0))
            self.launched.add(task.task_id)

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if status.state.terminal:
            self.ended[status.task_id] = status
            if len(self.ended) >= len(self.launched):
                self.settled.set()

    async def error(self, driver: Driver, message: str) -> None:
        self.errors += 1

    async def flood(self, driver: SchedulerDriver, until: asyncio.Event) -> None:
        """200 calls a turn of the loop (they leave as one MQTT message), until told."""
        demand = [(TASK, 1)]
        while not until.is_set():
            asked = sorted(self.launched)[:5]
            for _ in range(100):
                await driver.reconcile_tasks(asked)
                await driver.request_resources(demand)
            self.sent += 200
            await asyncio.sleep(0)


async def flooder(url: BrokerURL, cluster: str, seconds: float) -> None:
    """The flooder's process: launch its tasks, flood for `seconds`, then say what it was
    owed and got."""
    f = Flooder(tasks=20)
    driver = SchedulerDriver(f, name="F", broker=url, cluster=cluster, role="F")
    await driver.start()
    print("ready", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    await f.flood(driver, stop)
    await driver.suppress_offers()  # (what it launched is what it is owed)
    waited = time.monotonic()
    if len(f.ended) < len(f.launched):
        f.settled.clear()
        with contextlib.suppress(TimeoutError):
            await within(f.settled.wait(), 60)
    waited = time.monotonic() - waited
    lost = [s for s in f.ended.values() if s.state == TaskState.LOST]
    report = {
        "sent": f.sent,
        "launched": len(f.launched),
        "ended": len(f.ended),
        "finished": sum(s.state == TaskState.FINISHED for s in f.ended.values()),
        "lost_rate_limited": sum(s.reason == Reason.RATE_LIMITED for s in lost),
        "errors": f.errors,
        "waited_s": round(waited, 1),
        "missing": sorted(f.launched - set(f.ended)),
    }
    driver.stop()
    await driver.join()
    print(json.dumps(report), flush=True)


Pids = dict[str, int | None]


async def rate(floods: list[Flood], seconds: float, pids: Pids) -> tuple[float, dict[str, float]]:
    """A's tasks a second over a window of `seconds`, and each process's share of a core
    meanwhile (`others`: the rest of the machine's)."""
    before = sum(len(f.finished) for f in floods)
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    busy = machine_busy()
    started = time.perf_counter()
    await asyncio.sleep(seconds)  # the measurement's own window, not a wait for a condition
    took = time.perf_counter() - started
    done = sum(len(f.finished) for f in floods) - before
    used = {name: (cpu_seconds(pid) - cpu[name]) / took for name, pid in pids.items()}
    used["others"] = max(0.0, (machine_busy() - busy) / took - sum(used.values()))
    return done / took, used


def burn(share: float, seconds: float) -> None:
    """The control's process: busy for `share` of a core (at most: as much as it gets) for
    `seconds`, sending nothing; what the flooder's own process costs the others on a
    shared machine, without the flood."""
    started, cpu = time.monotonic(), time.process_time()
    while (now := time.monotonic()) < started + seconds:
        if time.process_time() - cpu < share * (now - started):
            sum(range(10_000))  # (a fraction of a millisecond of work)
        else:
            time.sleep(0.001)  # (a process of its own: no event loop to block)


async def main(seconds: float, slaves: int, nice: int, master_args: list[str]) -> None:
    keep_bytecode()  # (the parties it starts: cluster.testing.bytecode)
    scratch = Path(tempfile.mkdtemp(prefix="drfmesos-flood-"))  # (removed at the end)
    store = provision(scratch / "auth", PRINCIPALS)
    broker = MosquittoBroker(auth=store.path, tls=True)
    await broker.start()
    url, cluster = broker.url, f"flood{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}

    def args(name: str) -> list[str]:
        return ["--broker", f"{url.scheme}://{name}@{url.host}:{url.port}",
                "--secret-file", str(store.secret_file(name)), "--ca", url.ca or "",
                "--cluster", cluster, "--log-level", "warning"]  # fmt: skip

    master = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "master", *args("master"),
        "--allocation-interval", "0.5", "--http", "127.0.0.1:0",
        "--principals", str(store.principals_file), *master_args, env=env)  # fmt: skip
    slave = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "slave", *args("slaves"), "--count", str(slaves),
        "--simulated-tasks", "--resources", "cpus:4;mem:4096",
        "--work-dir", str(scratch / "work"), env=env)  # fmt: skip
    ops = as_principal(url, store, "ops")
    try:
        up = await wait_state(ops, cluster, lambda s: s.slaves_registered == slaves, timeout=60)
        a = Flood("A")
        driver = SchedulerDriver(a, name="A", broker=as_principal(url, store, "A"),
                                 cluster=cluster, role="A")  # fmt: skip
        await driver.start()
        await asyncio.sleep(2)  # warm up
        pids: Pids = {"master": master.pid, "slaves": slave.pid, "A": os.getpid(),
                      "F": None, "mosquitto": broker.pid}  # fmt: skip
        alone, cpu_alone = await rate([a], seconds, pids)
        f_url = f"{url.scheme}://F@{url.host}:{url.port}"  # (the secret in a file, not argv)
        niced = ["nice", "-n", str(nice)] if nice else []
        flood = await asyncio.create_subprocess_exec(
            *niced, sys.executable, "-m", "benchmarks.flood", "--flooder", f_url,
            "--ca", url.ca or "", "--secret-file", str(store.secret_file("F")),
            "--cluster", cluster, "--seconds", str(seconds + 1),
            stdout=asyncio.subprocess.PIPE, env=env)  # fmt: skip
        assert flood.stdout is not None
        await flood.stdout.readline()  # ready
        await asyncio.sleep(0.5)  # the flood under way
        flooded, cpu_flood = await rate([a], seconds, {**pids, "F": flood.pid})
        out, _ = await flood.communicate()
        owed = json.loads(out.decode().strip().splitlines()[-1])
        again, cpu_again = await rate([a], seconds, pids)
        # the control: a process as busy as F was, sending nothing (nothing to the master)
        burner = await asyncio.create_subprocess_exec(
            *niced, sys.executable, "-m", "benchmarks.flood", "--burn", str(cpu_flood["F"]),
            "--seconds", str(seconds + 1), env=env)  # fmt: skip
        await asyncio.sleep(0.5)  # (busy from its start: nothing to wait for)
        busy, cpu_busy = await rate([a], seconds, {**pids, "F": burner.pid})
        await burner.wait()
        driver.stop()
        await driver.join()
        held = await asyncio.to_thread(held_by_limits, up.web_ui, "ops", store.secret_file("ops"))
        end = await wait_state(ops, cluster, lambda s: not s.offers, timeout=30)
    finally:
        await stop_cluster([master, slave], broker)
        shutil.rmtree(scratch, ignore_errors=True)
    base = (alone + again) / 2
    print(f"flood: {slaves} simulated slaves, A's e2e workload, F flooding, {seconds:g}s phases")
    print(f"A tasks/s: alone {alone:,.0f}, with the flood {flooded:,.0f}, alone again {again:,.0f}")
    print(f"F (nice {nice}) sent {owed['sent'] / (seconds + 1):,.0f} calls/s; {json.dumps(owed)}")
    beyond = f", and {' '.join(master_args)}" if master_args else ""
    print(f"the master's rate limits (its defaults{beyond}): {held}")
    print(
        f"A tasks/s beside a process as busy as F ({cpu_busy['F']:.0%} of a core), sending"
        f" nothing: {busy:,.0f}, {busy / base:.2f} of its rate alone: what F's own process"
        " costs A on this machine, flood or not (not a bound)"
    )
    print(
        f"A tasks/s with the flood / without: {flooded / base:.2f}: the flood's cost through"
        " the broker and the master, and its process's on the machine (not a bound: the"
        " control's share is the machine's)"
    )
    phases = {"alone": cpu_alone, "flood": cpu_flood, "again": cpu_again, "busy": cpu_busy}
    names = [*pids, "others"]
    rows = [[phase, *(f"{used[n]:.0%}" for n in names), f"{sum(used.values()):.0%}"]
            for phase, used in phases.items()]  # fmt: skip
    print("each process's CPU, % of one core (2 cores: 200%; F in `busy`: the control's):")
    print(table(["phase", *names, "all"], rows))
    ok_owed = owed["ended"] == owed["launched"] and not end.offers
    f_held, a_held = held.by_principal.get("F", (0, 0, 0)), held.by_principal.get("A", (0, 0, 0))
    print(
        bounds(
            [
                # (issue 51: beside a process as busy as F, so that what F's own process
                # costs A on a small machine is not charged to the master's limits)
                ("A's tasks/s with the flood / beside a process as busy",
                 f"{flooded / busy:.2f}", ">= 0.80", flooded / busy >= 0.8),
                ("F's calls throttled / refused", f"{f_held[1]:,} / {f_held[2]:,}", "> 0",
                 sum(f_held[1:]) > 0),
                ("F's tasks ended and told / launched; offers left", f"{owed['ended']} / "
                 f"{owed['launched']}; {len(end.offers)}", "all; 0", ok_owed),
                ("A's calls throttled / refused", f"{a_held[1]:,} / {a_held[2]:,}", "0 / 0",
                 sum(a_held[1:]) == 0),
            ]
        )
    )  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--slaves", type=int, default=10)
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run the flooder at this niceness: on a shared host, a tenant on a machine "
        "of its own (it still sends as fast as its CPU lets it)",
    )
    parser.add_argument(
        "--master-arg",
        action="append",
        default=[],
        help="an option for the master beyond its defaults (--master-arg=--rate-limit=100)",
    )
    parser.add_argument("--flooder", help=argparse.SUPPRESS)  # the flooder's own process
    parser.add_argument("--burn", type=float, help=argparse.SUPPRESS)  # the control's process
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--secret-file", help=argparse.SUPPRESS)
    parser.add_argument("--cluster", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logs.configure("warning")
    if args.burn is not None:
        burn(args.burn, args.seconds)
    elif args.flooder:
        url = BrokerURL.parse(args.flooder, ca=args.ca, secret_file=args.secret_file)
        asyncio.run(flooder(url, args.cluster, args.seconds))
    else:
        asyncio.run(main(args.seconds, args.slaves, args.nice, args.master_arg))
