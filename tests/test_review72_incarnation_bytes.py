"""Review 72: a Subscribe's `incarnation` has no bound, and the master keeps it for as long
as the framework lives.

`Subscribe.incarnation` names the sender's bus connection, so that a stale Last Will is
told apart (`SlaveCalls.on_gone` compares it); ours are 16 hex digits. It is a `str` with
no bound (protocol/wire/framework.py), unlike the Subscribe's `inbox` and `name` (200
characters), so a call of 1 MiB is kept whole in `Framework.incarnation` (and again on
every re-subscription). The master's own --max-frameworks-per-principal (200) makes one
tenant's 200 frameworks some 200 MiB of the master's memory, kept with no share of the
cluster at all (a framework with no task costs its tenant nothing).

What a tenant relies on: another tenant's frameworks cost the master what their fields'
bounds say (bounds.md: "What a tenant may send is bounded").
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol.wire.messages import Subscribe

from harness.helpers import eventually
from harness.trust import Secure, secure_cluster

BIG = "i" * 900_000  # under a call's 1 MiB
KEPT = 200  # characters of an id the master keeps at most (the inbox's, the name's bound)


@pytest.fixture
async def sec(tmp_path: Path) -> AsyncIterator[Secure]:
    async with secure_cluster("memory", tmp_path) as cluster:
        yield cluster


async def test_a_subscribes_incarnation_is_bounded(sec: Secure) -> None:
    mallory = await sec.attacker()
    refused = await mallory.call(  # (as a hostile tenant sends it: built past the model's bounds)
        Subscribe.model_construct(name="m", role="mallory", inbox="i1", incarnation=BIG)
    )
    books = sec.master.books

    def mine() -> list[str]:
        return [fw.incarnation for fw in books.frameworks.values() if fw.principal == "mallory"]

    kept = [len(i) for i in mine() if len(i) > KEPT]
    assert not kept, (
        f"the master keeps mallory's framework's incarnation of {kept[0]:,} characters "
        f"(200 frameworks of it: {200 * kept[0] / 2**20:.0f} MiB)"
    )
    assert refused.about == "Subscribe", refused
    assert "incarnation" in refused.message, refused
    # the same Subscribe with an incarnation within the bound is taken, and kept whole
    await mallory.bus.publish(
        mallory.to_master, Subscribe(name="m", role="mallory", inbox="i1", incarnation="i" * KEPT)
    )
    await eventually(lambda: bool(mine()))
    [kept_now] = map(len, mine())
    assert kept_now == KEPT
