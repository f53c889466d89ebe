"""`drfmesos why` that hears no answer says what to try: on a secured cluster the broker
silently drops an answer to a principal of the other kind, so a tenant who left out
`--as framework` (or an operator who gave it) waits its --timeout and must be told the
other flag, in words that read ("is this principal an framework?" did not)."""

from __future__ import annotations

import asyncio
import sys

from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within


async def why(url: str, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", "why", "fw-1", "--broker", url, "--cluster",
        "review71-none", "--timeout", "1", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await within(proc.communicate(), 60)
    assert proc.returncode == 1, out.decode()
    return out.decode()


async def test_why_unanswered_names_the_other_kind(mosquitto: MosquittoBroker) -> None:
    url = mosquitto.url.url
    as_operator = await why(url)
    assert "an operator principal" in as_operator, as_operator
    assert "--as framework" in as_operator, as_operator
    as_framework = await why(url, "--as", "framework")
    assert "an framework" not in as_framework, as_framework
    assert "a framework principal" in as_framework, as_framework
    assert "--as operator" in as_framework, as_framework
