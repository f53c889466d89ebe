"""A slave that does not keep tenants apart says so where an operator looks: the
master's state (the Mesos operator API's GET_AGENTS, classic /master/slaves, the web UI's
/api/v1/slaves), not only its own start's log line. A slave run without root, or as root
with --no-switch-user, runs every tenant's tasks as one uid."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from cluster.local.secure import as_principal
from cluster.local.view import wait_state
from protocol.tooling.credentials import Store

from conftest import need_mosquitto
from harness.helpers import secure_master

CLUSTER = "isolation-state"
PRINCIPALS = [("master", "master"), ("ops", "operator"), ("node-root", "slave"),
              ("node-kept", "slave")]  # fmt: skip


async def fetch(web: str, store: Store, path: str, body: bytes | None = None) -> Any:
    secret = store.secret_file("ops").read_text().strip()
    auth = "Basic " + base64.b64encode(f"ops:{secret}".encode()).decode()
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        call = (
            session.post(web + path, data=body, headers=headers)
            if body
            else session.get(web + path, headers=headers)
        )
        async with call as r:
            assert r.status == 200, await r.text()
            return await r.json()


async def test_a_slave_that_runs_tenants_as_one_user_says_so_in_the_state(tmp_path: Path) -> None:
    """Two root slaves: one told not to switch users (every tenant's task runs as root),
    one that keeps tenants apart (a user each, its namespaces, its /tmp: its work dir
    outside /tmp, as an operator's). The state names the first's warning everywhere, and
    nothing for the second; the first's log says it at its start."""
    need_mosquitto()
    kept = Path(tempfile.mkdtemp(prefix="drfmesos-kept-", dir="/var/lib"))
    os.chmod(kept, 0o711)
    try:
        async with secure_master(tmp_path, CLUSTER, PRINCIPALS) as (broker, store, run):
            await run.start(
                "slave", "node-root", "--resources", "cpus:1;mem:256", "--no-switch-user",
                "--work-dir", str(tmp_path / "node-root"),
            )  # fmt: skip
            await run.start(
                "slave", "node-kept", "--resources", "cpus:1;mem:256",
                "--work-dir", str(kept / "work"),
            )  # fmt: skip
            state = await wait_state(
                as_principal(broker.url, store, "ops"), CLUSTER, lambda s: len(s.slaves) == 2
            )
            web = state.web_ui
            by_id = {s.slave_id: s.isolation_warning for s in state.slaves}
            unisolated = [i for i, w in by_id.items() if w]
            assert len(unisolated) == 1, by_id
            (root_id,) = unisolated
            assert "tasks run as ROOT" in by_id[root_id]  # (the bus's state says it too)

            agents = await fetch(web, store, "api/v1", b'{"type": "GET_AGENTS"}')
            v1 = {
                a["agent_info"]["id"]["value"]: a.get("isolation_warning")
                for a in agents["get_agents"]["agents"]
            }
            assert "tasks run as ROOT" in (v1.pop(root_id) or "")
            assert list(v1.values()) == [None]  # (the other says nothing: all enforced)

            classic = await fetch(web, store, "master/slaves")
            v0 = {s["id"]: s.get("isolation_warning") for s in classic["slaves"]}
            assert "tasks run as ROOT" in (v0.pop(root_id) or "")
            assert list(v0.values()) == [None]

            listed = await fetch(web, store, "api/v1/slaves")
            ui = {s["slave_id"]: s["isolation_warning"] for s in listed["slaves"]}
            assert "tasks run as ROOT" in ui.pop(root_id)
            assert list(ui.values()) == [""]

            log = (run.run_dir / "logs" / "node-root.log").read_text()
            assert "isolation.tenants" in log
            assert "tasks run as ROOT" in log
    finally:
        await asyncio.to_thread(shutil.rmtree, kept, True)
