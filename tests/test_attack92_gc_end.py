"""An ended sandbox goes after its delay whatever its task's user does to it (attack92).

The collector took a sandbox's end from its directory's mtime, and kept the later of
that and the end it had seen: the directory is the task's user's, so another task of the
same principal (live on the slave, its sandbox beside it: the framework's directory
lets it pass) set it to the year 2100, again and again, and the ended sandbox, and what
that tenant kept in it (measured by no disk watch: its task had ended), stayed for good,
at a full disk too, where every other tenant's ended sandbox went. (Touching it to the
present every second did as well: it never aged.) Now the end the slave saw is its own,
kept in memory; the mtime is read once (a slave restarted), never later than now.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from protocol import logs
from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import TaskState
from slave.sandbox_gc import SandboxGC

from harness.helpers import eventually
from harness.slave import root_work

YEAR_2100 = 4_102_444_800
# a task of the same principal, its sandbox beside t1's: t1's end kept in the future
KEEPER = f"while :; do touch -d @{YEAR_2100} ../t1 2>/dev/null; sleep 0.05; done"


async def test_an_ended_sandbox_goes_though_a_task_of_its_user_sets_its_mtime_ahead(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with root_work(mosquitto, tmp_path, "drfmesos-gc-") as w:
        rig, work = w.rig, w.work
        fw = await rig.framework("mallory")
        await w.start_slave(
            "--gc-delay", "1", "--disk-watch-interval", "0.2",
            "--gc-disk-headroom", "0",
        )  # fmt: skip
        sandboxes = work / "sandboxes" / fw.framework_id

        await rig.launch(fw, KEEPER, "keeper")
        await fw.update_for("keeper", TaskState.RUNNING, timeout=30)
        await rig.launch(fw, "head -c 1M /dev/zero > stash", "t1")
        await fw.update_for("t1", TaskState.FINISHED, timeout=30)
        await eventually(lambda: (sandboxes / "t1").stat().st_mtime >= YEAR_2100, timeout=10)

        # a second of delay, looks every 0.2 s: gone within seconds, the future mtime
        # notwithstanding
        await eventually(lambda: not (sandboxes / "t1").exists(), timeout=20)
        assert (sandboxes / "keeper").is_dir()  # (the live task's stays)


async def test_a_task_id_used_again_between_two_looks_is_kept_from_its_new_end(
    tmp_path: Path,
) -> None:
    """The end kept in memory is forgotten when the id is launched again: a run that
    begins and ends between two looks counts from its sandbox's last change, not from
    the earlier run's end."""
    sandbox = tmp_path / "sandboxes" / "f1" / "t"
    sandbox.mkdir(parents=True)
    long_ago = time.time() - 1_000
    os.utime(sandbox, (long_ago, long_ago))
    gc = SandboxGC(tmp_path, 100.0, 60.0, 0.0, {}, {}, logs.get("test"))
    gc._ready()
    gc._ended[("f1", "t")] = long_ago  # (seen ending 1,000 s ago, its sandbox kept)
    await gc.claimed("f1", ["t"])  # launched again: ran, and ended, before the next look
    os.utime(sandbox)
    await gc.once()
    assert sandbox.exists()
