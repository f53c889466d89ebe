"""Reading a task's sandbox files for the master (an operator's UI asks; the slave answers).

A task's output is in `sandboxes/<framework>/<task>/`: a command task's process writes
there, and a custom executor writes each task's lines to that task's own sandbox, which
the slave makes when it hands the task over. Only a task run before slaves made those has
none; its executor's log, `sandboxes/<framework>/executor-<id>/`, is read instead. Names come from
the wire, so a path is built only from checked segments and must stay under the sandboxes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol.wire.messages import FileData, ReadFile
from protocol.wire.topics import check_segment

MAX_READ = 1_048_576  # bytes per answer, whatever is asked


def _read(
    root: Path, slave_id: str, framework: str, candidates: list[str], msg: ReadFile
) -> FileData:
    """(In a thread: resolving and reading touch the disk.)"""
    answer = FileData(request_id=msg.request_id, slave_id=slave_id, offset=msg.offset)
    top = root.resolve()
    for name in candidates:
        path = (root / framework / name / msg.name).resolve()
        if not path.is_relative_to(top):
            answer.error = "no such file"
            return answer
        try:
            with path.open("rb") as f:
                answer.size = f.seek(0, 2)
                f.seek(min(msg.offset, answer.size))
                answer.data = f.read(min(msg.length, MAX_READ))
            return answer
        except FileNotFoundError:
            continue
        except OSError as e:
            answer.error = f"cannot read {msg.name}: {e.strerror}"
            return answer
    answer.error = f"no {msg.name} for task {msg.task_id} of framework {msg.framework_id} here"
    return answer


async def read_sandbox_file(root: Path, slave_id: str, msg: ReadFile) -> FileData:
    """The part of the file asked for, or an `error` saying why there is none."""
    try:
        framework = check_segment(msg.framework_id)
        candidates = [check_segment(msg.task_id)]
        if msg.executor_id is not None:
            candidates.append(f"executor-{check_segment(msg.executor_id)}")
    except ValueError as e:
        return FileData(request_id=msg.request_id, slave_id=slave_id, error=str(e))
    return await asyncio.to_thread(_read, root, slave_id, framework, candidates, msg)
