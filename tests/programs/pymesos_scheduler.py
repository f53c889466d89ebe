"""A framework written against pymesos 0.3.15, unmodified, for tests/test_pymesos.py.

It runs COUNT short command tasks and one long one (`sleep`), then kills the long one and
reconciles it. Every event is printed for the test to read, one line each:
`REGISTERED <framework id>`, `REREGISTERED`, `STATUS <task> <state> <uuid?>`,
`FINISHED_ALL`. With `--executor CMD`, EXECUTOR_TASKS more tasks go to a custom
executor started by CMD (pymesos's MesosExecutorDriver). It runs until stdin closes.

    pymesos_scheduler.py MASTER PRINCIPAL SECRET_FILE COUNT [EXECUTOR_CMD]
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from pymesos import MesosSchedulerDriver, Scheduler  # type: ignore[import-not-found]

TASK = [
    {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
    {"name": "mem", "type": "SCALAR", "scalar": {"value": 16}},
]
EXECUTOR_TASKS = 3
lock = threading.Lock()


def say(*words: object) -> None:
    with lock:
        print(*words, flush=True)


class Tester(Scheduler):  # type: ignore[misc]
    def __init__(self, count: int, executor_cmd: str | None) -> None:
        self.todo = ["long"] + [f"short-{i}" for i in range(count)]
        if executor_cmd:
            self.todo += [f"exec-{i}" for i in range(EXECUTOR_TASKS)]
        self.executor_cmd = executor_cmd
        self.short = {t for t in self.todo if t != "long"}
        self.agent: dict[str, Any] = {}

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        say("REGISTERED", framework_id["value"])

    def reregistered(self, driver: Any, master_info: Any) -> None:
        say("REREGISTERED")
        driver.reconcileTasks([{"task_id": {"value": "long"}}])

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            cpus = sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == "cpus")
            tasks = []
            while self.todo and cpus >= 0.35:
                tasks.append(self.task(self.todo.pop(0), offer["agent_id"]))
                cpus -= 0.1 if tasks[-1].get("command") else 0.2
            if tasks:
                driver.launchTasks(offer["id"], tasks, {"refuse_seconds": 0.5})
            else:
                driver.declineOffer(offer["id"], {"refuse_seconds": 0.5})

    def task(self, task_id: str, agent: Any) -> dict[str, Any]:
        task: dict[str, Any] = {"task_id": {"value": task_id}, "name": task_id,
                                "agent_id": agent, "resources": TASK}  # fmt: skip
        if task_id.startswith("exec-"):
            task["executor"] = {
                "executor_id": {"value": "pymesos-executor"},
                "name": "pymesos-executor",
                "command": {"value": self.executor_cmd},
                "resources": TASK,
            }
            task["data"] = "aGVsbG8="  # "hello", base64
        else:
            task["command"] = {"value": "sleep 600" if task_id == "long" else "true"}
        return task

    def statusUpdate(self, driver: Any, update: Any) -> None:
        task_id, state = update["task_id"]["value"], update["state"]
        say("STATUS", task_id, state, "uuid" if "uuid" in update else "-")
        self.agent[task_id] = update.get("agent_id")
        if state == "TASK_FINISHED":
            self.short.discard(task_id)
            if not self.short:
                say("FINISHED_ALL")
                driver.killTask({"value": "long"})
        if task_id == "long" and state == "TASK_KILLED" and "uuid" in update:
            driver.reconcileTasks([{"task_id": {"value": "long"}}])

    def frameworkMessage(self, driver: Any, executor_id: Any, agent_id: Any, data: Any) -> None:
        say("MESSAGE", executor_id["value"], data)


def main() -> None:
    master, principal, secret_file, count = sys.argv[1:5]
    executor_cmd = sys.argv[5] if len(sys.argv) > 5 else None
    with open(secret_file) as f:
        secret = f.read().strip()
    framework = {"user": "", "name": "pymesos-test", "role": principal,
                 "principal": principal, "failover_timeout": 120}  # fmt: skip
    driver = MesosSchedulerDriver(
        Tester(int(count), executor_cmd), framework, master,
        principal=principal, secret=secret,
    )  # fmt: skip
    driver.start()
    sys.stdin.read()  # until the test closes it
    driver.stop()


if __name__ == "__main__":
    main()
