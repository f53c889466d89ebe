"""A test's scenario run in a PID namespace of its own whose pid_max is small: how the pid
tests (review59, review62) use up a slave's pids without touching the host's."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.transport.aio import within

from harness.helpers import need_root

TESTS = Path(__file__).parent.parent


async def scenario_in_pid_namespace(module: str, pid_max: int, timeout: float) -> dict[str, Any]:
    """What `await module.scenario()` returns (a test module of tests/, a dict of JSON),
    run in a new PID namespace (util-linux's unshare, as root) with `pid_max` pids, all
    of it killed with the namespace's init. A skip where the kernel keeps no pid_max per
    namespace; a failure, with its output's end, where the scenario said no result."""
    need_root()
    unshare = shutil.which("unshare")
    assert unshare is not None
    code = (
        f"import asyncio, json, sys; sys.path[:0] = [{str(TESTS)!r}]; "
        f"import {module} as t; "
        "print('RESULT ' + json.dumps(asyncio.run(t.scenario())), flush=True)"
    )
    shell = (
        f"echo {pid_max} > /proc/sys/kernel/pid_max 2>/dev/null || {{ echo NO_PID_MAX; exit 0; }}; "
        'exec "$@"'
    )
    proc = await asyncio.create_subprocess_exec(
        unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "--",
        "/bin/sh", "-c", shell, "rig", sys.executable, "-c", code,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd=TESTS.parent, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = await within(proc.communicate(), timeout)
    finally:
        if proc.returncode is None:  # (its namespace's init: the rest dies with it)
            proc.kill()
            await proc.wait()
    if b"NO_PID_MAX" in out:
        pytest.skip("this kernel keeps no pid_max per PID namespace (Linux 6.14+)")
    lines = [line for line in out.decode().splitlines() if line.startswith("RESULT ")]
    assert lines, out.decode()[-3000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result
