"""A journal on a disk that filled up for a while (review 54).

A slave's journal lives in its work dir, beside its tasks' sandboxes, and "a task's
sandbox, /tmp included, is bounded by nothing but the disk" (docs/how-to/isolation.md):
any tenant's task can fill that file system, and free it again. A write to a full disk
takes what fits and then fails (ENOSPC): the file is left holding part of a record. What
the journal acknowledges after the disk has room again must be read back after a crash."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from protocol.journal import Journal
from protocol.wire.messages import CommandInfo, Kill, TaskState
from protocol.wire.resources import Resources
from slave.slave import Slave, SlaveConfig

from harness.helpers import eventually
from harness.master import GB, Cluster, T
from harness.master import cluster as cluster


class FullDisk:
    """os.write to files under `under` on a disk with `room` bytes left while `full`: a
    write takes what fits, and the next fails with ENOSPC (counted in `refused`), as a
    regular file's write on a full file system."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, under: Path) -> None:
        self.full, self.room, self.refused = False, 0, 0
        real = os.write

        def on_disk(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").startswith(str(under))
            except OSError:
                return False

        def write(fd: int, data: bytes | memoryview) -> int:
            if not self.full or not on_disk(fd):
                return real(fd, data)
            if self.room == 0:
                self.refused += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            took = real(fd, bytes(data[: self.room]))
            self.room -= took
            return took

        monkeypatch.setattr(os, "write", write)


async def test_what_is_acknowledged_after_a_full_disk_has_room_again_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slave.journal"
    disk = FullDisk(monkeypatch, tmp_path)
    journal = Journal(path)
    await journal.put("task-1", {"state": "RUNNING", "pad": "p" * 40})
    disk.full, disk.room = True, 20  # a tenant's task filled the disk: 20 bytes left
    with pytest.raises(OSError, match="No space left"):
        await journal.put("task-2", {"state": "RUNNING", "pad": "q" * 40})
    disk.full = False  # and its file is gone again
    await journal.put("task-3", {"state": "FINISHED"})  # acknowledged: on disk
    await journal.put("task-4", {"state": "RUNNING"})
    # the slave is killed (or the machine loses power) and starts again
    again = dict(Journal(path).items())
    assert again.get("task-1") == {"state": "RUNNING", "pad": "p" * 40}
    assert again.get("task-3") == {"state": "FINISHED"}, again
    assert again.get("task-4") == {"state": "RUNNING"}, again
    # what the journal holds is what the disk holds: the refused record too, written
    # with the first write once there was room (the caller was told of the failure)
    assert again == dict(journal.items())


async def test_a_journal_whose_torn_write_could_not_be_cut_is_put_right_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the torn record cannot even be cut (ftruncate failed): the next write is the live
    # set in a file of its own, renamed over the torn one
    path = tmp_path / "slave.journal"
    disk = FullDisk(monkeypatch, tmp_path)
    journal = Journal(path)
    await journal.put("task-1", {"state": "RUNNING"})

    def cannot(*_: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", cannot)  # (for good: the file is never cut)
    disk.full, disk.room = True, 5
    with pytest.raises(OSError, match="No space left"):
        await journal.drop("task-1")
    disk.full = False
    await journal.put("task-2", {"state": "STAGING"})
    assert dict(Journal(path).items()) == {"task-2": {"state": "STAGING"}}


async def test_a_task_killed_while_the_slaves_disk_is_full_is_heard_to_end(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's task is killed while another tenant's task has filled the slave's disk:
    its TASK_KILLED cannot be written. The disk has room again; the end must still reach
    the master and alice (as Mesos's agent, which dies on a checkpoint it cannot write
    and recovers), not be dropped as if acknowledged: else the master books the task's
    resources for ever and alice waits for an end that never comes (a kill sent again
    finds no task at the slave, and is answered nothing)."""
    disk = FullDisk(monkeypatch, tmp_path)
    bus = await cluster.stack.enter_async_context(
        cluster.connect(name="s1", inbox=T.slave("slave", "s1"), will=None)
    )
    config = SlaveConfig(
        slave_id="s1",
        hostname="h1",
        resources=Resources(cpus=2, mem=2 * GB),
        work_dir=tmp_path / "work",
        simulated_tasks=True,
        cluster=T.cluster,
        resend_after=0.2,
    )
    slave = Slave(bus, T, config)
    await slave.start()
    cluster.stack.push_async_callback(slave.stop)
    a = await cluster.framework("A")
    offer = await a.next_offer()
    task = a.task(offer, Resources(cpus=1, mem=GB), "t")
    await a.accept(offer, [task.model_copy(update={"command": CommandInfo(value="sleep 600")})])
    running = await a.update_for("t", TaskState.RUNNING)
    await a.acknowledge(running)
    await eventually(lambda: not slave.updates.in_flight())

    disk.full = True  # another tenant's task filled the disk
    await a.bus.publish(a.to_master, Kill(framework_id=a.framework_id, task_id="t"))
    await eventually(lambda: disk.refused > 0)  # the end could not be written
    disk.full = False  # and the disk has room again; alice asks once more
    await a.bus.publish(a.to_master, Kill(framework_id=a.framework_id, task_id="t"))
    await a.update_for("t", TaskState.KILLED)
    assert "t" not in cluster.master.books.frameworks[a.framework_id].tasks
