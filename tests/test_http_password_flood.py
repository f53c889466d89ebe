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
from protocol.tooling.credentials import Store
from protocol.transport.memory import MemoryBroker
from protocol.wire.topics import Topics

from harness.helpers import basic, eventually, start_master

PRINCIPALS = [("master", "master"), ("ops", "operator"), ("alice", "framework")]
FLOOD = 300


async def master_with_http(stack: contextlib.AsyncExitStack, store: Store, cluster: str) -> Master:
    """A master on the memory transport, its HTTP side checking the store's credentials."""
    broker = MemoryBroker(store.principals.values())
    config = MasterConfig(
        principals=store.principals_file, http=HttpConfig(port=0, credentials=store.path)
    )
    master = await start_master(stack, broker.connector("master"), Topics(cluster), config)
    await eventually(lambda: bool(master.web_ui))
    return master


async def test_an_operator_is_let_in_while_a_tenant_floods_wrong_passwords(
    tmp_path: Path,
) -> None:
    store = provision(tmp_path / "auth", PRINCIPALS)
    async with contextlib.AsyncExitStack() as stack:
        master = await master_with_http(stack, store, "review54auth")
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
        await asyncio.gather(*guesses)
        assert set(refused) == {401}
        # the same wrong header, sent 300 times, cost one hash (the operator's another):
        # nothing stood before the operator's check but that one (the guesses answered
        # meanwhile are answered from memory, which costs nobody a wait; counted, they
        # measured the machine's load, not the queue)
        assert master.http is not None
        assert master.http.auth is not None
        assert master.http.auth.hashed <= 3, master.http.auth.hashed


async def test_guesses_of_many_secrets_at_once_are_told_to_wait_without_a_hash(
    tmp_path: Path,
) -> None:
    """Distinct wrong secrets for one name, sent together: one is checked at a time, the
    others answered 429 with Retry-After at once (no hash); an operator is let in."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    async with contextlib.AsyncExitStack() as stack:
        master = await master_with_http(stack, store, "review54many")
        url = f"{master.web_ui}api/v1/whoami"
        http = await stack.enter_async_context(
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        )

        async def guess(i: int) -> tuple[int, str | None]:
            async with http.get(url, headers={"Authorization": basic("alice", f"g{i}")}) as r:
                await r.read()
                return r.status, r.headers.get("Retry-After")

        answers = await asyncio.gather(*(guess(i) for i in range(60)))
        assert {status for status, _ in answers} <= {401, 429}
        assert all(after == "1" for status, after in answers if status == 429)
        assert master.http is not None
        assert master.http.auth is not None
        told_to_wait = sum(status == 429 for status, _ in answers)
        assert master.http.auth.hashed == 60 - told_to_wait  # (a 429 costs no hash)
        assert told_to_wait > 0
        right = basic("ops", store.secret_file("ops").read_text().strip())
        async with http.get(url, headers={"Authorization": right}) as r:
            assert r.status == 200
