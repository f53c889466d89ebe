"""A multi-role framework written against pymesos 0.3.15, unmodified, on a live secure
drfmesos cluster through Mesos's v1 Scheduler HTTP API (tests/programs/pymesos_multi_role.py):
it subscribes in two roles, each offer and every resource of it is one role's, a task runs
in each role, one claiming another role than its offer's is refused, and a suppress in
one role leaves it offered in the other. /api/v1 GET_FRAMEWORKS shows its roles."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp

from cluster.testing import reachable

from conftest import need_mosquitto
from harness.helpers import basic, secure_cluster
from harness.pymesos import need_pymesos, running

CLUSTER = "multirole"
ROLES = ["team-a", "web"]
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
              ("team-a", "framework", *ROLES)]  # fmt: skip
PROGRAM = Path(__file__).parent / "programs" / "pymesos_multi_role.py"


async def test_pymesos_subscribes_in_two_roles_and_is_offered_in_each(tmp_path: Path) -> None:
    need_mosquitto()
    need_pymesos()
    reachable(tmp_path)
    slaves = [("slave-0", "--resources", "cpus:2;mem:1024")]
    async with secure_cluster(tmp_path, CLUSTER, PRINCIPALS, slaves) as c:
        master = c.web.split("//")[1].rstrip("/")
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(PROGRAM), master, "team-a",
            str(c.store.secret_file("team-a")), ",".join(ROLES),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with running(process) as fw:
            framework_id = (await fw.until("REGISTERED"))[1]
            for role in ROLES:
                await fw.first("STATUS", f"task-{role}", "TASK_FINISHED")
                await fw.first("STATUS", f"liar-{role}", "TASK_ERROR")
            offers = [line for line in fw.lines if line[:1] == ["OFFER"]]
            assert {line[1] for line in offers} == set(ROLES)
            assert all(line[3] == line[1] for line in offers)  # every resource its role's
            await fw.until("SUPPRESSED", "web")
            # offers made before the suppress arrived may still come; then team-a's alone
            for _ in range(8):
                await fw.until("OFFER")
            assert [line[1] for line in fw.lines if line[:1] == ["OFFER"]][-4:] == ["team-a"] * 4

            auth = basic("ops", c.store.secret_file("ops").read_text().strip())
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    c.web.rstrip("/") + "/api/v1",
                    json={"type": "GET_FRAMEWORKS"},
                    headers={"Authorization": auth},
                ) as r,
            ):
                frameworks = (await r.json())["get_frameworks"]["frameworks"]
            [info] = [f["framework_info"] for f in frameworks]
            assert info["id"]["value"] == framework_id
            assert info["roles"] == ROLES
            assert {"type": "MULTI_ROLE"} in info["capabilities"]
