"""A persistent volume placed at `tmp` does not take the task's /tmp out of its disk
(attack92).

The disk watch leaves out a task's volumes' places in its sandbox (their own disk). But
in the task's mount namespace its /tmp is bound from its sandbox's `tmp` before its
volumes are bound over their places: a volume whose container path is `tmp` (a
framework names it) is bound over the sandbox's `tmp` after /tmp was, so the task's
/tmp is still the sandbox's own `tmp`, which the watch then left out. A task of 4 MB of
disk wrote 12 MB to /tmp and ran on. In the slave's namespace a place is the sandbox's
own directory, never the volume (bound in the task's namespace, or a symlink never
followed): nothing there is the volume's, so nothing is left out.
"""

from __future__ import annotations

from pathlib import Path

from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.slave import T, root_work

VOLUME = "disk(team)[v1:tmp]"


async def test_a_volume_at_tmp_leaves_the_tasks_tmp_measured(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    async with root_work(mosquitto, tmp_path, "drfmesos-disk-") as w:
        rig = w.rig
        inbox = T.framework("framework", "mallory")
        bus = await rig.stack.enter_async_context(Bus(mosquitto.url, name="mallory", inbox=inbox))
        fw = FakeFramework(bus, T, "mallory", acknowledging=True)
        await bus.subscribe(inbox, fw.receive)
        await fw.subscribe("mallory", failover_timeout=60, role="team")
        await w.start_slave(
            "--resources", f"cpus:2;mem:512;disk:100;{VOLUME}:16",
            "--container-disk-watch-interval", "0.2",
        )  # fmt: skip

        fill = "head -c 12M /dev/zero > /tmp/fill && exec sleep 300"
        resources = Resources.parse(f"cpus:0.1;mem:32;disk:4;{VOLUME}:16")
        await rig.launch(fw, fill, "over", resources)
        await fw.update_for("over", TaskState.RUNNING, timeout=20)
        failed = await fw.update_for("over", TaskState.FAILED, timeout=20)
        assert failed.reason == Reason.DISK_LIMIT, failed.message
