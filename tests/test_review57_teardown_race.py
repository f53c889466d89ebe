"""Review 57: a framework known only by its orphans (a master restarted without its
registry) that an operator tears down (`drfmesos teardown ID`) while its principal's
Subscribe naming that id is being written to the registry comes back: the Subscribe goes
on once written (`Subscriptions._subscribed`, known=False, looks only at
`books.frameworks`), registers the id that was removed a moment before, and the
framework runs on, in the books beside its own removal. A known framework's Subscribe
written across a removal is refused (`framework-removed`); an id known only by its
orphans is not. The window is a registry write: a ZooKeeper round trip, longer under
load.

In process, on the memory transport (the fixtures of tests/test_framework_ids.py), the
registry's write of the framework's record held until the teardown has been handled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_framework_ids import T, cluster, run_tasks

from protocol.transport.aio import within
from protocol.wire.messages import Error, ShutdownFramework, Subscribe, Subscribed, Teardown

from harness.helpers import eventually, open_transport

pytestmark = pytest.mark.timeout(60)


async def test_a_teardown_of_an_orphaned_framework_stands_against_a_subscribe_in_flight(
    tmp_path: Path,
) -> None:
    async with cluster(tmp_path) as c:
        alice = await c.framework("alice")
        fid = (await alice.subscribe("a", role="alice", failover_timeout=60)).framework_id
        await run_tasks(c, alice, 2)
        await c.restart_master()
        await c.reregister()
        assert c.master.books.orphans.owners(fid) == {"alice"}

        store = c.master.registry.store
        put = store.put
        writing, written = asyncio.Event(), asyncio.Event()

        async def held_put(key: str, value: Any) -> None:
            if key == f"framework/{fid}":
                writing.set()
                await written.wait()
            await put(key, value)

        store.put = held_put  # type: ignore[method-assign]

        errors, subscribed = len(alice.inbox.of(Error)), len(alice.inbox.of(Subscribed))
        again = Subscribe(name="a", role="alice", inbox="back", framework_id=fid)
        await alice.bus.publish(alice.to_master, again)
        await within(writing.wait(), 10)

        ops = await open_transport(c.stack, c.broker.connector("ops"), "ops", inbox=None)
        shutdowns = len(c.slave.inbox.of(ShutdownFramework))
        await ops.publish(T.inbound("operator", "ops"), Teardown(framework_id=fid))
        await c.slave.inbox.wait_count(ShutdownFramework, shutdowns + 1)
        await eventually(lambda: fid in c.master.books.removed)

        written.set()
        await alice.inbox.wait_until(
            lambda: (
                len(alice.inbox.of(Error)) > errors or len(alice.inbox.of(Subscribed)) > subscribed
            )
        )
        back = fid in c.master.books.frameworks
        assert not back, (
            f"framework {fid}, torn down by an operator, registered again by the Subscribe "
            f"written across the teardown: {alice.inbox.of(Subscribed)[subscribed:]}"
        )
        assert alice.inbox.of(Error)[errors].code in ("framework-removed", "subscribe-refused")
