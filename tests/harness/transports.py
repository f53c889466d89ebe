"""Both transports a party may speak: the MQTT bus on a real broker and the in-memory one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from protocol.tooling.brokers import EmbeddedBroker
from protocol.transport.base import Connector
from protocol.transport.bus import MqttConnector
from protocol.transport.memory import MemoryBroker


@pytest.fixture(params=["mqtt", "memory"])
async def connector(request: pytest.FixtureRequest) -> AsyncIterator[Connector]:
    """No credentials: anyone may publish anything (each test names its own topics)."""
    if request.param == "memory":
        yield MemoryBroker().connector(None)
        return
    broker = EmbeddedBroker()
    await broker.start()
    try:
        yield MqttConnector(broker.url)
    finally:
        await broker.stop()
