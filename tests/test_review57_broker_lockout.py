"""Review 57: the embedded broker's per-name bound on waiting password checks
(protocol.tooling.amqtt_auth.WAITING_A_NAME) lets anybody who can reach the broker lock a
principal out: CONNECTs naming alice, each with another wrong secret, keep her name's
queue full, and alice's own CONNECT, with her right secret, is refused unhashed."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cluster.local.secure import provision
from protocol.tooling.amqtt_auth import WAITING_A_NAME, StoreAuthPlugin


def session(username: str, password: str, address: str) -> Any:
    return SimpleNamespace(
        username=username,
        password=password,
        client_id=username,
        remote_address=address,
        remote_port=40000,
    )


async def test_guesses_at_a_name_do_not_refuse_its_owner_her_right_secret(tmp_path: Path) -> None:
    """mallory (no credentials needed: only alice's name) sends WAITING_A_NAME + 4 CONNECTs
    as alice from her own address, each with another wrong secret; alice connects with her
    right secret meanwhile, from hers. Her connect must be let in (it may wait behind the
    guesses; it must not be refused): today it is refused, unhashed, because alice's name
    has WAITING_A_NAME checks waiting -- mallory's -- and alice stays out for as long as
    mallory keeps sending."""
    store = provision(tmp_path / "auth", [("alice", "framework")])
    context = SimpleNamespace(
        config=StoreAuthPlugin.Config(store=str(store.path)), logger=logging.getLogger("t")
    )
    plugin = StoreAuthPlugin(context)
    secret = store.secret_file("alice").read_text().strip()
    guesses = [
        plugin.authenticate(session=session("alice", f"guess-{i}", "203.0.113.66"))
        for i in range(WAITING_A_NAME + 4)
    ]
    alice = plugin.authenticate(session=session("alice", secret, "198.51.100.7"))
    answers = await asyncio.gather(*guesses, alice)
    assert answers[:-1] == [False] * len(guesses)
    assert answers[-1] is True, "alice, with her right secret, was refused: locked out"
