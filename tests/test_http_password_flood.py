"""Wrong passwords over HTTP cost the master's HTTP side and are charged to nobody (review 54).

Every HTTP request but the static page names a principal and its secret (HTTP Basic);
`master.http.auth.PrincipalAuth` checks a secret it has not seen by PBKDF2 (10,000 rounds
of SHA-512, ~10 ms), "one at a time in a thread, so guessing cannot starve the master".
A wrong secret is never cached, and nothing charges it to anybody's rate limit: a
tenant (or anyone who knows a principal's name: `alice`) sending a few hundred requests
with a wrong secret queues a few hundred checks on that one lock, and every principal's
check that is not cached waits behind all of them: an operator's first request, a Mesos
HTTP framework's call, and the request at each look at the store (twice a second)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiohttp

from cluster.local.secure import provision
from master.http.config import HttpConfig
from master.master import Master, MasterConfig
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import basic, eventually, open_transport

PRINCIPALS = [("master", "master"), ("ops", "operator"), ("alice", "framework")]
FLOOD = 300


async def test_an_operator_is_let_in_while_a_tenant_floods_wrong_passwords(
    tmp_path: Path,
) -> None:
    store = provision(tmp_path / "auth", PRINCIPALS)
    broker, topics = MemoryBroker(store.principals.values()), Topics("review54auth")
    config = MasterConfig(
        principals=store.principals_file, http=HttpConfig(port=0, credentials=store.path)
    )
    async with contextlib.AsyncExitStack() as stack:
        bus = await open_transport(stack, broker.connector("master"), "master")
        master = Master(bus, topics, config)
        await master.start()
        stack.push_async_callback(master.stop)
        await eventually(lambda: bool(master.web_ui))
        url = f"{master.web_ui}api/v1/whoami"
        wrong = {"Authorization": basic("alice", "not-her-secret")}
        right = {"Authorization": basic("ops", store.secret_file("ops").read_text().strip())}
        refused: list[int] = []
        flood = await stack.enter_async_context(
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=wrong)
        )
        ops = await stack.enter_async_context(aiohttp.ClientSession(headers=right))

        async def guess() -> None:
            async with flood.get(url) as r:
                await r.read()
                refused.append(r.status)

        guesses = [asyncio.create_task(guess()) for _ in range(FLOOD)]
        await eventually(lambda: bool(refused))  # the checks are under way
        async with ops.get(url) as r:
            await r.read()
            assert r.status == 200
            before = len(refused)
        await asyncio.gather(*guesses)
        assert set(refused) == {401}
        # the operator's one check waited for nobody's guesses (most were still queued)
        assert before < 20, f"the operator was let in after {before} of {FLOOD} guesses"
