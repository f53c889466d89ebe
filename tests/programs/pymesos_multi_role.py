"""A multi-role framework written against pymesos 0.3.15, unmodified, for
tests/test_multi_role_live.py: it subscribes with `roles` (MULTI_ROLE), runs one task in
each role from an offer of that role, and one more that claims the other role than its
offer's (which the master refuses); once both have finished it suppresses its offers in
the last role. It prints one line each:
`REGISTERED <framework id>`, `OFFER <role> <agent> <roles of its resources>`,
`LAUNCHED <task> <role>`, `STATUS <task> <state>`, `SUPPRESSED <role>`.
It runs until stdin closes.

    pymesos_multi_role.py MASTER PRINCIPAL SECRET_FILE ROLE1,ROLE2
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


def task(task_id: str, offer: dict[str, Any], role: str) -> dict[str, Any]:
    """A small command task whose resources say they are allocated to `role`."""
    allocated = {"allocation_info": {"role": role}}
    return {
        "task_id": {"value": task_id}, "name": task_id, "agent_id": offer["agent_id"],
        "command": {"value": "true"},
        "resources": [
            {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}, **allocated},
            {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}, **allocated},
        ],
    }  # fmt: skip


class MultiRole(Scheduler):  # type: ignore[misc]
    def __init__(self, roles: list[str]) -> None:
        self.roles = roles
        self.launched: set[str] = set()
        self.finished: set[str] = set()
        self.suppressed = False

    def registered(self, driver: Any, framework_id: Any, master_info: Any) -> None:
        say("REGISTERED", framework_id["value"])

    def resourceOffers(self, driver: Any, offers: list[Any]) -> None:
        for offer in offers:
            role = offer["allocation_info"]["role"]
            held = sorted({r.get("allocation_info", {}).get("role", "-")
                           for r in offer["resources"]})  # fmt: skip
            say("OFFER", role, offer["agent_id"]["value"], ",".join(held))
            if role in self.launched or self.suppressed:
                driver.declineOffer(offer["id"], {"refuse_seconds": 0.3})
                continue
            self.launched.add(role)
            other = next(r for r in self.roles if r != role)
            tasks = [task(f"task-{role}", offer, role), task(f"liar-{role}", offer, other)]
            say("LAUNCHED", f"task-{role}", role)
            driver.launchTasks(offer["id"], tasks, {"refuse_seconds": 0.3})

    def statusUpdate(self, driver: Any, update: Any) -> None:
        task_id, state = update["task_id"]["value"], update["state"]
        say("STATUS", task_id, state)
        if state == "TASK_FINISHED":
            self.finished.add(task_id)
        if len(self.finished) == len(self.roles) and not self.suppressed:
            self.suppressed = True
            driver.suppressOffers([self.roles[-1]])
            say("SUPPRESSED", self.roles[-1])


def main() -> None:
    master, principal, secret_file, roles = sys.argv[1:5]
    with open(secret_file) as f:
        secret = f.read().strip()
    framework = {
        "user": "", "name": "pymesos-multi-role", "roles": roles.split(","),
        "capabilities": [{"type": "MULTI_ROLE"}],
        "principal": principal, "failover_timeout": 120,
    }  # fmt: skip
    driver = MesosSchedulerDriver(
        MultiRole(roles.split(",")), framework, master, principal=principal, secret=secret
    )
    driver.start()
    sys.stdin.read()  # until the test closes it
    driver.stop()


if __name__ == "__main__":
    main()
