"""`drfmesos teardown NAME`: a newcomer gave the framework's name (as `drfmesos why`
takes), and read only 'unknown framework NAME'. Teardown takes an id, as Mesos's does;
the refusal now says so, and where the ids are."""

from __future__ import annotations

import asyncio
import contextlib

from click.testing import CliRunner

from cluster.cli import main
from master.config import MasterConfig
from master.master import Master
from protocol.tooling.brokers import EmbeddedBroker
from protocol.transport.bus import Bus
from protocol.wire.topics import Topics

CLUSTER = "names"


async def test_teardown_of_a_name_says_it_takes_an_id() -> None:
    broker = EmbeddedBroker()
    await broker.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            bus = await stack.enter_async_context(Bus(broker.url, name="master", persistent=True))
            master = Master(bus, Topics(CLUSTER), MasterConfig())
            await master.start()
            stack.push_async_callback(master.stop)
            args = ["teardown", "web", "--broker", broker.url.url, "--cluster", CLUSTER]
            done = await asyncio.to_thread(CliRunner().invoke, main, args)
    finally:
        await broker.stop()
    assert done.exit_code == 1, done.output
    assert "unknown framework web" in done.output
    assert "teardown takes a framework's id, not its name" in done.output
    assert "drfmesos state" in done.output
