"""When ZooKeeper ends the leader's session, as a third client sees it (for a failover's
timeline: the old leader's session expiring is the part of the election nobody may cut).

The leader's election node is ephemeral: ZooKeeper deletes it when the session expires,
and a watch on it fires then. Kazoo calls the watch on its own thread, which only notes
the wall clock; the benchmark reads it after the election.
"""

from __future__ import annotations

import asyncio
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType, WatchedEvent


class ElectionWatch:
    def __init__(self, hosts: str, election: str) -> None:
        self.client = KazooClient(hosts=hosts, timeout=10.0)
        self.election = election  # the Lock recipe's path: its lowest node leads
        self.leader_gone_at: float | None = None  # the wall clock

    async def watch_leader(self) -> str:
        """Watch the leading node (the lowest); its name."""
        await asyncio.to_thread(self.client.start, 30)
        return await asyncio.to_thread(self._watch)

    def _watch(self) -> str:
        nodes = self.client.get_children(self.election)
        leading: str = min(nodes, key=lambda n: n[-10:])  # (the recipe's sequence number)
        if self.client.exists(f"{self.election}/{leading}", watch=self._fired) is None:
            self.leader_gone_at = time.time()
        return leading

    def _fired(self, event: WatchedEvent) -> None:
        if event.type == EventType.DELETED and self.leader_gone_at is None:
            self.leader_gone_at = time.time()

    async def close(self) -> None:
        await asyncio.to_thread(self.client.stop)
        await asyncio.to_thread(self.client.close)
