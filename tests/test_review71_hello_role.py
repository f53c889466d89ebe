"""examples/hello_framework.py, the framework the first-framework tutorial sends a reader
to next, on a cluster whose operator gave the reader's principal a role of its own
(`drfmesos auth add team-a --roles eng/a`, as the sharing tutorial does): it must take
--role, as every `drfmesos framework` does, or it can only be refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.transport.aio import within

from harness.helpers import secure_cluster

CLUSTER = "review71-hello"


@pytest.mark.slow(20)
async def test_the_hello_example_runs_in_a_role_it_is_given(tmp_path: Path) -> None:
    principals = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
                  ("team-a", "framework", "eng/a")]  # fmt: skip
    async with secure_cluster(tmp_path, CLUSTER, principals, [["slave-0"]]) as c:
        hello = await asyncio.create_subprocess_exec(
            sys.executable, "examples/hello_framework.py",
            "--broker", f"mqtts://team-a@{c.url.host}:{c.url.port}",
            "--secret-file", str(c.store.secret_file("team-a")), "--ca", str(c.store.ca),
            "--cluster", CLUSTER, "--tasks", "2", "--role", "eng/a",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )  # fmt: skip
        out, err = await within(hello.communicate(), 60)
    assert hello.returncode == 0, err.decode()
    assert sum("TASK_FINISHED" in line for line in out.decode().splitlines()) == 2, out.decode()


@pytest.mark.parametrize("example", ["hello_framework.py", "web_service.py"])
def test_each_example_framework_takes_a_role(example: str) -> None:
    """Both example frameworks the docs send a reader to take --role."""
    shown = subprocess.run(
        [sys.executable, f"examples/{example}", "--help"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert "--role" in shown.stdout, shown.stdout
