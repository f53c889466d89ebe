"""A SIGTERM stops a master process, promptly and cleanly, whatever its leadership is doing:
real masters on a real ZooKeeper (cluster.testing.ha), cut off from it at the worst moment,
the leader's term just ended, when every ZooKeeper call would wait for a connection."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from cluster.testing.ha import HACluster, HAConfig
from master.ha.leadership import Term, lead
from master.ha.registry import MemoryStore
from protocol.transport.aio import within

from conftest import need_mosquitto, need_zookeeper

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent

# kazoo gives up a connection attempt within the session timeout: past that, a stop is late
PROMPT = 8.0


def events(path: Path) -> list[str]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines() if line[:1] == "{"]


async def until_logged(path: Path, event: str, timeout: float = 20.0) -> None:
    """The parties are processes: their logs are what can be waited on."""
    deadline = time.monotonic() + timeout
    while event not in await asyncio.to_thread(events, path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never logged {event}")
        await asyncio.sleep(0.05)


async def test_sigterm_stops_masters_cut_off_from_zookeeper_as_their_term_ends(
    tmp_path: Path,
) -> None:
    need_mosquitto()
    need_zookeeper()
    config = HAConfig(masters=2, slaves=0, frameworks=0, zk_links=True, zk_session_timeout=3.0)
    async with HACluster(tmp_path, config) as ha:
        await ha.wait_for_leader(timeout=60)
        leader = ha.leader_name()
        assert leader is not None
        (standby,) = set(ha.links) - {leader}
        leader_log = ha.parties[leader].log_path
        await until_logged(ha.parties[standby].log_path, "leadership.campaigning")
        for link in ha.links.values():
            link.cut = True  # both still reach the broker; neither reaches ZooKeeper
        await until_logged(leader_log, "leadership.lost")
        before = len(events(leader_log))

        for name in (leader, standby):
            ha.parties[name].proc.send_signal(signal.SIGTERM)
        for name in (leader, standby):
            proc = ha.parties[name].proc
            try:
                await within(proc.wait(), PROMPT)
            except TimeoutError:
                raise AssertionError(f"{name} still runs {PROMPT} s after SIGTERM") from None
            assert proc.returncode == 0, name

        logged = events(leader_log)
        assert "leadership.campaigning" not in logged[before:]  # not on as a standby
        # its loops and its HTTP API ended before it did, however the two raced
        assert logged.count("master.stopped") == logged.count("master.started") == 1
        assert logged.index("master.stopped") > logged.index("leadership.lost")


async def test_sigterm_stops_a_master_that_never_reached_zookeeper(tmp_path: Path) -> None:
    """Nothing listens where --zk points: the master is still connecting when told to stop."""
    from protocol.tooling.ports import free_port

    log = tmp_path / "master.log"
    with log.open("w") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cluster", "master", "--http", "off",
            "--zk", f"zk://127.0.0.1:{free_port()}/drfmesos",
            "--broker", f"mqtt://127.0.0.1:{free_port()}",
            stdout=out, stderr=out, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
        )  # fmt: skip
    try:
        await until_logged(log, "leadership.campaigning")
        proc.send_signal(signal.SIGTERM)
        try:
            await within(proc.wait(), PROMPT)
        except TimeoutError:
            raise AssertionError(f"still runs {PROMPT} s after SIGTERM") from None
        assert proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


# -- the same rule in process, at the two moments a cancel used to be lost -------------------


class FakeBus:
    def __init__(self, connects: bool) -> None:
        self.connects = connects
        self.epoch = 0
        self.may_reconnect: object = None
        self.gave_up = asyncio.Event()
        self.cancelled_while_connecting = asyncio.Event()
        self.let_go = asyncio.Event()

    async def start(self, timeout: float | None = None) -> None:
        if self.connects:
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # as aiomqtt may: wind down before giving in
            self.cancelled_while_connecting.set()
            await self.let_go.wait()
            raise

    async def close(self, abandon: bool = False) -> None:
        pass


class FakeCandidate:
    def __init__(self) -> None:
        self.terms: list[Term] = []
        self.campaigned = asyncio.Event()

    async def campaign(self) -> Term:
        self.terms.append(Term(len(self.terms) + 1, MemoryStore()))
        self.campaigned.set()
        return self.terms[-1]

    async def still_leads(self) -> bool:
        return True

    async def resign(self) -> None:
        pass

    async def close(self) -> None:
        pass


async def test_a_cancel_during_the_terms_stop_lets_it_finish_and_ends_the_campaign() -> None:
    candidate, stopping, stopped = FakeCandidate(), asyncio.Event(), asyncio.Event()
    release = asyncio.Event()

    async def serve(_bus: object, _term: Term) -> Callable[[], Awaitable[None]]:
        async def stop() -> None:
            stopping.set()
            await release.wait()  # the master's loops winding down
            stopped.set()

        return stop

    leading = asyncio.create_task(lead(candidate, lambda: FakeBus(True), serve))  # type: ignore[arg-type]
    await candidate.campaigned.wait()
    candidate.terms[0].lost.set()
    await stopping.wait()
    leading.cancel()  # SIGTERM, as the term ends
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await leading
    assert stopped.is_set()
    assert len(candidate.terms) == 1


async def test_a_cancel_while_a_lost_terms_bus_gives_up_connecting_is_not_swallowed() -> None:
    candidate, bus = FakeCandidate(), FakeBus(False)

    async def serve(_bus: object, _term: Term) -> Callable[[], Awaitable[None]]:
        raise AssertionError("never connected")

    leading = asyncio.create_task(lead(candidate, lambda: bus, serve))  # type: ignore[arg-type]
    await candidate.campaigned.wait()
    candidate.terms[0].lost.set()
    await bus.cancelled_while_connecting.wait()
    leading.cancel()  # SIGTERM, while the bus winds down
    bus.let_go.set()
    with pytest.raises(asyncio.CancelledError):
        await within(leading, 10)
    assert len(candidate.terms) == 1  # it did not campaign again as a standby
