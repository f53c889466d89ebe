"""A shared volume on a real slave, alice's and mallory's tasks beside each other (#49):
a task of another principal than the volume's user reads, lists and writes nothing in it
while her task runs, not even a directory she left open to all (0777) inside it. (This
held in the review of #49: it passes on main.)"""

from __future__ import annotations

import contextlib

from protocol.wire.messages import CommandInfo, RunTasks, TaskInfo, TaskState
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, Shared, T, shared_slave

R = Resources.parse
V = "disk(team-a,ops)[db:data]<SHARED>"
SECRET = "alice-secret-7d1c"


async def run(s: Shared, principal: str, fw: str, task_id: str, command: str) -> None:
    task = TaskInfo(
        task_id=task_id,
        slave_id=s.master.slave_id,
        resources=R(f"cpus:0.1;mem:64;{V}:100"),
        command=CommandInfo(value=command),
    )
    launch = RunTasks(framework_id=fw, tasks=[task], principal=principal)
    await s.master.bus.publish(T.slave("slave", s.master.slave_id), launch)


def said(s: Shared, fw: str, task_id: str) -> str:
    sandbox = s.sandbox(fw, task_id)
    out = ""
    for name in ("stdout", "stderr"):
        with contextlib.suppress(FileNotFoundError):
            out += (sandbox / name).read_text()
    return out


async def test_mallory_reaches_nothing_of_alices_shared_volume() -> None:
    async with shared_slave(resources=R(f"cpus:4;mem:2048;{V}:100")) as s:
        await run(
            s, "alice", ALICE, "a1",
            f"echo {SECRET} > data/secret && chmod 644 data/secret && mkdir -m 777 data/open"
            f" && echo {SECRET} > data/open/f && chmod 666 data/open/f && echo ready"
            " && exec sleep 300",
        )  # fmt: skip
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        await eventually(lambda: "ready" in said(s, ALICE, "a1"))
        # beside her task: mallory reads, lists and writes nothing there
        await run(
            s, "mallory", MALLORY, "m1",
            "cat data/secret data/open/f; ls -la data/; echo x > data/mine;"
            " echo x > data/open/mine; echo DONE",
        )  # fmt: skip
        await s.master.ends(MALLORY, "m1")
        seen = said(s, MALLORY, "m1")
        assert "DONE" in seen
        assert SECRET not in seen, seen
        vol = s.work / "volumes" / "roles" / "team-a" / "db"
        assert not (vol / "mine").exists()
        assert not (vol / "open" / "mine").exists(), "mallory wrote into alice's volume"
