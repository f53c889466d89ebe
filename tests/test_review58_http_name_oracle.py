"""Review 58: the master's HTTP side hashes a name not in the store against another's
hash "so that how long a refusal takes does not tell which names are principals"
(master.http.auth.PrincipalAuth._check) -- but names not in the store share ONE check
slot per address (UNKNOWN) while each principal's name has its own, and a request whose
slot is busy is answered 429 at once. So anybody, with no credentials at all, tells a
principal's name from any other by two requests at once from one address: a guess at a
name surely unknown, then a guess at the candidate. The candidate is refused 429 at once
if it is not a principal (the unknown slot is busy), and checked (401 after a hash) if it
is. Principal names are tenants' and operators' login names: the first half of a
password guess, and what the review-57 lockouts needed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cluster.local.secure import provision
from master.http import auth as http_auth
from master.http.auth import PrincipalAuth, TooManyChecks
from protocol.tooling import credentials

from harness.helpers import basic, eventually

MALLORY = "203.0.113.66"  # one address, no credentials


async def verdict(auth: PrincipalAuth, name: str) -> str:
    """What the candidate's request is answered, while a guess at a surely unknown name
    from the same address is being hashed."""
    try:
        who = await auth.principal(basic(name, "a-guess"), MALLORY)
    except TooManyChecks:
        return "429"
    return "401" if who is None else "200"


async def test_two_requests_at_once_tell_whether_a_name_is_a_principals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = provision(tmp_path / "auth", [("master", "master"), ("alice", "framework")])
    auth = PrincipalAuth(store.path)
    verify, hashing, done = credentials.verify_secret, threading.Event(), threading.Event()

    def held(given: str, hashed: str) -> bool:  # (the probe's hash, held a while)
        if given == "probe":
            hashing.set()
            done.wait(10)
        return verify(given, hashed)

    monkeypatch.setattr(http_auth, "verify_secret", held)
    probe = asyncio.create_task(auth.principal(basic("zz-nobody-zz", "probe"), MALLORY))
    try:
        await eventually(hashing.is_set)  # (the probe's check under way)
        answers = {name: await verdict(auth, name) for name in ("alice", "not-a-principal")}
    finally:
        done.set()
        assert await probe is None
    assert answers["alice"] == answers["not-a-principal"], (
        f"answered {answers}: a principal's name and any other are told apart by whether "
        "a second request from the same address is refused 429 at once"
    )
