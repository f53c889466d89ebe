"""The disk watch on a real slave process with real tasks (slave.disk_isolator): a
tenant's task that writes past its disk into its /tmp (its sandbox's, as the slave's
defaults give it as root) ends TASK_FAILED, REASON_CONTAINER_LIMITATION_DISK, from the
slave, its message saying what it held against what it asked for; a task within its
disk runs on, and what it holds reaches the master with its usage."""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import Reason, Source, TaskState, Update
from protocol.wire.resources import Resources
from slave.disk_isolator import MB

from harness.helpers import eventually
from harness.slave import root_work

FILL = "head -c {mb}M /dev/zero > /tmp/fill && exec sleep 300"  # (then waits for its kill)


async def test_a_task_that_writes_past_its_disk_fails_and_one_within_runs_on(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with root_work(mosquitto, tmp_path, "drfmesos-disk-") as w:
        rig = w.rig
        master = rig.master
        fw = await rig.framework("mallory")
        await w.start_slave(
            "--resources", "cpus:2;mem:512;disk:100",
            "--container-disk-watch-interval", "0.2", "--usage-interval", "0.2",
        )  # fmt: skip
        await rig.launch(fw, FILL.format(mb=2), "within", Resources(cpus=0.1, mem=32, disk=8))
        await fw.update_for("within", TaskState.RUNNING, timeout=20)

        def held() -> int | None:
            views, _ = master.views.task_views(fw.framework_id, None)
            usage = next((v.usage for v in views if v.task_id == "within"), None)
            return usage.disk_used_bytes if usage is not None else None

        await eventually(lambda: (h := held()) is not None and h >= 2 * MB, timeout=20)

        await rig.launch(fw, FILL.format(mb=12), "over", Resources(cpus=0.1, mem=32, disk=4))
        failed = await fw.update_for("over", TaskState.FAILED, timeout=20)
        assert failed.reason == Reason.DISK_LIMIT
        assert failed.source == Source.SLAVE
        assert "MB of disk in its sandbox" in failed.message
        assert "over the 4 MB the task asked for" in failed.message
        used = float(failed.message.split()[1])
        assert 4 < used <= 13, failed.message
        ended = [u.status.task_id for u in fw.inbox.of(Update) if u.status.state.terminal]
        assert ended == ["over"]  # the look that found it passed over "within"
