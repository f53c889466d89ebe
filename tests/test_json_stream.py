"""Mesos's /master/state at a big cluster: its long lists are built as the answer is
written, the master's loop going round between runs of items (built in one go, 50,000
slaves' and 40,000 tasks' state held the loop 11 s), and the text is the same JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from master.mesos_api.json_stream import ITEMS_A_TURN, Lazy, dumps, stream_json


async def test_the_loop_goes_round_while_a_long_list_is_written() -> None:
    turns = 0  # loop turns another task saw

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    def slaves(n: int) -> Iterator[dict[str, object]]:
        for i in range(n):
            yield {"id": f"s{i}", "seen_turns": turns}

    def body() -> dict[str, object]:
        tasks = Lazy({"id": f"t{i}"} for i in range(3))
        frameworks = Lazy([{"id": "f", "tasks": tasks}])
        return {
            "version": "1.11.0",
            "slaves": Lazy(slaves(5 * ITEMS_A_TURN)),
            "frameworks": frameworks,
        }

    async def state(request: web.Request) -> web.StreamResponse:
        return await stream_json(request, body())

    app = web.Application()
    app.router.add_get("/master/state", state)
    async with TestClient(TestServer(app)) as client:
        beside = asyncio.create_task(other_work())
        try:
            answer = await client.get("/master/state")
            shown = await answer.json()
        finally:
            beside.cancel()
    assert answer.headers["Content-Type"].startswith("application/json")
    seen = [s["seen_turns"] for s in shown["slaves"]]
    assert len(seen) == 5 * ITEMS_A_TURN
    assert seen[-1] - seen[0] >= 4  # the other task ran between the runs of items
    assert shown["frameworks"] == [{"id": "f", "tasks": [{"id": "t0"}, {"id": "t1"}, {"id": "t2"}]}]
    assert shown["version"] == "1.11.0"


def test_dumps_writes_what_json_would_of_the_same_lists() -> None:
    eager = {"a": [1, {"b": [2, 3]}], "c": "x", "d": {"e": []}}
    lazy = {"a": Lazy(iter([1, {"b": Lazy(iter([2, 3]))}])), "c": "x", "d": {"e": Lazy([])}}
    assert json.loads(dumps(lazy)) == eager
    assert dumps(eager) == json.dumps(eager)
