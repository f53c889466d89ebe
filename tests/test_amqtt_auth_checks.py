"""The embedded broker's password checks (protocol.tooling.amqtt_auth, review 54): PBKDF2
off the broker's loop, and the same credentials hashed once while their answer stands,
so a client's reconnects and a repeated wrong guess cost no hash."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cluster.local.secure import provision
from protocol.tooling import amqtt_auth
from protocol.tooling.amqtt_auth import StoreAuthPlugin


def session(username: str, password: str) -> Any:
    return SimpleNamespace(username=username, password=password, client_id=username)


async def test_checks_are_hashed_off_the_loop_and_once_per_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = provision(tmp_path / "auth", [("alice", "framework")])
    context = SimpleNamespace(
        config=StoreAuthPlugin.Config(store=str(store.path)), logger=logging.getLogger("t")
    )
    plugin = StoreAuthPlugin(context)
    hashed_in: list[bool] = []  # whether each hash ran on the loop's thread
    verify = amqtt_auth.verify_secret

    def counted(secret: str, hashed: str) -> bool:
        try:
            asyncio.get_running_loop()
            hashed_in.append(True)
        except RuntimeError:
            hashed_in.append(False)
        return verify(secret, hashed)

    monkeypatch.setattr(amqtt_auth, "verify_secret", counted)
    secret = store.secret_file("alice").read_text().strip()
    wrong = await asyncio.gather(
        *(plugin.authenticate(session=session("alice", "x")) for _ in range(20))
    )
    assert wrong == [False] * 20
    assert await plugin.authenticate(session=session("alice", "x")) is False
    right = await asyncio.gather(
        *(plugin.authenticate(session=session("alice", secret)) for _ in range(20))
    )
    assert right == [True] * 20
    assert hashed_in == [False, False]  # one hash each, neither on the loop


async def test_a_flood_of_guesses_at_one_name_queues_behind_that_name_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory sends 200 CONNECTs as alice, each with another wrong secret; bob connects
    meanwhile. alice's checks run one at a time and at most WAITING_A_NAME wait (the rest
    are refused unhashed), so bob's check is among the first few hashed, not behind 200."""
    store = provision(tmp_path / "auth", [("alice", "framework"), ("bob", "framework")])
    context = SimpleNamespace(
        config=StoreAuthPlugin.Config(store=str(store.path)), logger=logging.getLogger("t")
    )
    plugin = StoreAuthPlugin(context)
    order: list[str] = []  # whose secret each hash checked, in order
    verify = amqtt_auth.verify_secret
    bobs = store.secret_file("bob").read_text().strip()

    def counted(secret: str, hashed: str) -> bool:
        order.append("bob" if secret == bobs else "alice")
        return verify(secret, hashed)

    monkeypatch.setattr(amqtt_auth, "verify_secret", counted)
    guesses = [plugin.authenticate(session=session("alice", f"guess-{i}")) for i in range(200)]
    answers = await asyncio.gather(*guesses, plugin.authenticate(session=session("bob", bobs)))
    assert answers == [False] * 200 + [True]
    assert order.index("bob") <= amqtt_auth.HASHING_AT_ONCE
    assert order.count("alice") <= amqtt_auth.WAITING_A_NAME


async def test_a_flood_of_wrong_answers_never_pushes_a_right_one_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice connected (her right secret remembered); then more wrong guesses than the
    memory keeps, from many addresses: alice's reconnect is still answered from memory,
    without a hash (in a flood, a hash of hers may wait behind many)."""
    store = provision(tmp_path / "auth", [("alice", "framework")])
    context = SimpleNamespace(
        config=StoreAuthPlugin.Config(store=str(store.path)), logger=logging.getLogger("t")
    )
    plugin = StoreAuthPlugin(context)
    secret = store.secret_file("alice").read_text().strip()
    assert await plugin.authenticate(session=session("alice", secret)) is True
    hashes: list[str] = []

    def cheap(given: str, hashed: str) -> bool:  # (10,000 real hashes would take minutes)
        hashes.append(given)
        return False

    monkeypatch.setattr(amqtt_auth, "verify_secret", cheap)
    monkeypatch.setattr(amqtt_auth, "REMEMBERED", 50)
    plugin = StoreAuthPlugin(context)  # (its memories bounded at 50)
    monkeypatch.setattr(amqtt_auth, "verify_secret", lambda given, hashed: given == secret)
    assert await plugin.authenticate(session=session("alice", secret)) is True
    monkeypatch.setattr(amqtt_auth, "verify_secret", cheap)
    for i in range(200):  # (one after another: each hashed, each answer remembered)
        guess = SimpleNamespace(
            username="alice", password=f"g{i}", client_id="alice", remote_address=f"10.0.{i}"
        )
        assert await plugin.authenticate(session=guess) is False
    assert await plugin.authenticate(session=session("alice", secret)) is True
    assert secret not in hashes
