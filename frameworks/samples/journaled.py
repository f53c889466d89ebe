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

With `work` set it has a fixed list of work items instead of endless tasks: each is done
by a task (`ITEM.ATTEMPT`), and one whose task ends in a retryable state (TASK_LOST,
TASK_DROPPED, TASK_GONE, TASK_FAILED, ...) is launched again, until every item is
FINISHED. TASK_ERROR is not retried (the task itself is wrong), and TASK_UNREACHABLE is
waited out (the task may still run: its slave may come back). A work item's task holds
`witness_dir/ITEM.lock` while it runs: one that finds it held says so in
`witness_dir/overlaps` (the item ran twice at once) and fails.
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

from frameworks.scheduler import Driver, Scheduler, build_task
from protocol.wire.messages import Filters, Offer, TaskState, TaskStatus
from protocol.wire.resources import Resources

OVERLAP_EXIT = 75  # a work item's task found the item's lock held: it ran twice at once


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
    work: int | None = None  # a fixed list of this many work items (None: endless tasks)
    partition_aware: bool = False  # hears TASK_DROPPED, TASK_UNREACHABLE, ... (not LOST)


def work_items(name: str, count: int) -> list[str]:
    """A framework's work items, by name (the soak knows them from the config alone)."""
    return [f"{name}-w{i:05d}" for i in range(count)]


def settles(state: TaskState) -> bool:
    """A task's work item needs no other task: it finished, or it can never succeed
    (TASK_ERROR: the task description is wrong)."""
    return state == TaskState.FINISHED or (state.terminal and not state.retryable)


def is_over(state: TaskState) -> bool:
    """This framework hears no more of the task. TASK_UNKNOWN too: the master knows
    nothing of it (its slave is unknown to it), and these tasks are short."""
    return state.terminal or state == TaskState.UNKNOWN


def item_of(task_id: str) -> str:
    """The work item a task does (`ITEM.ATTEMPT`)."""
    return task_id.rsplit(".", 1)[0]


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
        # work items: not done yet (in order), and how many tasks each has had
        self.todo: dict[str, None] = dict.fromkeys(work_items(config.name, config.work or 0))
        self.attempts: dict[str, int] = {}
        for record in read_journal(config.journal):
            if "framework_id" in record:
                self.framework_id = record["framework_id"]
            elif "launch" in record:
                self.open[record["launch"]] = (record["slave"], 0.0)
                item = item_of(record["launch"])
                self.attempts[item] = self.attempts.get(item, 0) + 1
            elif record.get("terminal"):
                self.ended.add(record["task"])
                self.open.pop(record["task"], None)
                if settles(TaskState(record["state"])):
                    self.todo.pop(item_of(record["task"]), None)
        config.journal.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(config.journal, "a", buffering=1)  # noqa: SIM115 - for the process
        self._last_reconcile = time.monotonic()

    def _write(self, **record: Any) -> None:
        self._out.write(json.dumps(record) + "\n")  # line-buffered: in the kernel at once

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        self.framework_id = framework_id
        self._write(framework_id=framework_id, master_id=master_id, at=time.time())
        await self._reconcile(driver, everything=True)

    async def reregistered(self, driver: Driver, master_id: str) -> None:
        self._write(reregistered=master_id, at=time.time())
        await self._reconcile(driver, everything=True)

    async def _reconcile(self, driver: Driver, everything: bool = False) -> None:
        now = time.monotonic()
        self._last_reconcile = now
        stale = [
            TaskStatus(task_id=task_id, state=TaskState.STAGING, slave_id=slave)
            for task_id, (slave, at) in self.open.items()
            if everything or now - at > self.config.reconcile_every
        ]
        if stale:
            await driver.reconcile_tasks(stale)

    async def slave_lost(self, driver: Driver, slave_id: str) -> None:
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
        witness = self.config.witness_dir
        mark = shlex.quote(str(witness / task_id))
        doubles = shlex.quote(str(witness / "doubles"))
        once = f"mkdir {mark} 2>/dev/null || echo {task_id} >> {doubles}; "
        if self.config.work is None:
            return once + f"sleep {seconds}"
        item = item_of(task_id)
        lock = shlex.quote(str(witness / f"{item}.lock"))
        overlaps = shlex.quote(str(witness / "overlaps"))
        # the lock is the kernel's: it goes with the process, however the task ends
        return (
            once + f"flock -n -E {OVERLAP_EXIT} {lock} sleep {seconds}; rc=$?; "
            f"[ $rc = {OVERLAP_EXIT} ] && echo {item} >> {overlaps}; exit $rc"
        )

    def _next_task_id(self) -> str | None:
        """A new task's id: for the next work item not done or under way (None: none
        left); without work items, a fresh one."""
        if self.config.work is None:
            return f"{self.config.name}-{uuid.uuid4().hex[:12]}"
        busy = {item_of(t) for t in self.open}
        item = next((i for i in self.todo if i not in busy), None)
        if item is None:
            return None
        self.attempts[item] = self.attempts.get(item, 0) + 1
        return f"{item}.{self.attempts[item]}"

    @property
    def done(self) -> bool:
        """Every work item finished (never, without work items)."""
        return self.config.work is not None and not self.todo

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        if time.monotonic() - self._last_reconcile > self.config.reconcile_every:
            await self._reconcile(driver)
        stop = self.config.stop_file
        # work items are all done however the soak drains: only endless tasks stop
        draining = self.config.work is None and stop is not None and stop.exists()
        for offer in offers:
            tasks = []
            free = offer.resources
            while (
                not draining
                and len(self.open) < self.config.size
                and free.contains(self.config.task)
            ):
                task_id = self._next_task_id()
                if task_id is None:
                    break
                free = free - self.config.task
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

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        terminal = is_over(status.state)
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
            if settles(status.state):
                self.todo.pop(item_of(status.task_id), None)
        if status.uuid:
            await driver.acknowledge_status_update(status)
        stop = self.config.stop_file
        draining = self.config.work is None and stop is not None and stop.exists()
        if terminal and len(self.open) < self.config.size and not draining and not self.done:
            await driver.revive_offers()

    def close(self) -> None:
        self._out.flush()
        os.fsync(self._out.fileno())
        self._out.close()
