"""Shared fixtures: real brokers on free loopback ports."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol import logs
from protocol.tooling.brokers import EmbeddedBroker, MosquittoBroker

sys.path.insert(0, str(Path(__file__).parent))  # tests/strategies.py and helpers

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
