"""Review 73: with ZooKeeper credentials, a registry path someone else made first, open to
its maker by any scheme but `world`, is taken as the masters' own, unwarned.

`ZkCandidate._check_access` warns (`zookeeper.path_open`) only where the root's ACL gives
the `world` scheme more than READ, and looks at the root alone. Whoever reaches ZooKeeper
before the masters first start (a fresh ensemble, a new cluster name or path, as the docs
advise after a path made open) may make `/drfmesos/<cluster>` and its `registry` with an
ACL of another scheme that lets the masters in too (here `ip:127.0.0.1`, the host they
run on; `ip:0.0.0.0/0` is anyone). The masters then campaign and write their registry
there as if it were theirs alone, warning of nothing, while the intruder, holding every
permission on those parents, lists every registry key (frameworks' ids), deletes entries
(a framework's, a slave's: gone at the next failover), and plants its own (a framework or
slave the next leader loads).

What an operator relies on (docs/how-to/high-availability.md): with credentials "every
node a master makes under the path is its credentials' alone", and what is not, the
master says at start.
"""

from __future__ import annotations

import structlog

from master.ha.zookeeper import ZkCandidate, ZkURL

from conftest import need_zookeeper


async def test_a_registry_path_made_by_another_is_refused_or_warned_of() -> None:
    need_zookeeper()
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    from kazoo.security import make_acl

    from cluster.testing.zookeeper import ZooKeeperServer

    async with ZooKeeperServer() as zk:
        intruder = KazooClient(hosts=zk.hosts)  # no credentials
        intruder.start(timeout=15)
        squat = [make_acl("ip", "127.0.0.1", all=True)]  # (the masters' host: they get in)
        for path in ("/drfmesos", "/drfmesos/c", "/drfmesos/c/registry"):
            intruder.create(path, b"", acl=squat)
        url = ZkURL.parse(f"zk://master:pw-{zk.port}@{zk.hosts}/drfmesos")
        leader = ZkCandidate(url, "c", {"master_id": "m1"})
        try:
            with structlog.testing.capture_logs() as said:
                try:
                    term = await leader.campaign()
                except Exception as e:  # refused: as good as a warning (it says why)
                    refused: Exception | None = e
                else:
                    refused = None
                    await term.store.load()
                    await term.store.put("framework/f1", {"principal": "alice"})
            warned = [line for line in said if line["event"] == "zookeeper.path_open"]
            if refused is None:
                seen = intruder.get_children("/drfmesos/c/registry")
                deleted = []
                for key in seen:
                    try:
                        intruder.delete(f"/drfmesos/c/registry/{key}")
                        deleted.append(key)
                    except NoAuthError:
                        pass
                assert warned, (
                    f"the masters led on a registry path an intruder made (ACL {squat}) "
                    f"without a warning: the intruder lists its keys {seen} and deleted "
                    f"{deleted}"
                )
        finally:
            intruder.stop()
            intruder.close()
            await leader.close()
