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


class FullDisk:
    """os.write on a disk with `room` bytes left while `full`: a write takes what fits,
    and the next fails with ENOSPC, as a regular file's write on a full file system."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full, self.room = False, 0
        real = os.write

        def write(fd: int, data: bytes | memoryview) -> int:
            if not self.full:
                return real(fd, data)
            if self.room == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            took = real(fd, bytes(data[: self.room]))
            self.room -= took
            return took

        monkeypatch.setattr(os, "write", write)


async def test_what_is_acknowledged_after_a_full_disk_has_room_again_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slave.journal"
    disk = FullDisk(monkeypatch)
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
