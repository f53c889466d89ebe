"""A web service on the cluster: INSTANCES web servers on each slave, each listening on a
port its offer gave it, written only against the public API.

    python examples/web_service.py --broker mqtt://127.0.0.1:1883 --instances 3
    python examples/web_service.py --broker mqtts://team-a@127.0.0.1:8883 \
        --secret-file auth/secrets/team-a --ca auth/ca.pem          (an authenticated cluster)

(--role: the role to register in, by default the principal's name, the one `drfmesos
auth add` gives it unless the operator names others.)

Each offer carries its slave's free ports (`offer.discrete["ports"]`, 31000-32000 unless
the slave's --resources says otherwise). `OfferPorts` hands them out, each once, to the
tasks launched on the offer; the master refuses a task whose ports are not in its offer.
A server finds its port in `$PORT0` (and all of its ports in `$PORTS`). An instance that
ends is replaced, on whatever port its slave offers next. It prints where each instance
listens, and runs until interrupted.
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
    OfferPorts,
    Resources,
    Scheduler,
    SchedulerDriver,
    TaskInfo,
    TaskState,
    TaskStatus,
    build_task,
    ports_of,
)

INSTANCE = Resources(cpus=0.1, mem=32)


def server(bind: str = "127.0.0.1") -> str:
    """A server on $PORT0 that answers every GET with the port it listens on."""
    return (
        'exec /usr/bin/python3 -c "import http.server, os\n'
        "port = int(os.environ['PORT0'])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200)\n"
        "        self.end_headers()\n"
        "        self.wfile.write(str(port).encode())\n"
        "    def log_message(self, *a): pass\n"
        f"http.server.HTTPServer(('{bind}', port), H).serve_forever()\n\""
    )


class WebService(Scheduler):
    """Keeps `instances` web servers running on every slave that offers ports."""

    def __init__(self, instances: int, bind: str = "127.0.0.1") -> None:
        self.instances, self.command = instances, server(bind)
        self.tasks: dict[str, TaskInfo] = {}  # every instance launched, by task id
        self.hosts: dict[str, str] = {}  # each slave's host name, by slave id
        self.states: dict[str, TaskState] = {}  # each instance's latest state
        self.changed = asyncio.Event()  # set on every update (for whoever watches)

    def live_on(self, slave_id: str) -> int:
        """Instances on `slave_id` that have not ended."""
        return sum(
            1
            for t in self.tasks.values()
            if t.slave_id == slave_id and not self.states.get(t.task_id, TaskState.STAGING).terminal
        )

    # --8<-- [start:resource_offers]
    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            self.hosts[offer.slave_id] = offer.hostname
            ports, free = OfferPorts(offer), offer.resources
            tasks: list[TaskInfo] = []
            wanted = self.instances - self.live_on(offer.slave_id)
            while len(tasks) < wanted and ports.free and free.contains(INSTANCE):
                free = free - INSTANCE
                web = build_task(
                    offer, "web", INSTANCE, command=self.command, discrete=ports.take(1)
                )
                tasks.append(web)
                self.tasks[web.task_id] = web
            if tasks:
                await driver.launch_tasks([offer.offer_id], tasks)
            else:  # nothing more to run here: ask again in a while
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=5))

    # --8<-- [end:resource_offers]

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        self.states[status.task_id] = status.state
        task = self.tasks.get(status.task_id)
        if task is not None and status.state == TaskState.RUNNING:
            (port,) = ports_of(task.discrete)
            print(f"{status.task_id} listens on {self.hosts[task.slave_id]}:{port}")
        elif status.state.terminal:
            print(f"{status.task_id}: {status.state.value} {status.message}")
        self.changed.set()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--secret-file", default=None)
    parser.add_argument("--ca", default=None)
    parser.add_argument("--cluster", default="default")
    parser.add_argument("--role", help="the role to register in (default: the principal's)")
    parser.add_argument("--instances", type=int, default=3, help="web servers a slave")
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        help="the address servers listen on (0.0.0.0: every interface, for clients elsewhere)",
    )
    args = parser.parse_args()
    broker = BrokerURL.parse(args.broker, ca=args.ca, secret_file=args.secret_file)
    driver = SchedulerDriver(
        WebService(args.instances, args.bind),
        name="web-service",
        broker=broker,
        cluster=args.cluster,
        role=args.role,
    )
    await driver.run()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except DriverError as e:  # refused, or no broker or master: said, not a traceback
        raise SystemExit(f"web-service: {e}") from None
    except KeyboardInterrupt:  # Ctrl-C: asyncio.run cancelled the driver, which closed
        print("web-service: stopped", file=sys.stderr)
        raise SystemExit(130) from None  # (128 + SIGINT, as a shell says it)
