"""Review 84: an UpdateFramework refused because the registry could not take its record
still changed the framework (its roles, name, offer filters, suppression) in the master's
books: the framework is told the update failed, and is offered in the roles it was told
it is not in; a new leader reads the old record."""

from __future__ import annotations

import contextlib
from typing import Any

from test_multi_role import MULTI, WHOLE, offers_of

from master.ha.registry import MemoryStore, Registry
from protocol.wire.messages import Error, FrameworkCapability, UpdateFramework

from harness.master import Cluster, T


class RefusingStore(MemoryStore):
    """A registry store that refuses framework records while `refusing` (ZooKeeper
    losing its quorum)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False

    async def put(self, key: str, value: Any) -> None:
        if self.refusing and key.startswith("framework/"):
            raise ConnectionError("ZooKeeper lost its quorum")
        await super().put(key, value)


async def test_an_update_the_registry_refused_changes_nothing() -> None:
    store = RefusingStore()
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(registry=Registry(store))
        fw = await c.framework("A", roles=["web"], capabilities=[FrameworkCapability.MULTI_ROLE])
        await c.slave("s1", WHOLE)
        await offers_of(fw, 1)

        store.refusing = True
        update = UpdateFramework(
            framework_id=fw.framework_id, name="A2", roles=["web", "batch"], **MULTI
        )
        await fw.bus.publish(T.inbound("framework", "framework"), update)
        error = await fw.inbox.wait_for(Error)
        assert (error.about, error.code) == ("UpdateFramework", "unavailable")

        # refused: what the framework is told it is, and what a new leader reads
        books = c.master.books.frameworks[fw.framework_id]
        assert (books.name, books.all_roles()) == ("A", ["web"])
        assert c.master.allocator.clients.roles(fw.framework_id) == ["web"]
