"""Review 57: the master's HTTP side lets one check of a principal's name run at a time
and answers any other request naming it 429 without a look
(master.http.auth.PrincipalAuth: "a request for a name whose check is under way is
answered 429"). Its right header too. So anybody who knows a principal's name (no
credentials: `alice`) keeps her out of the HTTP API -- her Mesos HTTP scheduler's calls,
her task-file reads, `drfmesos why` -- by always having one wrong guess at her name under
check (each about 10 ms of PBKDF2; a new distinct guess as each is answered), whenever
her own header is not remembered (the first 60 s, and after every change of the store).
The embedded broker's plugin has the same shape (tests/test_review57_broker_lockout.py)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cluster.local.secure import provision
from master.http import auth as http_auth
from master.http.auth import CHECKS_FROM_ONE_PEER, PrincipalAuth, TooManyChecks
from protocol.tooling import credentials

from harness.helpers import basic, eventually


async def test_a_guess_under_check_at_a_name_does_not_turn_away_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory's wrong guess at alice's name (from mallory's address) is being hashed when
    alice's request, with her right secret, comes from hers: alice must be let in (after
    the guess's check, at worst); she was answered 429 at once, and mallory need only keep
    one guess in flight."""
    store = provision(tmp_path / "auth", [("master", "master"), ("alice", "framework")])
    auth = PrincipalAuth(store.path)
    secret = store.secret_file("alice").read_text().strip()
    verify, hashing, done = credentials.verify_secret, threading.Event(), threading.Event()

    def slow_guess(given: str, hashed: str) -> bool:  # (the guess's hash, held a while)
        if given == "guess-1":
            hashing.set()
            done.wait(10)
        return verify(given, hashed)

    monkeypatch.setattr(http_auth, "verify_secret", slow_guess)
    guess = asyncio.create_task(auth.principal(basic("alice", "guess-1"), "203.0.113.66"))
    try:
        await eventually(hashing.is_set)  # (its check under way)
        alices = asyncio.create_task(auth.principal(basic("alice", secret), "198.51.100.7"))
        await asyncio.sleep(0)  # (asked while the guess is being hashed)
        done.set()
        try:
            who = await alices
        except TooManyChecks:
            who = None
        assert who is not None, (
            "alice, with her right secret, was told to wait (429) because a guess at her "
            "name was being checked"
        )
        assert who.principal == "alice"
    finally:
        done.set()
        assert await guess is None


async def test_one_address_guessing_at_many_names_holds_a_few_checks_not_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory guesses at 40 names at once from one address: past CHECKS_FROM_ONE_PEER
    she is answered 429, and bob's own request, from his address, is checked."""
    names = [(f"p{i}", "framework") for i in range(40)]
    store = provision(tmp_path / "auth", [("master", "master"), ("bob", "framework"), *names])
    auth = PrincipalAuth(store.path)
    secret = store.secret_file("bob").read_text().strip()
    verify, release = credentials.verify_secret, threading.Event()

    def held(given: str, hashed: str) -> bool:  # (mallory's hashes held until bob is in)
        if given.startswith("guess"):
            release.wait(10)
        return verify(given, hashed)

    monkeypatch.setattr(http_auth, "verify_secret", held)
    guesses = [
        asyncio.create_task(auth.principal(basic(f"p{i}", f"guess-{i}"), "203.0.113.66"))
        for i in range(40)
    ]
    try:
        await eventually(lambda: sum(g.done() for g in guesses) == 40 - CHECKS_FROM_ONE_PEER)
        refused = [g for g in guesses if g.done()]
        assert all(isinstance(g.exception(), TooManyChecks) for g in refused)
        bobs = asyncio.create_task(auth.principal(basic("bob", secret), "198.51.100.7"))
        release.set()
        who = await bobs
        assert who is not None
        assert who.principal == "bob"
    finally:
        release.set()
        await asyncio.gather(*guesses, return_exceptions=True)
