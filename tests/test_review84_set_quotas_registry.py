"""Review 84: SetQuotas (Mesos's UPDATE_QUOTA) is all or none in the books, not in the
registry: its records are written one by one, and one refused leaves those before it
written. The operator is told the call failed and the master's quotas are unchanged, but
a new leader reads the registry and sets the quotas written."""

from __future__ import annotations

import contextlib
from typing import Any

from master.ha.registry import MemoryStore, Registry
from protocol.wire.messages import Error, SetQuota, SetQuotas
from protocol.wire.resources import Resources

from harness.helpers import Inbox
from harness.master import Cluster, T


class RefusingStore(MemoryStore):
    """A registry store that refuses the record of one key (the write of a batch that
    the store could not take)."""

    def __init__(self, refused: str) -> None:
        super().__init__()
        self.refused = refused

    async def put(self, key: str, value: Any) -> None:
        if key == self.refused:
            raise ConnectionError("ZooKeeper lost its quorum")
        await super().put(key, value)


async def test_quotas_refused_by_the_registry_leave_none_of_them_recorded() -> None:
    store = RefusingStore("quota/b")
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master(registry=Registry(store))
        ops = await stack.enter_async_context(
            c.connect(name="ops", inbox=T.outbox("operator", "ops"), will=None)
        )
        inbox = Inbox()
        await ops.subscribe(T.outbox("operator", "ops"), inbox)
        quotas = [
            SetQuota(role="a", guarantee=Resources(cpus=1), limit=Resources(cpus=2)),
            SetQuota(role="b", guarantee=Resources(cpus=1), limit=Resources(cpus=2)),
        ]
        await ops.publish(T.inbound("operator", "ops"), SetQuotas(quotas=quotas))
        error = await inbox.wait_for(Error)
        assert error.code == "unavailable"
        assert not c.master.allocator.quotas  # the books: none of them

        new_leader = Registry(store)  # what a new leader reads
        await new_leader.load()
        assert not new_leader.quotas
