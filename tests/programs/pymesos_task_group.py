"""A framework written against pymesos 0.3.15, unmodified, for tests/test_task_groups_live.py:
task groups (Mesos's LAUNCH_GROUP, the default executor) through the Mesos API.

On its first offer it ACCEPTs two LAUNCH_GROUP operations under one default executor,
`pod` (0.1 CPU, 32 MB of its own): the group `steady` (one task that runs on), then the
group of `fail` (exits 3) and `web` (runs on). It prints each status update on a line,
`STATUS <task> <state> <executor id|-> <reason|->`, and `EXECUTOR_LOST <executor id>` when
an executor ends; it reads `KILL <task>` lines from stdin until stdin closes.

    pymesos_task_group.py MASTER PRINCIPAL SECRET_FILE
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler  # type: ignore[import-not-found,import-untyped,unused-ignore]

TASK = [
    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
    {"name": "mem", "type": "SCALAR", "scalar": {"value": 16}},
]
EXECUTOR = [
    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
    {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}},
]
lock = threading.Lock()


def say(*words: object) -> None:
    with lock:
        print(*words, flush=True)


def task(task_id: str, command: str, agent_id: Any) -> dict[str, Any]:
    return {
        "task_id": {"value": task_id},
        "name": task_id,
        "agent_id": agent_id,
        "resources": TASK,
        "command": {"value": command},
    }


def launch_group(framework_id: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    executor = {
        "type": "DEFAULT",
        "executor_id": {"value": "pod"},
        "framework_id": {"value": framework_id},
        "resources": EXECUTOR,
    }
    group = {"executor": executor, "task_group": {"tasks": tasks}}
    return {"type": "LAUNCH_GROUP", "launch_group": group}


class Pods(Scheduler):  # type: ignore[misc]
    def __init__(self) -> None:
        self.launched = False

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        say("REGISTERED", framework_id["value"])

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer["id"], {"refuse_seconds": 60})
                continue
            self.launched = True
            agent = offer["agent_id"]
            operations = [
                launch_group(driver.framework_id, [task("steady", "sleep 300", agent)]),
                launch_group(
                    driver.framework_id,
                    [task("fail", "exit 3", agent), task("web", "sleep 300", agent)],
                ),
            ]
            driver.acceptOffers([offer["id"]], operations, {"refuse_seconds": 60})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        executor = (update.get("executor_id") or {}).get("value") or "-"
        reason = update.get("reason") or "-"
        say("STATUS", update["task_id"]["value"], update["state"], executor, reason)

    def executorLost(self, driver: Any, executor_id: Any, agent_id: Any, status: Any) -> None:
        say("EXECUTOR_LOST", executor_id["value"])


def main() -> None:
    master, principal, secret_file = sys.argv[1:4]
    with open(secret_file) as f:
        secret = f.read().strip()
    framework = {"user": "", "name": "pymesos-pods", "role": principal,
                 "principal": principal, "failover_timeout": 120}  # fmt: skip
    driver = MesosSchedulerDriver(Pods(), framework, master, principal=principal, secret=secret)
    driver.start()
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["KILL"]:
            driver.killTask({"value": words[1]})
    driver.stop()


if __name__ == "__main__":
    main()
