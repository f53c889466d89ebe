"""A custom framework in ~60 lines, written only against the public API.

    python examples/hello_framework.py --broker mqtt://127.0.0.1:1883 --tasks 5
    python examples/hello_framework.py --broker mqtts://team-a@127.0.0.1:8883 \
        --secret-file auth/secrets/team-a --ca auth/ca.pem          (an authenticated cluster)

It launches TASKS shell commands, as many per offer as fit, declines offers it cannot
use, prints every status update and the first finished task's stdout (read from its
sandbox through the master, as this framework), and stops once every task has ended.

Its role is --role, by default the principal's name (the driver's default), the one
`drfmesos auth add` gives it unless the operator names others (`--roles`). A task id
must not be reused: `build_task` makes a fresh one per launch, and a retry of a failed
task is a new task with a new id.
"""

import argparse
import asyncio
import sys

from frameworks import (
    BrokerURL,
    Driver,
    DriverError,
    Filters,
    Offer,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskState,
    TaskStatus,
    build_task,
)

TASK = Resources(cpus=0.1, mem=32)


class Hello(Scheduler):
    def __init__(self, tasks: int) -> None:
        self.tasks = self.to_launch = tasks
        self.ended: set[str] = set()  # (a set: an update may come twice, at least once)
        self.shown_stdout = False

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        print(f"registered as {framework_id}")

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            free, tasks = offer.resources, []
            while self.to_launch and free.contains(TASK):
                free = free - TASK
                self.to_launch -= 1
                command = "echo hello from $(uname -n)"
                tasks.append(build_task(offer, "hello", TASK, command=command))
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks)
            else:  # nothing to do here: leave it to others for a minute
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=60))

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        print(f"{status.task_id}: {status.state.value} {status.message}")
        if status.state == TaskState.FINISHED and not self.shown_stdout:
            self.shown_stdout = True
            stdout = await driver.read_file(status.task_id, "stdout")
            print(f"{status.task_id} stdout: {stdout.data.decode().strip()}")
        if status.state.terminal:
            self.ended.add(status.task_id)
            if len(self.ended) == self.tasks:
                await driver.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run a few hello tasks.")
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")  # mqtts://PRINCIPAL@...
    parser.add_argument("--ca", help="the cluster's CA certificate (with mqtts://)")
    parser.add_argument("--secret-file", help="a file holding the principal's secret")
    parser.add_argument("--cluster", default="default")
    parser.add_argument("--role", help="the role to register in (default: the principal's)")
    parser.add_argument("--tasks", type=int, default=5)
    args = parser.parse_args()
    broker = BrokerURL.parse(args.broker, ca=args.ca, secret_file=args.secret_file)
    driver = SchedulerDriver(
        Hello(args.tasks), name="hello", broker=broker, cluster=args.cluster, role=args.role
    )
    try:
        asyncio.run(driver.run())
    except DriverError as e:  # refused, or no broker or master: said, not a traceback
        raise SystemExit(f"hello: {e}") from None
    except KeyboardInterrupt:  # Ctrl-C: asyncio.run cancelled the driver, which closed
        print("hello: stopped", file=sys.stderr)
        raise SystemExit(130) from None  # (128 + SIGINT, as a shell says it)
