"""Shared fixtures: real brokers on free loopback ports; and the order tests start in."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.testing.bytecode import keep_bytecode
from protocol import logs
from protocol.tooling.brokers import EmbeddedBroker, MosquittoBroker

sys.path.insert(0, str(Path(__file__).parent))  # the harness (tests/harness/), task_python

logs.configure("warning", json=True)

HAVE_MOSQUITTO = bool(shutil.which("mosquitto") or os.access("/usr/sbin/mosquitto", os.X_OK))


def need_zookeeper() -> None:
    """As need_mosquitto, for Debian's zookeeper (the HA tests)."""
    from cluster.testing.zookeeper import zookeeper_available

    why = zookeeper_available()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{why}; .ci/run installs it with apt")
        pytest.skip(why)


def need_mosquitto() -> None:
    """Outside CI a machine without mosquitto skips its tests; in CI that is a failure."""
    if not HAVE_MOSQUITTO:
        if os.environ.get("CI"):
            pytest.fail("mosquitto is not installed; .ci/run installs it with apt")
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")


@pytest.fixture
async def mosquitto() -> AsyncIterator[MosquittoBroker]:
    need_mosquitto()
    broker = MosquittoBroker()
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
        broker.cleanup()


@pytest.fixture
async def embedded() -> AsyncIterator[EmbeddedBroker]:
    broker = EmbeddedBroker()
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


@pytest.fixture(params=["embedded", "mosquitto"])
async def broker(request: pytest.FixtureRequest) -> AsyncIterator[EmbeddedBroker | MosquittoBroker]:
    """Each test that takes `broker` runs once on amqtt and once on mosquitto."""
    if request.param == "mosquitto":
        need_mosquitto()
    b: EmbeddedBroker | MosquittoBroker = (
        EmbeddedBroker() if request.param == "embedded" else MosquittoBroker()
    )
    await b.start()
    try:
        yield b
    finally:
        await b.stop()
        if isinstance(b, MosquittoBroker):
            b.cleanup()


@pytest.fixture(autouse=True)
async def _no_error_left_in_the_loop() -> AsyncIterator[None]:
    """A test fails if something raised where nobody was waiting for it: a callback or a
    task whose exception only the loop saw (as asyncio logs "Exception in callback" and
    "Task exception was never retrieved"). Those are bugs a passing test would hide."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []

    def keep(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        errors.append(context)
        loop.default_exception_handler(context)

    loop.set_exception_handler(keep)
    yield
    loop.set_exception_handler(None)
    assert not errors, "errors only the event loop saw: " + "; ".join(
        f"{c.get('message')}: {c.get('exception')!r}" for c in errors
    )


# -- bytecode: the suite starts hundreds of Python processes (masters, slaves, frameworks,
# CLIs), each importing the project --------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Each process of the run (the xdist workers, and every process they start) keeps the
    bytecode of what it imports in one cache (`cluster.testing.bytecode`): else every
    process compiles the project again, about 0.3 CPU-s each, and each worker rewrites and
    compiles every test module again (about 7 CPU-s)."""
    if not hasattr(config, "workerinput"):  # (a worker inherits the controller's)
        keep_bytecode()


# -- running side by side (pytest-xdist, `-n 4 --dist loadgroup` in pyproject.toml) -------


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist the longest tests start first (`slow(seconds)`, or what tests/durations.json
    says they took), so that none begins near the end and holds the run past everyone else;
    the `timing` tests come last, in one xdist group (one worker, one after another), when
    little else is left to wait for."""
    for item in items:
        if item.get_closest_marker("timing"):
            item.add_marker(pytest.mark.xdist_group("timing"))
    workers = _workers(config)
    if workers < 2:
        return  # one process: the file order, as written
    units: dict[str, list[pytest.Item]] = {}  # what xdist hands a worker at once
    for item in items:
        group = item.get_closest_marker("xdist_group")
        units.setdefault(f"@{group.args[0]}" if group else item.nodeid, []).append(item)

    took = _durations()

    def seconds(unit: str) -> float:
        return sum(
            max(float(m.args[0]) if (m := i.get_closest_marker("slow")) else 0.0,
                took.get(i.nodeid, 0.0))
            for i in units[unit]
        )  # fmt: skip

    timing = ["@timing"] if "@timing" in units else []
    slow = sorted((u for u in units if seconds(u) > 0), key=seconds, reverse=True)
    slow = [u for u in slow if u not in timing]
    rest = [u for u in units if seconds(u) == 0 and u not in timing]
    # xdist gives each worker two units at the start, the second to run after the first:
    # the first `workers` slow ones each get a short one behind them, not another slow one
    order = slow[:workers] + rest[:workers] + slow[workers:] + rest[workers:]
    order += timing
    items[:] = [item for unit in order for item in units[unit]]


def _durations() -> dict[str, float]:
    """The tests of 3 s or more and how long they took, from a run of the whole suite under
    xdist (seconds, setup to teardown): a test not in it, or no longer as long, only starts
    in another order. Made again with `--durations=0` when the order goes stale."""
    path = Path(__file__).parent / "durations.json"
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def _workers(config: pytest.Config) -> int:
    """How many xdist workers run the tests (0 in one process: the workers collect, and
    xdist hands out tests in the order they collected them)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return int(workerinput["workercount"]) if workerinput else 0


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outside pytest-timeout's clock
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A `timing` test runs alone: once it is next, no other test starts on any worker, and
    it starts when those running have ended. Two flocks in the run's temp dir, which its
    workers share: every test passes the gate and holds the room shared; a timing test
    holds the gate, so that nobody else comes in, while it waits to hold the room alone.
    (They come last, so that they mostly wait for nothing.)"""
    if not hasattr(item.config, "workerinput"):
        yield
        return
    timing = item.get_closest_marker("timing") is not None
    run = item.config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
    with (run / "gate.lock").open("a") as gate, (run / "room.lock").open("a") as room:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if timing else fcntl.LOCK_SH)
        finally:
            if not timing:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(room, fcntl.LOCK_UN)
                fcntl.flock(gate, fcntl.LOCK_UN)
