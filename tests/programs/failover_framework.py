"""A framework process for the failover test, written only against the public API.

It keeps its framework id in a file. The first run launches one long task; a run that
finds the file re-subscribes with that id and asks for reconciliation. Every status it
sees is printed as `STATUS <task_id> <state> <reason>`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from frameworks import Offer, Resources, Scheduler, SchedulerDriver, TaskStatus, build_task


class Failover(Scheduler):
    def __init__(self, id_file: Path) -> None:
        self.id_file = id_file
        self.launched = id_file.exists()

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        self.id_file.write_text(framework_id)

    async def reregistered(self, driver: SchedulerDriver, master_id: str) -> None:
        await driver.reconcile_tasks()

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        for offer in offers:
            if not self.launched:
                self.launched = True
                task = build_task(
                    offer,
                    "long",
                    Resources(cpus=0.5, mem=32),
                    command="sleep 300",
                    task_id="long-task",
                )
                await driver.launch_tasks([offer.offer_id], [task])
            else:
                await driver.decline_offer(offer.offer_id)

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        reason = status.reason.value if status.reason else "-"
        print(f"STATUS {status.task_id} {status.state.value} {reason}", flush=True)


async def main(broker: str, cluster: str, id_file: Path, framework_id: str | None) -> None:
    driver = SchedulerDriver(
        Failover(id_file),
        name="failover",
        broker=broker,
        cluster=cluster,
        failover_timeout=120,
        framework_id=framework_id,
    )
    await driver.run()


if __name__ == "__main__":
    path = Path(sys.argv[3])
    asyncio.run(main(sys.argv[1], sys.argv[2], path, path.read_text() if path.exists() else None))
