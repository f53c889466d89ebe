"""Masters' ZooKeeper credentials (`--zk zk://USER:PASSWORD@HOST:PORT/path`, or `file://`
naming a file that holds it, as Mesos takes them): a tenant whose task reaches ZooKeeper
(the demo's compose network, a shared network of one's own) can neither read the
registry, nor write or delete it, nor join the election; Mesos clients still find the
leader's MasterInfo. Real ZooKeeper, real kazoo clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from master.ha.zookeeper import ZkURL

from conftest import need_zookeeper

SECRET = "s3cret:with@odd/chars"
QUOTED = "s3cret%3Awith%40odd%2Fchars"


def test_a_zk_url_carries_credentials_and_never_shows_the_password(tmp_path: Path) -> None:
    url = ZkURL.parse(f"zk://master:{QUOTED}@h1:2181,h2:2181/drfmesos")
    assert (url.hosts, url.path) == ("h1:2181,h2:2181", "/drfmesos")
    assert url.credentials == f"master:{SECRET}"
    assert SECRET not in repr(url)
    assert QUOTED not in repr(url)
    assert ZkURL.parse("zk://h1:2181/x").credentials is None
    with pytest.raises(ValueError, match="is not HOST:PORT") as bad:
        ZkURL.parse(f"zk://master:{QUOTED}@h1/drfmesos")  # (no port)
    assert QUOTED not in str(bad.value)
    assert "master:***@" in str(bad.value)
    with pytest.raises(ValueError, match="USER:PASSWORD"):
        ZkURL.parse("zk://master@h1:2181/drfmesos")

    held = tmp_path / "zk"
    held.write_text(f"zk://master:{QUOTED}@127.0.0.1:2181/p\n")
    assert ZkURL.from_flag(f"file://{held}") == ZkURL("127.0.0.1:2181", "/p", f"master:{SECRET}")
    held.write_text(f"zk://master:{QUOTED}@nohost/p")
    with pytest.raises(ValueError, match="is not HOST:PORT") as bad:
        ZkURL.from_flag(f"file://{held}")
    assert str(held) in str(bad.value)
    assert QUOTED not in str(bad.value)
    with pytest.raises(ValueError, match="No such file"):
        ZkURL.from_flag(f"file://{tmp_path}/missing")


async def test_with_credentials_nobody_else_reads_writes_or_joins_the_election() -> None:
    need_zookeeper()
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    from cluster.testing.zookeeper import ZooKeeperServer
    from master.ha.leadership import LeadershipError
    from master.ha.zookeeper import ZkCandidate
    from master.mesos_api.leader_info import info_for, mesos_leader_info

    async with ZooKeeperServer() as zk:
        url = ZkURL.parse(f"zk://master:{QUOTED}@{zk.hosts}/drfmesos")
        leader = ZkCandidate(url, "c", {"master_id": "m1"})
        term = await leader.campaign()
        await term.store.load()  # (as a master does first: it makes the registry's node)
        await term.store.put("framework/f1", {"principal": "alice", "secret": "x"})
        info = mesos_leader_info(leader, "/mesos")
        assert info is not None
        await info.publish(info_for("m1", "http://127.0.0.1:5050/"))

        intruders = [
            KazooClient(hosts=zk.hosts),  # no credentials
            KazooClient(hosts=zk.hosts, auth_data=[("digest", "master:guess")]),
        ]
        try:
            for intruder in intruders:
                intruder.start(timeout=15)
                root = "/drfmesos/c"
                entry = f"{root}/registry/framework%2Ff1"
                for call, args, kwargs in (
                    (intruder.get_children, (f"{root}/registry",), {}),
                    (intruder.get, (entry,), {}),
                    (intruder.set, (entry, b"forged"), {}),
                    (intruder.delete, (f"{root}/registry",), {"recursive": True}),
                    (intruder.create, (f"{root}/election/_c_0-lock-", b"{}"), {"sequence": True}),
                    (intruder.set, (f"{root}/epoch", b"1"), {}),
                    (intruder.create, (f"{root}/registry/slave%2Fs9", b"x"), {}),
                ):
                    with pytest.raises(NoAuthError):
                        call(*args, **kwargs)
                # what Mesos clients read, anyone reads (and nobody else writes there)
                (node,) = intruder.get_children("/mesos")
                data, _ = intruder.get(f"/mesos/{node}")
                assert json.loads(data)["id"] == "m1"
                with pytest.raises(NoAuthError):
                    intruder.set(f"/mesos/{node}", b"{}")
        finally:
            for intruder in intruders:
                intruder.stop()
                intruder.close()

        # a standby with the same credentials takes over and reads what the leader wrote
        await info.withdraw()
        await leader.close()
        standby = ZkCandidate(url, "c", {"master_id": "m2"})
        try:
            term = await standby.campaign()
            assert (await term.store.load())["framework/f1"]["principal"] == "alice"
        finally:
            await standby.close()

        # one with other credentials, or none, is told why, once, and never leads
        for other in ("master:wrong", None):
            given = f"{other}@" if other else ""
            stranger = ZkCandidate(ZkURL.parse(f"zk://{given}{zk.hosts}/drfmesos"), "c", {})
            try:
                with pytest.raises(LeadershipError) as refused:
                    await stranger.campaign()
                assert "refused access to /drfmesos/c" in str(refused.value)
                assert "wrong" not in str(refused.value)
            finally:
                await stranger.close()


async def test_credentials_on_a_path_made_open_are_warned_of() -> None:
    """A path made before credentials were given stays open to anyone: the master says so
    at start (and goes on: it is the operator's to close)."""
    need_zookeeper()
    import structlog

    from cluster.testing.zookeeper import ZooKeeperServer
    from master.ha.zookeeper import ZkCandidate

    async with ZooKeeperServer() as zk:
        open_first = ZkCandidate(ZkURL.parse(f"zk://{zk.hosts}/drfmesos"), "c", {})
        await open_first.campaign()
        await open_first.close()
        url = ZkURL.parse(f"zk://master:{QUOTED}@{zk.hosts}/drfmesos")
        later = ZkCandidate(url, "c", {})
        try:
            with structlog.testing.capture_logs() as said:
                await later.campaign()
        finally:
            await later.close()
    warned = {line["path"]: line for line in said if line["event"] == "zookeeper.path_open"}
    assert set(warned) == {
        "/drfmesos",
        "/drfmesos/c",
        "/drfmesos/c/election",
        "/drfmesos/c/epoch",  # (the registry's node is made by a leader's first read)
    }
    assert warned["/drfmesos/c/election"]["others"] == ["world:anyone"]
    assert SECRET not in str(said)
