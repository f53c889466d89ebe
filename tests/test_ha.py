"""Master high availability, with everything real: ZooKeeper, mosquitto, and every master,
slave and framework a process of its own (cluster.testing.ha). The frameworks journal what they
hear (frameworks/samples/journaled.py), so each test reads, task by task, what the
framework saw."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from benchmarks.common import percentile
from cluster.testing.ha import HACluster, HAConfig, books_balance, share_spread
from frameworks import Scheduler, SchedulerDriver
from frameworks.errors import DriverError
from master.http.models import Health
from protocol.transport.bus import Bus
from protocol.wire.codec import encode
from protocol.wire.messages import KillTask, SetQuota, State
from protocol.wire.resources import Resources

from conftest import need_mosquitto, need_zookeeper

pytestmark = pytest.mark.timeout(300)

LONG = "60-80"  # tasks that outlive the test: any end they reach is a loss


def running(state: State) -> int:
    return sum(1 for t in state.tasks if t.state.value == "TASK_RUNNING")


def settled(ha: HACluster, tasks: int, ids: set[str] | None = None) -> object:
    """A state from a master that has every framework back (with the same ids), every
    slave re-registered, and `tasks` tasks running."""

    def check(state: State) -> bool:
        active = {f.framework_id for f in state.frameworks if f.active}
        return (
            len(active) == ha.config.frameworks
            and (ids is None or active == ids)
            and state.recovering_slaves == 0
            and len(state.slaves) == ha.config.slaves
            and running(state) == tasks
        )

    return check


def log_time(path: Path, event: str, after: float = 0.0) -> float | None:
    """When a party's log first says `event` (wall clock, at or after `after`), if it does."""
    for line in path.read_text().splitlines():
        if f'"event": "{event}"' in line:
            stamp = json.loads(line)["timestamp"]
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            if when >= after:
                return when
    return None


@pytest.fixture
async def ha(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[HACluster]:
    need_mosquitto()
    need_zookeeper()
    config: HAConfig = request.param
    async with HACluster(tmp_path, config) as cluster:
        await cluster.wait_for_leader(timeout=60)
        yield cluster


KILLS = HAConfig(
    masters=3,
    slaves=2,
    frameworks=3,
    tasks_each=3,
    task="cpus:0.25;mem:32",
    task_duration=LONG,
    zk_session_timeout=3.0,
)


@pytest.mark.slow(22)
@pytest.mark.parametrize("ha", [KILLS], indirect=True)
async def test_killing_the_leader_loses_no_task_and_a_standby_leads_within_10s(
    ha: HACluster,
) -> None:
    state = await ha.wait_for_state(settled(ha, 9), timeout=60)
    ids = {f.framework_id for f in state.frameworks}
    tasks = {t.task_id for t in state.tasks}
    took = []
    for _ in range(4):
        leader = ha.leader
        name = ha.leader_name()
        assert leader is not None
        assert name is not None
        ha.kill(name)
        killed = time.monotonic()
        new = await ha.wait_for_leader(newer_than=leader.epoch, timeout=10)
        took.append(time.monotonic() - killed)
        assert new.master_id != leader.master_id
        await ha.restart(name)  # back as a standby
        # every framework back with its id, every slave with its tasks, nothing lost
        state = await ha.wait_for_state(settled(ha, 9, ids), timeout=30)
        assert {t.task_id for t in state.tasks} == tasks
        held, used = books_balance(state)
        assert held == used
        assert share_spread(state) < 0.01
    print(
        f"\nfailover after kill -9 of the leader: p50 {percentile(took, 50):.2f} s, "
        f"p99 {percentile(took, 99):.2f} s, mean {statistics.fmean(took):.2f} s "
        f"(ZooKeeper session timeout {ha.config.zk_session_timeout} s)"
    )
    assert max(took) < 10
    fates = ha.fates()
    assert {t for t, f in fates.items() if f.launched} == tasks  # nothing launched twice
    assert not [t for t, f in fates.items() if f.terminal]  # nothing ended, so none lost
    assert ha.doubles() == []


CUT = HAConfig(
    masters=2,
    slaves=1,
    frameworks=1,
    tasks_each=2,
    task="cpus:0.25;mem:32",
    task_duration=LONG,
    zk_session_timeout=3.0,
    zk_links=True,
)


@pytest.mark.parametrize("ha", [CUT], indirect=True)
async def test_a_leader_cut_off_from_zookeeper_stops_and_is_not_obeyed(ha: HACluster) -> None:
    state = await ha.wait_for_state(settled(ha, 2), timeout=60)
    old = ha.leader
    name = ha.leader_name()
    assert old is not None
    assert name is not None
    cut_at = time.time()
    ha.links[name].cut = True  # the leader still reaches the broker, not ZooKeeper

    new = await ha.wait_for_leader(newer_than=old.epoch, timeout=15)
    assert new.master_id != old.master_id
    log = ha.run_dir / "logs" / f"{name}.log"
    stepped_down = log_time(log, "leadership.lost")
    assert stepped_down is not None, "the cut-off leader never stepped down"
    # it stopped within its session timeout: before ZooKeeper could elect anyone else
    assert stepped_down - cut_at < ha.config.zk_session_timeout

    # What the deposed leader would still send carries its old epoch: the slave drops it.
    slave = state.slaves[0]
    victim = state.tasks[0]
    state = await ha.wait_for_state(settled(ha, 2), timeout=30)
    topic = ha.topics.slave(slave.principal, slave.slave_id)
    async with Bus(ha.broker.url, name="deposed") as bus:
        stale = encode(KillTask(framework_id=victim.framework_id, task_id=victim.task_id))
        await bus.publish_raw(topic, _with_epoch(stale, old.epoch))
    slave_log = next((ha.run_dir / "logs").glob("slave0.log"))
    await _until_logged(ha, slave_log, "bus.fenced")
    state = await ha.wait_for_state(settled(ha, 2), timeout=5)
    assert victim.task_id in {t.task_id for t in state.tasks if t.state.value == "TASK_RUNNING"}
    assert not [t for t, f in ha.fates().items() if f.terminal]

    # healed, the old leader comes back as a standby, and the new one keeps leading
    ha.links[name].cut = False
    await _until_logged(ha, log, "leadership.campaigning", after=stepped_down)
    assert ha.leader is not None
    assert ha.leader.epoch == new.epoch


def _with_epoch(encoded: bytes, epoch: int) -> bytes:
    """A message as a master of `epoch` sends it."""
    import msgpack

    envelope = msgpack.unpackb(encoded, raw=False)
    return msgpack.packb([*envelope[:4], epoch], use_bin_type=True)  # type: ignore[no-any-return]


async def _until_logged(ha: HACluster, path: Path, event: str, after: float = 0.0) -> None:
    """Wait until a party's log says `event` (after `after`); the parties are processes, so
    their logs are what can be waited on."""
    import asyncio

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        when = await asyncio.to_thread(log_time, path, event, after)
        if when is not None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path.name} never logged {event}")


LONE = HAConfig(
    masters=1,
    slaves=2,
    frameworks=2,
    tasks_each=2,
    task="cpus:0.25;mem:32",
    task_duration=LONG,
    slave_reregister_timeout=3.0,
    slave_resources="cpus:0.5;mem:256",  # two tasks each: both slaves run some
    lone=True,
)


class Nobody(Scheduler):
    pass


@pytest.mark.parametrize("ha", [LONE], indirect=True)
async def test_a_lone_master_restarted_on_its_work_dir_recovers_and_reports_missing_slaves(
    ha: HACluster,
) -> None:
    state = await ha.wait_for_state(settled(ha, 4), timeout=60)
    ids = {f.framework_id for f in state.frameworks}
    on = {s.slave_id: s.hostname for s in state.slaves}
    away = next(s for s, host in on.items() if host == "host1")
    stays = {t.task_id for t in state.tasks if t.slave_id != away}
    gone = {t.task_id for t in state.tasks if t.slave_id == away}
    assert stays
    assert gone

    # a quota set at run time is in the registry before it is answered
    async with Bus(ha.broker.url, name="ops", inbox=ha.topics.operator("ops")) as ops:
        await ops.publish(
            ha.topics.inbound("operator", "ops"),
            SetQuota(role="fw0", guarantee=Resources(cpus=0.25), limit=Resources(cpus=1)),
        )
    await ha.wait_for_state(lambda s: any(r.limit for r in s.roles), timeout=10)

    old = ha.leader
    assert old is not None
    ha.kill("master0")
    ha.kill("slave1")  # ... and one slave does not come back in time
    await ha.restart("master0")
    await ha.wait_for_leader(newer_than=old.epoch, timeout=30)

    # the same frameworks (ids, principals), the tasks of the slave that came back
    state = await ha.wait_for_state(
        lambda s: (
            {f.framework_id for f in s.frameworks if f.active} == ids
            and s.recovering_slaves == 0
            and {t.task_id for t in s.tasks if t.state.value == "TASK_RUNNING"} == stays
        ),
        timeout=30,
    )
    held, used = books_balance(state)
    assert held == used
    quota = next(r for r in state.roles if r.role == "fw0")
    assert (quota.guarantee, quota.limit) == (Resources(cpus=0.25), Resources(cpus=1))
    # the missing slave's tasks are reported lost, reason: slave removed
    await _until(lambda: all(ha.fates()[t].terminal for t in gone), timeout=40)
    for task in gone:
        assert ha.fates()[task].terminal == {"TASK_LOST"}
    assert not [t for t in stays if ha.fates()[t].terminal]

    # the registry kept who owns each framework: another principal cannot take one over
    intruder = SchedulerDriver(
        Nobody(),
        name="intruder",
        broker=ha.broker.url,
        cluster=ha.cluster,
        framework_id=next(iter(ids)),
    )
    with pytest.raises(DriverError, match="unknown framework"):
        await intruder.start(timeout=10)

    # the slave comes back after all: what its framework was told is lost stays dead
    await ha.restart("slave1")
    await _until_logged(ha, ha.run_dir / "logs" / "master0.log", "slave.task_already_ended")
    assert all(len(ha.fates()[t].terminal) == 1 for t in gone)


async def _until(condition: object, timeout: float) -> None:
    import asyncio

    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.2)


@pytest.mark.slow(150)
@pytest.mark.timeout(480)  # (two minutes of chaos, then every part's stop and the checks)
async def test_a_two_minute_chaos_soak_keeps_every_task_and_the_books(tmp_path: Path) -> None:
    from benchmarks.soak import soak

    need_mosquitto()
    need_zookeeper()
    report = await soak(minutes=2, every=4, seed=7, run_dir=tmp_path)
    from benchmarks.common import table

    print("\n" + table(["", "measured", "bound"], report.rows()))
    assert report.launched > 100
    assert report.one_end == report.launched
    assert report.never_ended == 0
    assert report.ran_twice == 0
    assert report.running_after_end == 0
    assert report.failovers
    assert max(report.failovers) < 10
    assert report.failovers_unfinished == 0
    assert report.balanced
    assert report.fair_after is not None


STANDBY = HAConfig(masters=2, slaves=0, frameworks=0, zk_session_timeout=3.0)


async def http_get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        return r.status, await r.text()


async def redirect_of(port: int) -> tuple[int, str]:
    """Mesos's /master/redirect as a client asks it: the status and where it points."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/master/redirect", allow_redirects=False) as r,
    ):
        return r.status, r.headers.get("Location", "")


async def answers(port: int) -> tuple[Health, str]:
    """A master's /health and /metrics, once it answers and knows who leads (a process
    just started, or a standby not yet in the election, knows no leader)."""
    for _ in range(400):
        try:
            health, metrics = await http_get(port, "/health"), await http_get(port, "/metrics")
        except OSError:
            await asyncio.sleep(0.05)  # still starting: its port is not open yet
            continue
        seen = Health.model_validate_json(health[1])
        if seen.leader:
            return seen, metrics[1]
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing on port {port} says who leads")


@pytest.mark.parametrize("ha", [STANDBY], indirect=True)
async def test_a_standby_answers_health_and_metrics_as_a_standby_and_leads_when_elected(
    ha: HACluster,
) -> None:
    leader = ha.leader_name()
    assert leader is not None
    (standby,) = set(ha.http_ports) - {leader}
    health, metrics = await answers(ha.http_ports[standby])
    assert health.status == "standby"
    assert not health.elected
    assert health.leader == f"127.0.0.1:{ha.http_ports[leader]}"
    assert "drfmesos_elected 0.0" in metrics
    to_leader = (307, f"//127.0.0.1:{ha.http_ports[leader]}")
    assert await redirect_of(ha.http_ports[standby]) == to_leader  # Mesos's, on a standby too
    assert await redirect_of(ha.http_ports[leader]) == to_leader
    health, metrics = await answers(ha.http_ports[leader])
    assert health.status == "ok"
    assert health.elected
    assert health.leader == f"127.0.0.1:{ha.http_ports[leader]}"  # one form on both sides
    assert "drfmesos_elected 1.0" in metrics

    old = ha.leader
    assert old is not None
    ha.kill(leader)
    await ha.wait_for_leader(newer_than=old.epoch, timeout=20)
    health, metrics = await answers(ha.http_ports[standby])  # it took the port over
    assert health.elected
    assert "drfmesos_elected 1.0" in metrics
    await ha.restart(leader)  # back, as a standby
    health, _ = await answers(ha.http_ports[leader])
    assert health.status == "standby"
    assert health.leader == f"127.0.0.1:{ha.http_ports[standby]}"
    assert await redirect_of(ha.http_ports[leader]) == (307, f"//{health.leader}")


async def test_a_master_gets_the_zookeeper_session_it_asks_for() -> None:
    """Mesos's 10 s by default: ZooKeeper's own cap (20 ticks, 5 s at the tests' 250 ms)
    cut it to 5 s, and a leader busy with 100,000 slaves' registrations stepped down when
    its connection went 3.3 s without an answer."""
    need_zookeeper()
    from cluster.testing.zookeeper import ZooKeeperServer
    from master.cli import master as master_command
    from master.ha.zookeeper import ZkCandidate, ZkURL

    default = next(p.default for p in master_command.params if p.name == "zk_session_timeout")
    assert default == 10.0
    async with ZooKeeperServer() as zk:
        candidate = ZkCandidate(ZkURL.parse(zk.url()), "c", {"master_id": "m"}, default)
        term = await candidate.campaign()
        try:  # (ZooKeeper's `cons` lists each connection's session timeout as `to=`)
            reader, writer = await asyncio.open_connection("127.0.0.1", zk.port)
            writer.write(b"cons")
            said = (await reader.read()).decode()
            writer.close()
            assert f"to={int(default * 1000)}," in said, said
            assert not term.lost.is_set()
        finally:
            await candidate.close()
