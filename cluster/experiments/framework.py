"""A framework that plays one framework of an experiment spec on a live cluster.

It follows the spec exactly as the simulator does (`cluster.workload.Workload`): the
same demand, task sizes and size changes, jobs and traces, in spec time scaled by
`time_scale`. Its tasks carry their (scaled) duration in their data, so simulated slaves
run them as sleeps. At the end it writes its statistics (tasks completed, waits, job
times) as JSON for the experiment's summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import click

from cluster.experiments.spec import Framework, Spec, load_spec
from cluster.experiments.workload import Pending, Workload
from frameworks.calls import ENDLESS
from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler, build_task
from protocol import logs
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import broker_option, cluster_option, log_level_option, run_party
from protocol.wire.messages import Filters, Offer, Reason, TaskStatus


class ExperimentScheduler(Scheduler):
    def __init__(self, spec: Spec, framework: Framework, t0: float, time_scale: float) -> None:
        self.spec = spec
        self.framework = framework
        self.t0 = t0
        self.scale = time_scale
        self.workload = Workload(framework, spec.run.seed)
        self.tasks: dict[str, Pending] = {}
        self.n = 0
        self.log = logs.get("experiment-framework", framework=framework.name)

    def now(self) -> float:
        """Spec time: seconds since the run started, unscaled."""
        return (time.time() - self.t0) / self.scale

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        await self.declare(driver)

    async def reregistered(self, driver: Driver, master_id: str) -> None:
        await self.declare(driver)

    async def declare(self, driver: Driver) -> None:
        """Tell the master what the workload still wants (it counts launches off)."""
        await driver.request_resources(self.workload.demand(self.now(), ENDLESS))

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        t = self.now()
        refuse = Filters(refuse_seconds=self.spec.master.refuse_seconds * self.scale)
        for offer in offers:
            pending = self.workload.take(t, offer.resources)
            if not pending:
                await driver.decline_offer(offer.offer_id, refuse)
                continue
            tasks = []
            for p in pending:
                self.n += 1
                task_id = f"{self.framework.name}-{self.n}"
                self.tasks[task_id] = p
                seconds = round(p.duration * self.scale, 4)
                data = json.dumps({"duration": seconds}).encode()
                tasks.append(
                    build_task(
                        offer,
                        self.framework.name,
                        p.resources,
                        command=work(seconds, self.framework.spin),
                        data=data,
                        task_id=task_id,
                    )
                )
            await driver.launch_tasks([offer.offer_id], tasks, refuse)

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if not status.state.terminal:
            return
        pending = self.tasks.pop(status.task_id, None)
        if pending is not None:
            completed = status.state.value == "TASK_FINISHED"
            preempted = status.reason == Reason.TASK_PREEMPTED  # its job still needs it
            before = self.workload.queued
            self.workload.finished(self.now(), pending, completed=completed, retry=preempted)
            if self.workload.queued > before:  # new work came: ask for offers again
                await driver.revive_offers()
                await self.declare(driver)

    async def pacer(self, driver: SchedulerDriver) -> None:
        """Revive for trace arrivals and size changes; stop at the spec's stop time."""
        stops = self.framework.stop
        marks = sorted({c.at for c in self.framework.changes})
        while True:
            t = self.now()
            if stops is not None and t >= stops:
                await driver.stop()
                return
            nxt = [x for x in (self.workload.next_arrival(), stops, *marks) if x and x > t]
            wait = (min(nxt) - t) * self.scale if nxt else 3600.0
            await asyncio.sleep(max(0.001, wait))
            self.workload.advance(self.now())
            await driver.revive_offers()
            await self.declare(driver)

    def stats(self) -> dict[str, object]:
        s = self.workload.stats
        return {"tasks_completed": s.tasks_completed, "waits": s.waits, "job_times": s.job_times}


# one CPU-bound process, for `seconds` (its task's duration). (Not `timeout`: it puts
# its command in a process group of its own, which posix isolation does not see.) The
# host's python3: a task runs as its principal's user, who may not reach this process's
# Python (a venv in a home); the spinner needs the standard library alone.
SPINNER = "{python} -c 'import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass'"


def work(seconds: float, spin: int) -> str:
    """A task's command on real slaves: `spin` CPU-bound processes, or a sleep, for its
    duration (simulated slaves read the duration from its data instead)."""
    if spin == 0:
        return f"sleep {seconds:g}"
    one = SPINNER.format(seconds=f"{seconds:g}", python="python3")
    return " & ".join([one] * spin) + " & wait"


async def run_experiment_framework(
    spec: Spec,
    name: str,
    t0: float,
    time_scale: float,
    broker: str,
    cluster: str,
    stats_path: Path | None,
) -> None:
    framework = next(f for f in spec.frameworks if f.name == name)
    scheduler = ExperimentScheduler(spec, framework, t0, time_scale)
    driver = SchedulerDriver(
        scheduler,
        name=name,
        broker=broker,
        cluster=cluster,
        role=framework.role or name,
        min_offer=framework.sizes() if framework.min_offer else [],
    )
    pacer: asyncio.Task[None] | None = None
    try:
        await driver.start()
        pacer = asyncio.create_task(scheduler.pacer(driver))
        await driver.join()
    finally:
        await driver.stop()
        await driver.join()  # tears the framework down, as a framework that leaves does
        if pacer is not None:
            pacer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pacer
        if stats_path is not None:
            text = json.dumps(scheduler.stats())
            await asyncio.to_thread(stats_path.write_text, text)


@click.command("experiment")
@broker_option()
@cluster_option
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="The experiment spec (YAML) whose framework --name this plays.",
)
@click.option("--name", required=True, help="Which of the spec's frameworks to play.")
@click.option("--t0", type=float, required=True, help="Wall-clock start of the run (epoch s).")
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Every duration of the spec multiplied by this (0.05: twenty times shorter).",
)
@click.option(
    "--stats",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the framework's statistics here as JSON when it ends.",
)
@log_level_option
def experiment_framework(
    broker: str,
    cluster: str,
    spec_path: Path,
    name: str,
    t0: float,
    time_scale: float,
    stats: Path | None,
) -> None:
    """Play one framework of an experiment spec (started by `drfmesos experiment run`)."""

    spec = load_spec(spec_path)
    if name not in {f.name for f in spec.frameworks}:
        raise click.BadParameter(f"the spec has no framework {name!r}")

    async def party(url: BrokerURL) -> None:
        await run_experiment_framework(spec, name, t0, time_scale, url.url, cluster, stats)

    run_party(broker, party)
