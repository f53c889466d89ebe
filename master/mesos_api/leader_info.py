"""The leading master's MasterInfo in ZooKeeper, where Mesos clients look for it.

Mesos masters keep `json.info_<sequence>` nodes, ephemeral and sequential, each holding a
master's MasterInfo as JSON; the lowest sequence number is the leader. Clients such as
pymesos list the path's children and take the lowest one (skipping only `log_replicas`),
so nothing else may live there: the path is not the registry's (`--zk`), but a path of
its own (`--zk-mesos-path`, by default `/mesos`, the one those clients take for granted).
Only the leader writes its node, and takes it away when its term ends; a dead leader's
node goes with its ZooKeeper session, as its election node does, before anyone else is
elected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from typing import TYPE_CHECKING, Any

from protocol import logs
from protocol import mesos_json as mj

if TYPE_CHECKING:  # (kazoo is the `ha` extra's: imported only by masters that use --zk)
    from kazoo.client import KazooClient

    from master.ha.zookeeper import ZkURL

log = logs.get("mesos_leader_info")

DEFAULT_PATH = "/mesos"
PREFIX = "json.info_"


def info_for(master_id: str, web_ui: str) -> dict[str, Any]:
    """MasterInfo for a master serving HTTP at `web_ui` (`http://host:port/`)."""
    url = urllib.parse.urlsplit(web_ui)
    host = url.hostname or "127.0.0.1"
    return mj.master_info(master_id, host, url.port or 5050, host)


def path_clash(registry_path: str, mesos_path: str) -> str | None:
    """Why the registry's path (`--zk`) and the Mesos clients' (`--zk-mesos-path`) cannot
    be used together, or None. Mesos clients take the lowest child of theirs as the
    leader's MasterInfo, so no node of ours may sit in it, nor theirs in ours."""
    ours, theirs = registry_path.rstrip("/") or "/", mesos_path.rstrip("/") or "/"
    if ours == theirs or f"{ours}/".startswith(f"{theirs.rstrip('/')}/"):
        return (
            f"--zk's path {ours} is (or is under) {theirs}, where Mesos clients read the "
            f"leader's MasterInfo (--zk-mesos-path): the registry's nodes there would hide "
            f"it from them. Give the registry a path of its own, such as "
            f"zk://HOST:PORT/drfmesos (Mesos frameworks keep zk://HOST:PORT{theirs})"
        )
    if theirs.startswith(f"{ours.rstrip('/')}/"):
        return (
            f"--zk-mesos-path {theirs} is under the registry's path {ours}: the two must "
            f"be apart, such as --zk zk://HOST:PORT/drfmesos and --zk-mesos-path /mesos"
        )
    return None


class MesosLeaderInfo:
    def __init__(
        self, client: KazooClient, path: str = DEFAULT_PATH, url: ZkURL | None = None
    ) -> None:
        """`url`: the masters' ZooKeeper URL; with credentials, the nodes it makes are
        theirs to write and anyone's to read, since Mesos clients read them without any
        (Mesos's EVERYONE_READ_CREATOR_ALL), and a path anyone else may write to (made
        before the credentials, or by someone else: they could put a MasterInfo of their
        own lowest) is warned of."""
        self.client = client
        self.path = path.rstrip("/") or DEFAULT_PATH
        self.url = url
        self.acl = url.acl(world_readable=True) if url is not None else None
        self.node: str | None = None

    async def publish(self, info: dict[str, Any]) -> None:
        """Write this leader's node (a failure is logged: Mesos clients then do not
        find it, and the bus goes on)."""
        data = json.dumps(info).encode()
        try:
            if self.url is not None and self.url.credentials is not None:
                await asyncio.to_thread(self._warn_if_open)
            self.node = await asyncio.to_thread(
                self.client.create,
                f"{self.path}/{PREFIX}",
                data,
                acl=self.acl,
                ephemeral=True,
                sequence=True,
                makepath=True,
            )
        except Exception as e:  # (kazoo's errors, a connection lost meanwhile)
            log.error("mesos_info.publish_failed", path=self.path, error=repr(e))
            return
        log.info("mesos_info.published", node=self.node, pid=info.get("pid"))

    def _warn_if_open(self) -> None:
        from master.ha.zookeeper import warn_if_open

        assert self.url is not None
        if self.client.exists(self.path):
            acl, _ = self.client.get_acls(self.path)
            warn_if_open(self.url, self.path, acl, world_readable=True)

    async def withdraw(self) -> None:
        node, self.node = self.node, None
        if node is not None:
            with contextlib.suppress(Exception):  # (gone already: our session ended)
                await asyncio.to_thread(self.client.delete, node)


def mesos_leader_info(candidate: object, path: str) -> MesosLeaderInfo | None:
    """For a master elected in ZooKeeper (a ZkCandidate's client), else None."""
    client = getattr(candidate, "client", None)
    if client is None:
        return None
    return MesosLeaderInfo(client, path, getattr(candidate, "url", None))
