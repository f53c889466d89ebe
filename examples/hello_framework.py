"""A custom framework in ~50 lines, written only against the public API.

    python examples/hello_framework.py --broker mqtt://127.0.0.1:1883 --tasks 5
    python examples/hello_framework.py --broker mqtts://team-a@127.0.0.1:8883 \
        --secret-file auth/secrets/team-a --ca auth/ca.pem          (an authenticated cluster)

It launches TASKS shell commands, as many per offer as fit, declines offers it cannot
use, prints every status update, and stops once every task has ended.
"""

import argparse
import asyncio

from frameworks import (
    BrokerURL,
    Filters,
    Offer,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskStatus,
    build_task,
)

TASK = Resources(cpus=0.1, mem=32)


class Hello(Scheduler):
    def __init__(self, tasks: int) -> None:
        self.to_launch = tasks
        self.unfinished = tasks

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        print(f"registered as {framework_id}")

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        for offer in offers:
            free, tasks = offer.resources, []
            while self.to_launch and free.contains(TASK):
                free = free - TASK
                self.to_launch -= 1
                tasks.append(build_task(offer, "hello", TASK, command="echo hello from $HOSTNAME"))
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks)
            else:  # nothing to do here: leave it to others for a minute
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=60))

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        print(f"{status.task_id}: {status.state.value} {status.message}")
        if status.state.terminal:
            self.unfinished -= 1
            if self.unfinished == 0:
                driver.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run a few hello tasks.")
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")  # mqtts://PRINCIPAL@...
    parser.add_argument("--ca", help="the cluster's CA certificate (with mqtts://)")
    parser.add_argument("--secret-file", help="a file holding the principal's secret")
    parser.add_argument("--cluster", default="default")
    parser.add_argument("--tasks", type=int, default=5)
    args = parser.parse_args()
    broker = BrokerURL.parse(args.broker, ca=args.ca, secret_file=args.secret_file)
    driver = SchedulerDriver(Hello(args.tasks), name="hello", broker=broker, cluster=args.cluster)
    asyncio.run(driver.run())
