"""What a newcomer meets first (#47): a party started before its broker or its master
says what it waits for, at the default log level, within seconds and again while it
waits; an operator's command with no broker says the broker cannot be reached, at once;
a second connection under one principal is named as such on both sides, and the first
stops instead of taking the principal back again and again. Real brokers, real
processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
import structlog
from click.testing import CliRunner

from cluster.cli import main
from cluster.local.secure import provision
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker, MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.transport.aio import within
from protocol.transport.base import ConnectedElsewhere
from protocol.transport.bus import Bus
from protocol.transport.reconnects import SHORT, Reconnects

from conftest import need_mosquitto

CLUSTER = "first"
STARTUP = 30.0  # seconds a process may take to import and start on a loaded machine


class Process:
    """A `drfmesos` process at its default log level, its JSON log lines read as they
    come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self.text: list[str] = []

    async def next_line(self, timeout: float) -> dict[str, Any] | None:
        """The next log line (None at the end of the output)."""
        assert self.proc.stdout is not None
        while True:
            raw = await within(self.proc.stdout.readline(), timeout)
            if not raw:
                return None
            text = raw.decode(errors="replace").rstrip()
            self.text.append(text)
            with contextlib.suppress(ValueError):
                line = json.loads(text)
                if isinstance(line, dict):
                    self.lines.append(line)
                    return line

    async def wait_for(self, event: str, timeout: float) -> dict[str, Any]:
        """The next line with this event (after those already read)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = await self.next_line(max(left, 0.01))
            except TimeoutError:
                line = None
            if line is None or left <= 0:
                raise AssertionError(f"no {event} in {timeout:g} s:\n" + "\n".join(self.text))
            if line.get("event") == event:
                return line

    def said(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == event]


@contextlib.asynccontextmanager
async def drfmesos(*args: str) -> AsyncIterator[Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cluster", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        yield Process(proc)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await within(proc.communicate(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def slave_args(url: str, work: Path, *more: str) -> list[str]:
    return [
        "slave", "--broker", url, "--cluster", CLUSTER, "--work-dir", str(work),
        "--resources", "cpus:1;mem:256", "--isolation", "posix", *more,
    ]  # fmt: skip


async def test_a_slave_started_before_its_broker_and_its_master_says_what_it_waits_for(
    tmp_path: Path,
) -> None:
    """Within seconds, and every 10 s after: the broker's address and what the attempt
    met; then, once the broker is there, that no master answers; then registered."""
    need_mosquitto()
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    async with drfmesos(*slave_args(url, tmp_path / "slave")) as slave:
        first = await slave.wait_for("bus.waiting_for_broker", STARTUP)
        assert first["level"] == "warning"
        assert first["waited"] <= 5
        assert f"cannot reach the broker at {url}: connection refused" in first["detail"]
        again = await slave.wait_for("bus.waiting_for_broker", 30)
        assert 8 <= again["waited"] - first["waited"] <= 15  # (a modest interval)
        broker = MosquittoBroker(port=port)
        await broker.start()
        try:
            connected = await slave.wait_for("bus.connected", 30)
            assert connected["level"] == "warning"  # (it closes what was said at warning)
            waiting = await slave.wait_for("slave.waiting_for_master", 30)
            assert waiting["waited"] <= 5
            assert f"no master of cluster {CLUSTER!r}" in waiting["detail"]
            master = (
                "master", "--broker", url, "--cluster", CLUSTER, "--http", "127.0.0.1:0",
                "--work-dir", str(tmp_path / "master"),
            )  # fmt: skip
            async with drfmesos(*master):
                await slave.wait_for("slave.registered", 60)
        finally:
            await broker.stop()
            broker.cleanup()


async def test_a_master_started_before_its_broker_says_so(tmp_path: Path) -> None:
    port = free_port()
    master = (
        "master", "--broker", f"mqtt://127.0.0.1:{port}", "--cluster", CLUSTER,
        "--http", "127.0.0.1:0", "--work-dir", str(tmp_path / "master"),
    )  # fmt: skip
    async with drfmesos(*master) as process:
        said = await process.wait_for("bus.waiting_for_broker", STARTUP)
        assert said["waited"] <= 5
        assert f"nothing listens at 127.0.0.1:{port}" in said["detail"]


async def test_a_framework_started_before_its_master_says_so(
    mosquitto: MosquittoBroker,
) -> None:
    framework = (
        "framework", "command", "--broker", mosquitto.url.url, "--cluster", CLUSTER,
        "--name", "early", "--cmd", "true",
    )  # fmt: skip
    async with drfmesos(*framework) as process:
        said = await process.wait_for("framework.waiting_for_master", STARTUP)
        assert said["level"] == "warning"
        assert said["waited"] <= 5
        assert f"no master of cluster {CLUSTER!r}" in said["detail"]


@pytest.mark.parametrize(
    "command",
    [["state"], ["weights", "list"], ["teardown", "fw-1"], ["quota", "set", "r", "--limit",
     "cpus:1"], ["slaves", "gone", "s-1"], ["events"], ["why", "fw-1"],
     ["why", "fw-1", "--as", "framework"]],
)  # fmt: skip
def test_an_operators_command_without_a_broker_says_so_at_once(command: list[str]) -> None:
    url = f"mqtt://127.0.0.1:{free_port()}"
    began = time.monotonic()
    result = CliRunner().invoke(main, [*command, "--broker", url])
    took = time.monotonic() - began
    assert result.exit_code == 1
    said = result.output
    assert f"cannot reach the broker at {url}: connection refused" in said
    assert "master" not in said  # (it used to blame the master and the principal)
    assert "principal" not in said
    assert took < 3, f"{took:.1f} s"


async def test_an_operators_command_with_a_broker_but_no_master_says_that(
    mosquitto: MosquittoBroker,
) -> None:
    url = mosquitto.url.url
    async with drfmesos("state", "--broker", url, "--cluster", CLUSTER, "--timeout", "1") as p:
        assert p.proc.stdout is not None
        said = (await within(p.proc.stdout.read(), STARTUP)).decode()
        assert await p.proc.wait() == 1
    assert f"the broker at {url} answers, but no master of cluster {CLUSTER!r}" in said
    assert "within 1 s" in said


async def test_one_slave_started_twice_is_taken_over_and_both_say_so(tmp_path: Path) -> None:
    """The same slave (its id, under its principal) started twice is one persistent MQTT
    session: the second connection closes the first. The first says it was taken over, by
    which principal, and stops (it used to take the principal back 255 times in 30 s,
    logged as `disconnected`); the second says it took the principal over, and keeps it."""
    need_mosquitto()
    store = await asyncio.to_thread(provision, tmp_path / "auth", [("agent", "slave")])
    broker = MosquittoBroker(auth=store.path)
    await broker.start()
    try:
        url = f"mqtt://agent@127.0.0.1:{broker.url.port}"
        secret = ("--secret-file", str(store.secret_file("agent")))
        async with drfmesos(*slave_args(url, tmp_path / "one", *secret)) as first:
            await first.wait_for("bus.connected", STARTUP)
            # its connection long established (seconds of saying it waits for a master:
            # a connection the broker ends young may be the newcomer's, see reconnects)
            while (await first.wait_for("slave.waiting_for_master", 30))["waited"] < SHORT:
                pass
            (tmp_path / "two").mkdir()  # (the same slave: its id, in another work dir)
            (tmp_path / "two" / "slave_id").write_text((tmp_path / "one" / "slave_id").read_text())
            async with drfmesos(*slave_args(url, tmp_path / "two", *secret)) as second:
                gave_up = await first.wait_for("bus.taken_over", STARTUP + 30)
                while gave_up["level"] != "error":
                    gave_up = await first.wait_for("bus.taken_over", 30)
                assert "principal agent was taken over by another connection" in gave_up["detail"]
                assert "this one gives up" in gave_up["detail"]
                assert await within(first.proc.wait(), 30) == 1  # it stopped, and said why
                assert len(first.said("bus.connected")) <= 4  # not hundreds of reconnects
                took = await second.wait_for("bus.took_over", 30)
                assert "took principal agent over" in took["detail"]
                assert second.proc.returncode is None
                assert not second.said("bus.taken_over") or all(
                    line["level"] == "warning" for line in second.said("bus.taken_over")
                )
    finally:
        await broker.stop()
        broker.cleanup()


async def test_frameworks_and_slaves_under_one_principal_run_side_by_side(
    tmp_path: Path,
) -> None:
    """A principal holds many connections, as Mesos lets many frameworks share one: a
    second framework (a second `drfmesos run`, a `why` asked beside them) and a second
    slave under one principal each get a client id of their own, and none closes
    another's connection (the username as client id made each newcomer stop the one
    before)."""
    need_mosquitto()
    store = await asyncio.to_thread(
        provision, tmp_path / "auth", [("team", "framework"), ("agent", "slave")]
    )
    broker = MosquittoBroker(auth=store.path)
    await broker.start()
    try:
        url = f"mqtt://team@127.0.0.1:{broker.url.port}"
        framework = (
            "framework", "command", "--broker", url, "--cluster", CLUSTER, "--cmd", "true",
            "--secret-file", str(store.secret_file("team")),
        )  # fmt: skip
        agent = f"mqtt://agent@127.0.0.1:{broker.url.port}"
        secret = ("--secret-file", str(store.secret_file("agent")))
        async with (
            drfmesos(*framework, "--name", "one") as first,
            drfmesos(*slave_args(agent, tmp_path / "s1", *secret)) as slave_one,
        ):
            await first.wait_for("framework.waiting_for_master", STARTUP)
            await slave_one.wait_for("slave.waiting_for_master", STARTUP)
            async with (
                drfmesos(*framework, "--name", "two") as second,
                drfmesos(*slave_args(agent, tmp_path / "s2", *secret)) as slave_two,
            ):
                await second.wait_for("framework.waiting_for_master", STARTUP)
                await slave_two.wait_for("slave.waiting_for_master", STARTUP)
                # all long past a takeover's first sign (reconnects.SHORT), still there
                fw, sl = "framework.waiting_for_master", "slave.waiting_for_master"
                for party, event in ((first, fw), (second, fw), (slave_one, sl), (slave_two, sl)):
                    while (await party.wait_for(event, 30))["waited"] < 2 * SHORT:
                        pass
                for party in (first, second, slave_one, slave_two):
                    assert party.proc.returncode is None
                    assert not party.said("bus.taken_over")
                    assert len(party.said("bus.connected")) == 1
    finally:
        await broker.stop()
        broker.cleanup()


@pytest.mark.parametrize("kind", ["embedded", "mosquitto"])
async def test_one_client_id_twice_the_last_keeps_it_on_either_broker(kind: str) -> None:
    """The embedded broker (amqtt) closes the connection taken over as mosquitto does (it
    used to leave it open and deaf); the bus of the first gives up, the second keeps it."""
    if kind == "mosquitto":
        need_mosquitto()
    broker: EmbeddedBroker | MosquittoBroker = (
        EmbeddedBroker() if kind == "embedded" else MosquittoBroker()
    )
    await broker.start()
    url: BrokerURL = broker.url
    try:
        first = Bus(url, name="first", client_id="one-id")
        second = Bus(url, name="second", client_id="one-id")
        await first.start()
        try:
            await second.start()
            await within(first.gave_up.wait(), 30)
            assert isinstance(first.refused, ConnectedElsewhere)
            assert "client id one-id was taken over" in str(first.refused)
            await second.wait_connected(30)
            assert not second.gave_up.is_set()
        finally:
            await second.close()
            await first.close()
    finally:
        await broker.stop()
        if isinstance(broker, MosquittoBroker):
            broker.cleanup()


@pytest.mark.parametrize("age", [0.5, 3600.0])
def test_of_two_connections_taking_a_principal_from_each_other_the_first_gives_up(
    age: float,
) -> None:
    """Each reconnect closes the other's connection, so their ends alternate: the first
    connection's end (young or long established) comes first, and it gives up first,
    whatever the delays; the other's last connection lasts, and says it took over."""
    now = [0.0]
    url = BrokerURL.parse("mqtt://agent:secret@127.0.0.1:1883")
    with structlog.testing.capture_logs() as said:
        log = structlog.get_logger()
        first, second = (Reconnects(log, url, "agent", lambda: now[0]) for _ in range(2))
        opened = {first: first.opened(), second: 0.0}
        first.connected()
        now[0] += age
        closed, other = first, second  # the second's connect closes the first's connection
        opened[second] = second.opened()
        second.connected()
        for _ in range(10):
            outcome = closed.ended(aiomqtt.MqttError("closed"), None)
            if not isinstance(outcome, float):
                break
            now[0] += outcome
            opened[closed] = closed.opened()  # ... and its reconnect the other's
            closed.connected()
            closed, other = other, closed
        now[0] += SHORT
        other.held(opened[other])
        closed.held(opened[closed])  # (closed: says nothing)
    assert closed is first
    assert isinstance(outcome, ConnectedElsewhere)
    assert "principal agent was taken over by another connection" in str(outcome)
    assert [e["event"] for e in said].count("bus.took_over") == 1
