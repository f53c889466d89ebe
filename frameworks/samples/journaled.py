"""A framework that survives its own crash and the master's: the recipe, and the soak's
witness.

It keeps `size` short shell tasks running and writes everything that matters to a
journal (one JSON object a line) before acting on it:

- its framework id, so that a restarted process re-subscribes as the same framework
  (within its failover timeout) and keeps its tasks;
- each task it launches, before the Accept leaves (a crash in between leaves a task the
  master may or may not know: reconciliation says which);
- each status update, before acknowledging it (explicit acknowledgements: an update it
  never recorded is re-sent by the master until it is).

On (re-)registration it reconciles every task it has not seen end, and it keeps
reconciling those still unsettled after `reconcile_every` seconds, as Mesos asks of
frameworks. Each task's command makes a directory named after the task in `witness_dir`
(mkdir is atomic): a task that ever runs twice finds it there and says so in
`witness_dir/doubles`.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frameworks.scheduler import Scheduler, SchedulerDriver, build_task
from protocol.messages import Filters, Offer, TaskState, TaskStatus
from protocol.resources import Resources


@dataclass
class JournaledConfig:
    name: str
    journal: Path
    witness_dir: Path
    size: int = 4  # tasks kept running at once
    task: Resources = field(default_factory=lambda: Resources(cpus=0.5, mem=64))
    duration: tuple[float, float] = (1.0, 3.0)
    reconcile_every: float = 10.0
    stop_file: Path | None = None  # once it exists, launch nothing more (drain)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's records; a torn last line (killed mid-write) is left out."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


class JournaledScheduler(Scheduler):
    def __init__(self, config: JournaledConfig, seed: int | None = None) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.framework_id: str | None = None
        self.open: dict[str, tuple[str, float]] = {}  # task -> (slave, launched at), not ended
        self.ended: set[str] = set()
        for record in read_journal(config.journal):
            if "framework_id" in record:
                self.framework_id = record["framework_id"]
            elif "launch" in record:
                self.open[record["launch"]] = (record["slave"], 0.0)
            elif record.get("terminal"):
                self.ended.add(record["task"])
                self.open.pop(record["task"], None)
        config.journal.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(config.journal, "a", buffering=1)  # noqa: SIM115 - for the process
        self._last_reconcile = time.monotonic()

    def _write(self, **record: Any) -> None:
        self._out.write(json.dumps(record) + "\n")  # line-buffered: in the kernel at once

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        self.framework_id = framework_id
        self._write(framework_id=framework_id, master_id=master_id, at=time.time())
        await self._reconcile(driver, everything=True)

    async def reregistered(self, driver: SchedulerDriver, master_id: str) -> None:
        self._write(reregistered=master_id, at=time.time())
        await self._reconcile(driver, everything=True)

    async def _reconcile(self, driver: SchedulerDriver, everything: bool = False) -> None:
        now = time.monotonic()
        self._last_reconcile = now
        stale = [
            TaskStatus(task_id=task_id, state=TaskState.STAGING, slave_id=slave)
            for task_id, (slave, at) in self.open.items()
            if everything or now - at > self.config.reconcile_every
        ]
        if stale:
            await driver.reconcile_tasks(stale)

    async def slave_lost(self, driver: SchedulerDriver, slave_id: str) -> None:
        """Its tasks there are gone or unknown: ask at once what became of each."""
        self._write(slave_lost=slave_id, at=time.time())
        lost = [
            TaskStatus(task_id=task_id, state=TaskState.STAGING, slave_id=slave)
            for task_id, (slave, _) in self.open.items()
            if slave == slave_id
        ]
        if lost:
            await driver.reconcile_tasks(lost)

    def _command(self, task_id: str) -> str:
        lo, hi = self.config.duration
        seconds = round(self.rng.uniform(lo, hi), 2)
        mark = shlex.quote(str(self.config.witness_dir / task_id))
        doubles = shlex.quote(str(self.config.witness_dir / "doubles"))
        return f"mkdir {mark} 2>/dev/null || echo {task_id} >> {doubles}; sleep {seconds}"

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        if time.monotonic() - self._last_reconcile > self.config.reconcile_every:
            await self._reconcile(driver)
        stop = self.config.stop_file
        draining = stop is not None and stop.exists()
        for offer in offers:
            tasks = []
            free = offer.resources
            while (
                not draining
                and len(self.open) < self.config.size
                and free.contains(self.config.task)
            ):
                free = free - self.config.task
                task_id = f"{self.config.name}-{uuid.uuid4().hex[:12]}"
                tasks.append(
                    build_task(
                        offer,
                        self.config.name,
                        self.config.task,
                        command=self._command(task_id),
                        task_id=task_id,
                    )
                )
                self.open[task_id] = (offer.slave_id, time.monotonic())
                self._write(launch=task_id, slave=offer.slave_id, at=time.time())
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=0.5))
            else:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=0.5))

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        terminal = status.state.terminal
        self._write(
            task=status.task_id,
            state=status.state.value,
            uuid=status.uuid,
            reason=status.reason.value if status.reason else None,
            terminal=terminal,
            at=time.time(),
        )
        if terminal:
            self.open.pop(status.task_id, None)
            self.ended.add(status.task_id)
        if status.uuid:
            await driver.acknowledge_status_update(status)
        stop = self.config.stop_file
        if terminal and len(self.open) < self.config.size and not (stop and stop.exists()):
            await driver.revive_offers()

    def close(self) -> None:
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
