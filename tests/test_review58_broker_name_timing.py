"""Review 58: the embedded broker's password check (protocol.tooling.amqtt_auth) refuses a
CONNECT naming no principal at once, unhashed (`bool(hashed and secret) and ...`), and
one naming a principal after a PBKDF2 hash of its guess (some 10 ms). So how long a
refused CONNECT takes tells anybody who can reach the broker, with no credentials, which
names are principals -- what the master's HTTP side hashes unknown names against
another's hash to hide ("so that how long a refusal takes does not tell which names are
principals", master.http.auth). Measured: the fastest of 9 refusals each, the two names
taken in turn, so that a busy moment of the machine's slows one sample of either and
leaves both fastest as they are (a median of one name's run, then the other's, was
three times apart once under CI's load)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cluster.local.secure import provision
from protocol.tooling.amqtt_auth import StoreAuthPlugin


def session(username: str, password: str) -> Any:
    return SimpleNamespace(
        username=username,
        password=password,
        client_id=username,
        remote_address="203.0.113.66",
        remote_port=40000,
    )


async def refusal_seconds(plugin: StoreAuthPlugin, name: str, i: int) -> float:
    start = time.perf_counter()  # (each a new wrong secret: no remembered answer)
    assert await plugin.authenticate(session=session(name, f"guess-{name}-{i}")) is False
    return time.perf_counter() - start


async def test_a_refused_connect_takes_as_long_whether_or_not_its_name_is_a_principal(
    tmp_path: Path,
) -> None:
    store = provision(tmp_path / "auth", [("alice", "framework")])
    context = SimpleNamespace(
        config=StoreAuthPlugin.Config(store=str(store.path)), logger=logging.getLogger("t")
    )
    plugin = StoreAuthPlugin(context)
    took: dict[str, list[float]] = {"alice": [], "not-a-principal": []}
    for i in range(9):
        for name, times in took.items():
            times.append(await refusal_seconds(plugin, name, i))
    principal, nobody = min(took["alice"]), min(took["not-a-principal"])
    assert nobody >= principal / 2, (
        f"a guess at a principal's name is refused in {principal * 1000:.2f} ms, one at "
        f"any other name in {nobody * 1000:.3f} ms: the names are told apart"
    )
