"""The demo is a newcomer's first cluster, and the how-to on why a framework gets no
offers shows `drfmesos why NAME ... --cluster demo`. But the demo's broker is on a port
of its own, with TLS and a throwaway store: it printed the web UI's address and the
operator's secret, and nothing a `drfmesos state` or `drfmesos why A` could reach it with.
It must say how: an `export` line of the variables every command reads, which a second
shell pastes."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

import pytest

from protocol.tooling.brokers import end_process
from protocol.transport.aio import within


@pytest.mark.slow(40)
async def test_the_demo_says_how_a_command_reaches_it(tmp_path: Path) -> None:
    demo = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "demo", "--duration", "60", "--time-scale", "0.05",
        "--run-dir", str(tmp_path), "--http", "127.0.0.1:0", "--log-level", "warning",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "100"},
    )  # fmt: skip
    try:
        assert demo.stdout is not None
        line = ""
        async with asyncio.timeout(60):
            while "export " not in line:
                line = (await demo.stdout.readline()).decode()
                assert line, "the demo ended without an export line"
        words = shlex.split(line[line.index("export ") :])[1:]
        env = dict(w.split("=", 1) for w in words)
        assert {"DRFMESOS_BROKER", "DRFMESOS_CLUSTER"} <= set(env), line
        async with asyncio.timeout(60):  # framework A arrives first: its row in the table
            while not line.startswith("│ A "):
                line = (await demo.stdout.readline()).decode()
                assert line, "the demo ended before A came"
        why = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "why", "A",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.getcwd(), **env},
        )  # fmt: skip
        out, _ = await within(why.communicate(), 60)
        assert why.returncode == 0, out.decode()
        assert "name A" in out.decode(), out.decode()
    finally:
        await end_process(demo)
