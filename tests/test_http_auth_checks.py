"""What a wrong secret costs the master's HTTP side, and whom (master.http.auth, review 54):
one check at a time per principal's name, the same header never hashed twice while its
answer stands, nobody's check queued behind another name's guesses."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from cluster.local.secure import provision
from master.http import auth
from master.http.auth import PrincipalAuth, TooManyChecks
from protocol.tooling import credentials
from protocol.tooling.credentials import hash_secret

from harness.helpers import basic, eventually

PRINCIPALS = [("ops", "operator"), ("alice", "framework"), ("bob", "framework")]


@pytest.fixture
def store(tmp_path: Path) -> tuple[PrincipalAuth, dict[str, str]]:
    s = provision(tmp_path / "auth", PRINCIPALS)
    secrets = {name: s.secret_file(name).read_text().strip() for name, _ in PRINCIPALS}
    return PrincipalAuth(s.path), secrets


async def test_the_same_wrong_header_costs_one_hash_however_often_it_is_sent(
    store: tuple[PrincipalAuth, dict[str, str]],
) -> None:
    checks, _ = store
    wrong = basic("alice", "not-her-secret")
    assert await asyncio.gather(*(checks.principal(wrong) for _ in range(50))) == [None] * 50
    assert await checks.principal(wrong) is None  # (refused from memory, for a while)
    assert checks.hashed == 1
    assert checks.refused_busy == 0


async def test_guesses_at_one_name_hold_one_check_and_nobody_elses(
    store: tuple[PrincipalAuth, dict[str, str]],
) -> None:
    """Distinct guesses at alice's secret, sent together: one is checked, the others are
    answered 429 (Retry-After) without a hash; ops and bob are checked alongside."""
    checks, secrets = store
    await checks.principal(basic("ops", secrets["ops"]))  # (the store read, ops cached)
    hashed = checks.hashed
    guesses = [checks.principal(basic("alice", f"guess-{i}")) for i in range(40)]
    others = [checks.principal(basic("bob", secrets["bob"]))]
    results = await asyncio.gather(*guesses, *others, return_exceptions=True)
    busy = [r for r in results[:40] if isinstance(r, TooManyChecks)]
    assert len(busy) == 39
    assert busy[0].status == 429
    assert busy[0].headers["Retry-After"] == str(auth.RETRY_AFTER)
    assert results[40] == auth.Who("bob", "framework")
    assert checks.hashed - hashed == 2  # alice's one guess, bob's secret
    assert checks.refused_busy == 39


async def test_names_not_in_the_store_are_checked_as_principals_names_are(
    store: tuple[PrincipalAuth, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invented names are hashed too (a refusal's time does not tell who is a principal),
    each its own turn as a principal's name (one shared turn answered 429 told which were
    not principals, review 58), at most CHECKS_FROM_ONE_PEER from one address at once."""
    checks, _ = store
    verify, release = credentials.verify_secret, threading.Event()

    def held(given: str, hashed: str) -> bool:  # (every check under way at once)
        release.wait(10)
        return verify(given, hashed)

    monkeypatch.setattr(auth, "verify_secret", held)
    asked = [asyncio.create_task(checks.principal(basic(f"nobody{i}", "x"))) for i in range(10)]
    try:
        await eventually(lambda: sum(a.done() for a in asked) == 10 - auth.CHECKS_FROM_ONE_PEER)
        assert all(isinstance(a.exception(), TooManyChecks) for a in asked if a.done())
    finally:
        release.set()
    results = await asyncio.gather(*asked, return_exceptions=True)
    assert results.count(None) == auth.CHECKS_FROM_ONE_PEER
    assert checks.hashed == auth.CHECKS_FROM_ONE_PEER


async def test_checks_under_way_are_capped_in_all(
    store: tuple[PrincipalAuth, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    checks, secrets = store
    monkeypatch.setattr(auth, "CHECKS_AT_ONCE", 2)
    await checks.principal(basic("ops", secrets["ops"]))
    results = await asyncio.gather(
        checks.principal(basic("alice", "a")),
        checks.principal(basic("bob", "b")),
        checks.principal(basic("nobody", "c")),
        return_exceptions=True,
    )
    assert results[:2] == [None, None]
    assert isinstance(results[2], TooManyChecks)


async def test_a_header_refused_before_the_store_changed_is_checked_again(
    store: tuple[PrincipalAuth, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret set after a refusal (`drfmesos auth add` again) lets its header in at the
    next look at the store, not REFUSED_SECONDS later; a principal removed is refused."""
    checks, secrets = store
    monkeypatch.setattr(auth, "LOOK_EVERY", 0.0)
    header = basic("alice", "her-new-secret")
    assert await checks.principal(header) is None
    passwd = checks.store / "passwd"
    lines = passwd.read_text().splitlines()
    rotated = [f"alice:{hash_secret('her-new-secret')}" if line.startswith("alice:") else line
               for line in lines]  # fmt: skip
    passwd.write_text("\n".join(rotated) + "\n")
    stat = passwd.stat()
    os.utime(passwd, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert await checks.principal(header) == auth.Who("alice", "framework")
    assert await checks.principal(basic("bob", secrets["bob"])) is not None
    passwd.write_text("\n".join(line for line in rotated if not line.startswith("bob:")) + "\n")
    os.utime(passwd, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000))
    assert await checks.principal(basic("bob", secrets["bob"])) is None
