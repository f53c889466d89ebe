"""A real slave process removes an ended task's sandbox after its --gc-delay, keeps a
running task's, and runs a task id used again after its old sandbox went."""

from __future__ import annotations

import contextlib
from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import TaskState

from harness.helpers import eventually, kill_processes_under
from harness.slave import Rig, reap, slave_process


async def test_a_slave_removes_ended_sandboxes_and_keeps_live_ones(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    work = tmp_path / "slave"
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(kill_processes_under, work)
        rig = Rig(mosquitto, tmp_path, stack)
        await rig.start_master()
        fw = await rig.framework()
        flags = ("--gc-delay", "1", "--disk-watch-interval", "0.2", "--gc-disk-headroom", "0")
        proc = await slave_process(mosquitto, work, *flags)
        stack.push_async_callback(reap, proc)
        sandboxes = work / "sandboxes" / fw.framework_id

        await rig.launch(fw, "echo serving; sleep 600", "svc")
        await fw.update_for("svc", TaskState.RUNNING, timeout=60)
        await rig.launch(fw, "echo first", "t1")
        await fw.update_for("t1", TaskState.FINISHED, timeout=60)
        assert (sandboxes / "t1" / "stdout").read_text() == "first\n"

        await eventually(lambda: not (sandboxes / "t1").exists(), timeout=30)
        # a task running all along (passes of 0.2 s meanwhile) keeps its sandbox
        assert (sandboxes / "svc" / "stdout").read_text() == "serving\n"

        # the id used again: a new sandbox, its own output
        await rig.launch(fw, "echo second; sleep 600", "t1")
        await fw.update_for("t1", TaskState.RUNNING, timeout=60)
        stdout = sandboxes / "t1" / "stdout"
        await eventually(lambda: stdout.exists() and stdout.read_text() == "second\n")
