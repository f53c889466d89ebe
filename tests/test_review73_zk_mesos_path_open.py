"""Review 73: with ZooKeeper credentials, the Mesos clients' path (`--zk-mesos-path`,
`/mesos`) made before them (or by anyone before the first leader) stays writable by
anyone, and nothing says so.

docs/how-to/high-availability.md: "Only the leader's MasterInfo for Mesos clients ... is
readable by anyone", and "A path made before [credentials] stays open, and the master
warns (`zookeeper.path_open`) at every start". The warning (`ZkCandidate._check_access`)
looks at the registry's path alone. `/mesos` is made once (`makepath`) and kept: a cluster
that ran without credentials left it open to anyone, as does anyone who reaches ZooKeeper
before the first leader publishes there. Whoever reaches ZooKeeper may then take the
leader's node away and put its own `json.info_0000000000` there, persistent: every Mesos
client (pymesos, a Mesos scheduler library) takes the lowest node for the leader, so every
tenant's Mesos framework is sent to the intruder's address, and subscribes there with its
credentials (HTTP basic auth), for as long as the node stays; the masters go on, saying
nothing.

What an operator relies on: what credentials protect, they protect, and what they do not,
the master says at start, as it says of the registry's path.
"""

from __future__ import annotations

import json

import structlog

from master.ha.zookeeper import ZkCandidate, ZkURL
from master.mesos_api.leader_info import info_for, mesos_leader_info

from conftest import need_zookeeper

FORGED = {"id": "intruder", "hostname": "evil.example", "port": 5050}


async def test_a_mesos_path_open_to_anyone_is_closed_or_warned_of() -> None:
    need_zookeeper()
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    from cluster.testing.zookeeper import ZooKeeperServer

    async with ZooKeeperServer() as zk:
        # the cluster ran without credentials once: its leader published at /mesos
        before = ZkCandidate(ZkURL.parse(f"zk://{zk.hosts}/drfmesos"), "c", {})
        await before.campaign()
        info = mesos_leader_info(before, "/mesos")
        assert info is not None
        await info.publish(info_for("m0", "http://127.0.0.1:5050/"))
        await info.withdraw()
        await before.close()

        # now with credentials (and on a new registry path, as the docs advise)
        url = ZkURL.parse(f"zk://master:pw-{zk.port}@{zk.hosts}/drfmesos2")
        leader = ZkCandidate(url, "c", {"master_id": "m1"})
        intruder = KazooClient(hosts=zk.hosts)  # no credentials
        try:
            with structlog.testing.capture_logs() as said:
                await leader.campaign()
                info = mesos_leader_info(leader, "/mesos")
                assert info is not None
                await info.publish(info_for("m1", "http://127.0.0.1:5050/"))
            warned = [
                line
                for line in said
                if line["event"] == "zookeeper.path_open" and "/mesos" in str(line)
            ]
            intruder.start(timeout=15)
            forged = None
            try:
                for node in intruder.get_children("/mesos"):
                    intruder.delete(f"/mesos/{node}")
                forged = intruder.create("/mesos/json.info_0000000000", json.dumps(FORGED).encode())
            except NoAuthError:
                pass
            lowest = min(intruder.get_children("/mesos"))
            leader_seen = json.loads(intruder.get(f"/mesos/{lowest}")[0])["id"]
            assert forged is None or warned, (
                f"an intruder without credentials replaced the leader's MasterInfo at /mesos "
                f"(Mesos clients now find {leader_seen!r}), and the master said nothing of "
                f"the path being open"
            )
        finally:
            intruder.stop()
            intruder.close()
            await leader.close()
