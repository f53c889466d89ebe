"""Starting a process in a sandbox directory of its own."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def _make_task_sandbox(sandbox: Path) -> Path:
    sandbox.mkdir(parents=True, exist_ok=True)
    for name in ("stdout", "stderr"):
        (sandbox / name).touch()
    return sandbox


async def make_task_sandbox(sandbox: Path) -> Path:
    """Make a custom executor's task its sandbox with empty stdout and stderr, so that its
    files read as its own (empty until its executor writes there), never the executor's."""
    return await asyncio.to_thread(_make_task_sandbox, sandbox)


async def spawn_in_sandbox(
    args: list[str], sandbox: Path, env: dict[str, str], pass_fds: tuple[int, ...] = ()
) -> asyncio.subprocess.Process:
    """Start `args` in `sandbox` (created if need be), stdout and stderr to files there.

    The process leads a new session, so killing its process group kills everything it
    started. File system work runs in a thread: the event loop never waits on the disk.
    """
    await asyncio.to_thread(sandbox.mkdir, parents=True, exist_ok=True)
    out = await asyncio.to_thread(open, sandbox / "stdout", "ab")
    err = await asyncio.to_thread(open, sandbox / "stderr", "ab")
    try:
        return await asyncio.create_subprocess_exec(
            *args,
            cwd=sandbox,
            stdout=out,
            stderr=err,
            stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, **env, "MESOS_SANDBOX": str(sandbox)},
            start_new_session=True,
            pass_fds=pass_fds,
        )
    finally:
        out.close()
        err.close()
