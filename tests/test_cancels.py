"""A cancelled party stops. On Python 3.11, `asyncio.wait_for` loses a cancel that comes in
the loop turn its step finishes, and the cancelled task runs on: a slave fleet stopped while
its slave waited for a SUBACK never ended (its test hung until its timeout, in CI)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.aio import within
from protocol.transport.mqtt_client import mqtt_client, mqtt_subscribe


async def ran_on(waiting: asyncio.Task[None]) -> bool:
    """Whether `waiting`, cancelled, went on past its wait (it sleeps a long time then)."""
    await asyncio.wait({waiting}, timeout=5)
    went_on = not waiting.cancelled()
    waiting.cancel()  # (one that went on is not left sleeping past its test)
    await asyncio.wait({waiting}, timeout=5)
    return went_on


async def test_a_cancel_that_comes_with_the_result_is_not_lost() -> None:
    answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        await within(answer, 10)
        await asyncio.sleep(3600)  # what a task that lost its cancel would go on to do

    waiting = asyncio.create_task(waits())
    await asyncio.sleep(0)  # one turn: it waits (the point is the turn)
    answer.set_result(1)
    waiting.cancel()  # in the same turn as its answer: the worst moment
    assert not await ran_on(waiting)


async def test_within_gives_the_result_or_times_out() -> None:
    assert await within(asyncio.sleep(0, "done"), 1) == "done"
    assert await within(asyncio.sleep(0, "done"), None) == "done"
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.05)


async def test_a_subscribe_cancelled_as_its_suback_arrives_is_cancelled(
    mosquitto: MosquittoBroker,
) -> None:
    """On a real broker: the cancel comes in the very callback that hands the SUBACK over."""
    async with mqtt_client(
        mosquitto.url, "canceller", will=None, persistent=False, keepalive=30
    ) as client:
        waiting: asyncio.Task[None] | None = None
        handed_over = client._client.on_subscribe

        def on_suback(*args: Any) -> None:
            handed_over(*args)
            assert waiting is not None
            waiting.cancel()

        client._client.on_subscribe = on_suback

        async def subscribes() -> None:
            await mqtt_subscribe(client, "some/topic", 1)
            await asyncio.sleep(3600)

        waiting = asyncio.create_task(subscribes())
        assert not await ran_on(waiting)
