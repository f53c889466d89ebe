"""Review 58: the master's HTTP side caps credentials checks at CHECKS_FROM_ONE_PEER (8) an
address and CHECKS_AT_ONCE (32) in all, and answers 429 past either. One address cannot
fill the 32; four can -- a tenant whose tasks run on four slaves has four addresses.
With guesses at 7 principals' names and one unknown name from each (one check a name and
address at a time: 8 each), every other principal whose header is not remembered (its
first request, and every request after any change of the store: `drfmesos auth add`
drops every remembered verdict) is answered 429 "too many credentials checks under way"
from its own address, for as long as the guesses are kept coming (each a new wrong
secret: no verdict remembered stops them). Hashing is the scarce thing (HASHING_AT_ONCE),
but the slots are taken by checks that only wait for it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cluster.local.secure import provision
from master.http import auth as http_auth
from master.http.auth import (
    CHECKS_AT_ONCE,
    CHECKS_FROM_ONE_PEER,
    HASHING_AT_ONCE,
    PrincipalAuth,
    TooManyChecks,
)
from protocol.tooling import credentials

from harness.helpers import basic, eventually

TEAMS = [f"team{i}" for i in range(CHECKS_FROM_ONE_PEER - 1)]  # principals' names, known


async def test_a_tenant_with_four_addresses_turns_every_new_check_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = provision(
        tmp_path / "auth",
        [("master", "master"), ("bob", "framework"), *((t, "framework") for t in TEAMS)],
    )
    auth = PrincipalAuth(store.path)
    bobs = store.secret_file("bob").read_text().strip()
    verify, done = credentials.verify_secret, threading.Event()
    began: list[str] = []

    def slow_guess(given: str, hashed: str) -> bool:  # (a guess's hash, held a while:
        if given.startswith("guess"):  # the guesses keep coming as each is answered)
            began.append(given)
            done.wait(10)
        return verify(given, hashed)

    monkeypatch.setattr(http_auth, "verify_secret", slow_guess)
    addresses = [f"203.0.113.{i}" for i in range(CHECKS_AT_ONCE // CHECKS_FROM_ONE_PEER)]
    guesses = [
        asyncio.create_task(auth.principal(basic(name, f"guess-{name}-{peer}"), peer))
        for peer in addresses
        for name in [*TEAMS, "nobody"]
    ]
    try:
        await eventually(lambda: len(began) >= HASHING_AT_ONCE)  # (hashing: the rest wait)
        await eventually(lambda: len(auth._checks) == CHECKS_AT_ONCE)  # (all under way)
        bob = asyncio.create_task(auth.principal(basic("bob", bobs), "198.51.100.7"))
        await eventually(lambda: bob.done() or len(auth._checks) > CHECKS_AT_ONCE)
        done.set()  # (let in, his check waits its turn to hash: let the guesses' go)
        try:
            who = await bob
        except TooManyChecks as e:
            who, why = None, e.text
        assert who is not None, (
            f"bob, with his right secret from his own address, was answered 429 ({why}) "
            f"while {len(guesses)} guesses from {len(addresses)} addresses are checked"
        )
    finally:
        done.set()
        await asyncio.gather(*guesses, return_exceptions=True)
