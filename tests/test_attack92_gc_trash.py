"""A tenant that keeps filling the collector's trash does not keep it from collecting
(attack92).

A sandbox due goes into `sandboxes/gc trash/`, and the collector emptied the trash a
fifth of a second at a time until nothing more was left to do now, before its next look.
A process of the tenant's that sits in an ended sandbox of its own (a live task of the
same principal's: it passes the framework's directory, the ended sandbox is its user's)
is still in it once it is renamed into the trash, and making empty directories there
faster than the collector removes them (one mkdir against five calls) held the
collector in that loop for good: no other tenant's ended sandbox went again, whatever
the disk, and what the tenant kept there was measured by nothing. Now the trash is
emptied for one interval at most a look; what is left waits for the next.
"""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import TaskState

from harness.helpers import eventually
from harness.slave import root_work

# (an empty directory: one mkdir for the tenant, five calls for the collector to remove)
FEED = "import itertools, os\nfor i in itertools.count():\n    os.mkdir(f'd{i}')\n"
# waits for t1 (its principal's too) to be about to end, then sits in its sandbox and
# feeds it, in the trash as out of it
KEEPER = (
    "while [ ! -e ../t1/ready ]; do sleep 0.05; done; "
    f'cd ../t1 && exec /usr/bin/python3 -c "{FEED}"'
)


async def test_a_tenant_feeding_the_trash_does_not_stop_other_sandboxes_going(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with root_work(mosquitto, tmp_path, "drfmesos-gc-") as w:
        rig, work = w.rig, w.work
        mallory = await rig.framework("mallory")
        await w.start_slave(
            "--gc-delay", "1", "--disk-watch-interval", "0.5",
            "--gc-disk-headroom", "0",
        )  # fmt: skip
        sandboxes = work / "sandboxes"

        await rig.launch(mallory, KEEPER, "keeper")
        await mallory.update_for("keeper", TaskState.RUNNING, timeout=30)
        await rig.launch(mallory, "touch ready; sleep 1", "t1")
        await mallory.update_for("t1", TaskState.FINISHED, timeout=30)
        t1 = sandboxes / mallory.framework_id / "t1"
        await eventually(lambda: not t1.exists(), timeout=20)  # (into the trash)
        assert any((sandboxes / "gc trash").iterdir())  # (the keeper feeding it there)

        alice = await rig.framework("alice")  # another tenant's, the slave now its
        await rig.decline_next(mallory, refuse=600)
        await rig.launch(alice, "echo done", "a1")
        await alice.update_for("a1", TaskState.FINISHED, timeout=30)
        a1 = sandboxes / alice.framework_id / "a1"
        # a second of delay, looks every half second: gone within seconds
        await eventually(lambda: not a1.exists(), timeout=20)
