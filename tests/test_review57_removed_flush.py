"""Review 57: the removed frameworks remembered (books.REMOVED_KEPT, 10,000, the registry's
"removed/" alike) are one list for the whole cluster, oldest out first, and a framework's
own teardown is free (never rate limited). So any tenant that registers and tears down
REMOVED_KEPT frameworks of its own -- some 10 s at the default rate limit -- pushes every
other tenant's removal out: a framework an operator tore down may then subscribe again
with its id (its proof still passes: `FrameworkIds.given_to`), and takes back the tasks
that a slave away at the teardown brings back.

In process, on the memory transport with the credentials store's ACL (the fixtures of
tests/test_framework_ids.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_framework_ids import T, cluster, run_tasks

from master.books import REMOVED_KEPT
from protocol.wire.messages import Error, Subscribe, Subscribed, Teardown

from harness.helpers import eventually, open_transport

pytestmark = pytest.mark.timeout(120)
AT_ONCE = 200  # the master's --max-frameworks-per-principal, by default


async def test_a_tenants_own_teardowns_do_not_forget_another_tenants_removal(
    tmp_path: Path,
) -> None:
    """An operator tears down alice's framework (its id is removed: she is refused as
    `framework-removed`). mallory then registers and tears down REMOVED_KEPT frameworks of
    her own, AT_ONCE at a time. alice's removal must still stand: today it is forgotten,
    and alice subscribes again with the torn-down id, accepted as re-subscribed."""
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        await run_tasks(c, alice, 2)
        ops = await open_transport(c.stack, c.broker.connector("ops"), "ops", inbox=None)
        await ops.publish(T.inbound("operator", "ops"), Teardown(framework_id=fid))
        await eventually(lambda: fid in c.master.books.removed)

        mallory = await c.framework("mallory")
        made = 0
        while made < REMOVED_KEPT:
            seen = len(mallory.inbox.of(Subscribed))
            batch = min(AT_ONCE, REMOVED_KEPT - made)
            for i in range(batch):
                subscribe = Subscribe(name="m", role="mallory", inbox=f"m{made + i}")
                await mallory.bus.publish(mallory.to_master, subscribe)
            got = await mallory.inbox.wait_count(Subscribed, seen + batch, timeout=60)
            ids = [s.framework_id for s in got[seen:]]
            for framework_id in ids:
                await mallory.bus.publish(mallory.to_master, Teardown(framework_id=framework_id))
            await eventually(
                lambda ids=ids: all(i in c.master.books.removed for i in ids), timeout=60
            )
            made += batch
        # (each told it was removed, as Mesos says; nothing of hers refused)
        assert {e.code for e in mallory.inbox.of(Error)} <= {"framework-removed"}

        errors, subscribed = len(alice.inbox.of(Error)), len(alice.inbox.of(Subscribed))
        again = Subscribe(name="a", role="alice", inbox="in", framework_id=fid)
        await alice.bus.publish(alice.to_master, again)
        await alice.inbox.wait_until(
            lambda: (
                len(alice.inbox.of(Error)) > errors or len(alice.inbox.of(Subscribed)) > subscribed
            )
        )
        let_back = fid in c.master.books.frameworks
        assert not let_back, (
            f"alice's torn-down framework {fid} was let back (subscribed again: "
            f"{alice.inbox.of(Subscribed)[subscribed:]}) after mallory's {REMOVED_KEPT} "
            "teardowns of her own"
        )
        assert alice.inbox.of(Error)[errors].code == "framework-removed"
