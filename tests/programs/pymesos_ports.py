"""A framework written against pymesos 0.3.15, unmodified, for tests/test_ports_live.py:
it runs PER_SLAVE web servers on each slave, each on a port its offer gave it (Mesos's
RANGES resource, as a Marathon-like framework reads it), and prints one line each:
`REGISTERED <framework id>`, `LAUNCHED <task> <agent> <port>`, `STATUS <task> <state>`.
It runs until stdin closes.

    pymesos_ports.py MASTER PRINCIPAL SECRET_FILE PER_SLAVE COMMAND
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler  # type: ignore[import-not-found]

lock = threading.Lock()


def say(*words: object) -> None:
    with lock:
        print(*words, flush=True)


def free_ports(offer: dict[str, Any]) -> list[int]:
    """The ports an offer holds, lowest first (its RANGES resource named ports)."""
    out: list[int] = []
    for r in offer["resources"]:
        if r["name"] == "ports" and r["type"] == "RANGES":
            for span in r["ranges"]["range"]:
                out.extend(range(span["begin"], span["end"] + 1))
    return sorted(out)


class Web(Scheduler):  # type: ignore[misc]
    def __init__(self, per_slave: int, command: str) -> None:
        self.per_slave, self.command = per_slave, command
        self.launched: dict[str, int] = {}  # by agent id

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        say("REGISTERED", framework_id["value"])

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            agent = offer["agent_id"]["value"]
            ports = free_ports(offer)
            tasks = []
            while self.launched.get(agent, 0) < self.per_slave and ports:
                n = self.launched[agent] = self.launched.get(agent, 0) + 1
                port = ports.pop(0)
                task_id = f"web-{agent}-{n}"
                tasks.append({
                    "task_id": {"value": task_id}, "name": task_id,
                    "agent_id": offer["agent_id"],
                    "command": {"value": self.command},
                    "resources": [
                        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                        {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
                        {"name": "ports", "type": "RANGES",
                         "ranges": {"range": [{"begin": port, "end": port}]}},
                    ],
                })  # fmt: skip
                say("LAUNCHED", task_id, agent, port)
            if tasks:
                driver.launchTasks(offer["id"], tasks, {"refuse_seconds": 0.5})
            else:
                driver.declineOffer(offer["id"], {"refuse_seconds": 0.5})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        say("STATUS", update["task_id"]["value"], update["state"])


def main() -> None:
    master, principal, secret_file, per_slave, command = sys.argv[1:6]
    with open(secret_file) as f:
        secret = f.read().strip()
    framework = {"user": "", "name": "pymesos-ports", "role": principal,
                 "principal": principal, "failover_timeout": 120}  # fmt: skip
    driver = MesosSchedulerDriver(
        Web(int(per_slave), command), framework, master, principal=principal, secret=secret
    )
    driver.start()
    sys.stdin.read()  # until the test closes it
    driver.stop()


if __name__ == "__main__":
    main()
