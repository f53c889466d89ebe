"""How a command task that a signal ended is reported, as `drfmesos run` turns it into its
exit status (docs/how-to/run.md, "Its exit status"): a command a signal of its own ended
is TASK_FAILED with the code a shell gives it, 128 + the signal (its shell cannot tell
that from an `exit 137`), and its message says which signal that is; a kill (its
framework's, a preemption's, a drain's) is TASK_KILLED, also 137. A real slave in
process, on a real broker. (Review 56 found the docs promising TASK_FAILED without a
code and 1 here, which no shell-run command could keep.)"""

from __future__ import annotations

from frameworks.job import instance_code
from protocol.wire.messages import TaskState
from protocol.wire.resources import Resources

from harness.slave import Rig
from harness.slave import rig as rig


async def test_a_task_a_signal_of_its_own_ended_fails_without_an_exit_code(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await rig.launch(fw, "kill -KILL $$", "self-killed")
    failed = await fw.update_for("self-killed", TaskState.FAILED)
    assert failed.exit_code == 137
    assert failed.message == (
        "exited with code 137 (128 + SIGKILL: a signal ended its command, or it exited so)"
    )
    assert instance_code(failed) == 137
