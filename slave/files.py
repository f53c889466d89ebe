"""Reading a task's sandbox files for the master (an operator's UI asks; the slave answers).

A task's output is in `sandboxes/<framework>/<task>/` (`%<task>` where the id reads as
an executor's: slave.paths): a command task's process writes
there, and a custom executor writes each task's lines to that task's own sandbox, which
the slave makes when it hands the task over. Only a task run before slaves made those has
none; its executor's log, `sandboxes/<framework>/executor-<id>/`, is read instead. Names come from
the wire, so a path is built only from checked segments.

What lies in a sandbox is its task's to make, and the slave reads as root: a file is read
only if it lies in that task's own sandbox once its links are followed (a symlink to
another tenant's stdout reads nothing), is a regular file (a FIFO would hang the read),
and belongs to the sandbox's owner, with no other name (a hard link to a file of the
slave's or of another user's, which the task itself could not read, reads nothing,
whoever the sandbox's owner is: a launch that failed had left one root's, attack91).
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

from protocol.wire.messages import FileData, ReadFile
from protocol.wire.topics import check_segment
from slave.paths import executor_sandbox_name, task_sandbox_name

MAX_READ = 1_048_576  # bytes per answer, whatever is asked


def _read(
    root: Path, slave_id: str, framework: str, candidates: list[str], msg: ReadFile
) -> FileData:
    """(In a thread: resolving and reading touch the disk.)"""
    answer = FileData(request_id=msg.request_id, slave_id=slave_id, offset=msg.offset)
    for name in candidates:
        sandbox = root / framework / name
        try:
            owner = sandbox.lstat().st_uid
            top = sandbox.resolve()
            path = (sandbox / msg.name).resolve()
        except FileNotFoundError:
            continue
        except (OSError, RuntimeError):  # (RuntimeError: a symlink loop)
            answer.error = "no such file"
            return answer
        if not path.is_relative_to(top):
            answer.error = "no such file"
            return answer
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as e:
            answer.error = f"cannot read {msg.name}: {e.strerror}"
            return answer
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != owner or st.st_nlink != 1:
                answer.error = f"cannot read {msg.name}: not a file of the task's"
                return answer
            answer.size = f.seek(0, 2)
            f.seek(min(msg.offset, answer.size))
            answer.data = f.read(min(msg.length, MAX_READ))
        return answer
    answer.error = f"no {msg.name} for task {msg.task_id} of framework {msg.framework_id} here"
    return answer


async def read_sandbox_file(root: Path, slave_id: str, msg: ReadFile) -> FileData:
    """The part of the file asked for, or an `error` saying why there is none."""
    try:
        framework = check_segment(msg.framework_id)
        candidates = [task_sandbox_name(check_segment(msg.task_id))]
        if msg.executor_id is not None:
            candidates.append(executor_sandbox_name(check_segment(msg.executor_id)))
    except ValueError as e:
        return FileData(request_id=msg.request_id, slave_id=slave_id, error=str(e))
    return await asyncio.to_thread(_read, root, slave_id, framework, candidates, msg)
