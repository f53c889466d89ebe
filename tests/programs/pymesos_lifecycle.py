"""A framework written against pymesos 0.3.15, unmodified, for tests/test_pymesos.py: a
long-running task's life through the Mesos API (kill policies, TASK_KILLING, health
checks).

It subscribes with the TASK_KILLING_STATE capability, launches the tasks TASKS_JSON
describes (Mesos TaskInfo JSON without agent_id and resources: 0.1 CPU and 16 MB each),
and prints every status update, one line each: `REGISTERED <framework id>`,
`STATUS <task> <state> <healthy: true|false|-> <reason|-> <timestamp>`. It reads
commands from stdin, one a line, `KILL <task> [GRACE_SECONDS]` (with a grace: a KILL call
with a kill_policy, sent as pymesos sends its calls), until stdin closes.

    pymesos_lifecycle.py MASTER PRINCIPAL SECRET_FILE TASKS_JSON
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler  # type: ignore[import-not-found]

TASK = [
    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
    {"name": "mem", "type": "SCALAR", "scalar": {"value": 16}},
]
lock = threading.Lock()


def say(*words: object) -> None:
    with lock:
        print(*words, flush=True)


class Lifecycle(Scheduler):  # type: ignore[misc]
    def __init__(self, tasks: list[dict[str, Any]]) -> None:
        self.todo = tasks

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        say("REGISTERED", framework_id["value"])

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            cpus = sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == "cpus")
            tasks = []
            while self.todo and cpus >= 0.1:
                task = {**self.todo.pop(0), "agent_id": offer["agent_id"], "resources": TASK}
                tasks.append(task)
                cpus -= 0.1
            if tasks:
                driver.launchTasks(offer["id"], tasks, {"refuse_seconds": 0.5})
            else:
                driver.declineOffer(offer["id"], {"refuse_seconds": 60})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        healthy = update.get("healthy")
        say(
            "STATUS",
            update["task_id"]["value"],
            update["state"],
            "-" if healthy is None else str(healthy).lower(),
            update.get("reason") or "-",
            update.get("timestamp"),
        )


def kill(driver: Any, task_id: str, grace: str | None) -> None:
    if grace is None:
        driver.killTask({"value": task_id})
        return
    policy = {"grace_period": {"nanoseconds": int(float(grace) * 1e9)}}
    body = {
        "type": "KILL",
        "framework_id": {"value": driver.framework_id},
        "kill": {"task_id": {"value": task_id}, "kill_policy": policy},
    }
    driver._send(body)  # (pymesos's killTask sends no kill_policy: its own call, as it would)


def main() -> None:
    master, principal, secret_file, tasks = sys.argv[1:5]
    with open(secret_file) as f:
        secret = f.read().strip()
    framework = {"user": "", "name": "pymesos-lifecycle", "role": principal,
                 "principal": principal, "failover_timeout": 120,
                 "capabilities": [{"type": "TASK_KILLING_STATE"}]}  # fmt: skip
    driver = MesosSchedulerDriver(
        Lifecycle(json.loads(tasks)), framework, master, principal=principal, secret=secret
    )
    driver.start()
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["KILL"]:
            kill(driver, words[1], words[2] if len(words) > 2 else None)
    driver.stop()


if __name__ == "__main__":
    main()
