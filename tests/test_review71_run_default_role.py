"""`drfmesos run` and `drfmesos framework` without --role, by a principal an operator gave
roles of its own (`drfmesos auth add NAME --roles team/a`, as the sharing tutorial does):
the role they default to, the principal's name, is not one of them. The refusal must say
what to do about it: name a role with --role."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from protocol.transport.aio import within

from harness.helpers import secure_cluster

CLUSTER = "review71"


@pytest.mark.slow(15)
async def test_a_refused_default_role_says_to_give_one_with_role(tmp_path: Path) -> None:
    principals = [("master", "master"), ("ops", "operator"), ("slave-0", "slave"),
                  ("alice", "framework", "team/a")]  # fmt: skip
    async with secure_cluster(tmp_path, CLUSTER, principals, [["slave-0"]]) as c:
        alice = [
            "--broker", f"mqtts://alice@{c.url.host}:{c.url.port}", "--cluster", CLUSTER,
            "--secret-file", str(c.store.secret_file("alice")), "--ca", str(c.store.ca),
        ]  # fmt: skip
        for command in (
            ["run", *alice, "--", "true"],
            ["framework", "drf-demo", "--name", "demo", *alice],
        ):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cluster", *command,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await within(proc.communicate(), 60)
            said = err.decode()
            assert proc.returncode == 1, said
            assert "may not register in role 'alice' (allowed: team/a)" in said, said
            # what to do: the role was not named, so name one with --role
            assert "--role" in said, said
