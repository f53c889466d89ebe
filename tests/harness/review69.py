"""A secured master on the memory transport with the principals and slaves a test names,
preemption on (threshold 1, as the hostile-tenant tests), and frameworks that fill every
offer with long tasks: review 69's live rig."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.local.secure import provision
from frameworks.driver import SchedulerDriver
from frameworks.scheduler import Driver, Scheduler, build_task
from master.master import Master, MasterConfig
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import Filters, Offer, TaskState, TaskStatus
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.helpers import open_transport, start_secure_slaves

T = Topics("review69")
TASK = Resources(cpus=1, mem=64)
PREEMPTION = {"preemption_timeout": 0.3, "preemption_notice": 0.1, "preemption_threshold": 1.0}


class Filler(Scheduler):
    """Launches as many long tasks as each offer holds, in the offer's role, declaring a
    demand of `declare` tasks; counts its running tasks, and the fewest it had once it had
    `floor` running."""

    def __init__(self, declare: int, floor: int) -> None:
        self.declare, self.floor = declare, floor
        self.running: set[str] = set()
        self.lowest: int | None = None
        self.n = 0

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        await driver.request_resources([(TASK, self.declare)])

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks, rest = [], offer.resources
            while rest.contains(TASK):
                self.n += 1
                rest = rest - TASK
                tasks.append(build_task(offer, f"t{self.n}", TASK, command="sleep 300"))
            if not tasks:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=0.1))
                continue
            await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=0.1))

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        if status.state == TaskState.RUNNING:
            self.running.add(status.task_id)
        elif status.state.terminal:
            self.running.discard(status.task_id)
        if len(self.running) >= self.floor or self.lowest is not None:
            low = len(self.running)
            self.lowest = low if self.lowest is None else min(self.lowest, low)


@dataclass
class Rig:
    master: Master
    memory: MemoryBroker
    stack: contextlib.AsyncExitStack

    async def framework(self, principal: str, scheduler: Scheduler, **kw: object) -> None:
        driver = SchedulerDriver(
            scheduler,
            name=principal,
            broker=self.memory.connector(principal),
            cluster=T.cluster,
            **kw,  # type: ignore[arg-type]
        )
        await driver.start(timeout=10)
        self.stack.push_async_callback(driver._close)

    def running(self, *principals: str) -> int:
        """Tasks running for frameworks of these principals, as the master's books say."""
        return sum(
            fw.running_tasks()
            for fw in self.master.books.frameworks.values()
            if fw.principal in principals
        )


@contextlib.asynccontextmanager
async def rig(
    tmp_path: Path,
    principals: Sequence[tuple[str, ...]],
    slaves: Sequence[tuple[str, str]],
    **config: object,
) -> AsyncIterator[Rig]:
    """The master (and `config`, more of its MasterConfig), and `slaves` (principal,
    slave id) of 4 CPUs / 1 GB; `principals` as `provision` takes them, a master's
    named `master`."""
    store = provision(tmp_path / "auth", principals)
    memory = MemoryBroker(store.principals.values())
    async with contextlib.AsyncExitStack() as stack:
        bus = await open_transport(stack, memory.connector("master"), "master")
        settings = {
            "allocation_interval": 0.05,
            "heartbeat_interval": 0.5,
            "state_interval": 0.1,
            "principals": store.principals_file,
            **PREEMPTION,
            **config,
        }
        master = Master(bus, T, MasterConfig(**settings))  # type: ignore[arg-type]
        await master.start()
        stack.push_async_callback(master.stop)
        await start_secure_slaves(stack, memory.connector, T, tmp_path, slaves)
        yield Rig(master, memory, stack)
