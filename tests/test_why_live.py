"""Why a framework gets no offers, on a real cluster (mosquitto, a master and slaves as
processes, frameworks on the SDK): for each reason, `drfmesos why --json` and `GET
/api/v1/frameworks/{id}/why` both give it first, with its numbers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cluster.local.view import operator_call, wait_state
from frameworks import Resources, Scheduler, SchedulerDriver
from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import ClusterEvent, SetQuota
from protocol.wire.resources import Limit

from harness.helpers import eventually, live_cluster, running
from harness.schedulers import Declines, Fills, Ignores

CLUSTER = "whylive"
pytestmark = pytest.mark.slow(60)


@contextlib.asynccontextmanager
async def cluster(
    mosquitto: MosquittoBroker, tmp_path: Path, slaves: int = 2, *master_args: str
) -> AsyncIterator[str]:
    async with live_cluster(
        mosquitto.url, CLUSTER, tmp_path, ["--allocation-interval", "0.1", *master_args],
        slaves=slaves,
    ):  # fmt: skip
        state = await wait_state(mosquitto.url, CLUSTER, lambda s: bool(s.web_ui))
        yield state.web_ui


def framework(
    mosquitto: MosquittoBroker, scheduler: Scheduler, name: str, **kw: Any
) -> contextlib.AbstractAsyncContextManager[SchedulerDriver]:
    driver = SchedulerDriver(scheduler, name=name, broker=mosquitto.url, cluster=CLUSTER, **kw)
    return running(driver)


async def asked(mosquitto: MosquittoBroker, web: str, framework: str) -> dict[str, Any]:
    """The answer of `drfmesos why --json` (a process, as an operator), once the HTTP API's
    is the same: the same reasons, in the same order, with the same numbers. The two are
    asked one after the other, so a cluster still moving (a rate-limited call handled in
    between) may answer each differently: they are asked again, a few times, until they
    agree; a number that always moves between them, a filter's seconds left, is not
    compared."""
    for _ in range(10):
        cli, http = await _cli_why(mosquitto, framework), await _http_why(web, framework)
        if _same(cli, http):
            return cli
    assert [r["code"] for r in http["reasons"]] == [r["code"] for r in cli["reasons"]]
    for a, b in zip(cli["reasons"], http["reasons"], strict=True):
        assert a["numbers"] == b["numbers"] | _moving(a, b), a["code"]
    return cli


async def _cli_why(mosquitto: MosquittoBroker, framework: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "cluster", "why", framework, "--json",
               "--broker", str(mosquitto.url), "--cluster", CLUSTER]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    answer: dict[str, Any] = json.loads(out)
    return answer


async def _http_why(web: str, framework: str) -> dict[str, Any]:
    return await asyncio.to_thread(_get, f"{web}api/v1/frameworks/{framework}/why")


MOVING = ("until", "oldest_seconds")  # (time moves on between the two)


def _moving(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """`b`'s numbers that are allowed to differ, as `a` has them."""
    return {k: v for k, v in a["numbers"].items() if k in MOVING and k in b["numbers"]}


def _same(cli: dict[str, Any], http: dict[str, Any]) -> bool:
    if [r["code"] for r in cli["reasons"]] != [r["code"] for r in http["reasons"]]:
        return False
    return all(a["numbers"] == b["numbers"] | _moving(a, b)
               for a, b in zip(cli["reasons"], http["reasons"], strict=True))  # fmt: skip


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return body


def _post(url: str, call: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(call).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return body


def top(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["reasons"], answer
    first: dict[str, Any] = answer["reasons"][0]
    return first


async def quota(mosquitto: MosquittoBroker, role: str, **kw: Any) -> None:
    def done(e: ClusterEvent) -> bool:
        return e.kind == "quota" and e.detail.split(":", 1)[0] == role

    said = await operator_call(mosquitto.url, CLUSTER, SetQuota(role=role, **kw), done)
    assert said is None, said


# -- each reason ---------------------------------------------------------------------------------
async def test_no_slave(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path, 0) as web,
        framework(mosquitto, Ignores(), "alone") as driver,
    ):
        answer = await asked(mosquitto, web, driver.framework_id or "")
    assert top(answer)["code"] == "no-slave"
    assert top(answer)["numbers"] == {"slaves": 0, "connected": 0}


async def test_min_offer_fits_no_slave(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path) as web,
        framework(mosquitto, Ignores(), "wide", min_offer=[Resources(cpus=3, mem=64)]) as driver,
    ):
        answer = await asked(mosquitto, web, "wide")  # (by its name)
        # a Mesos v1 client reads the same beside GET_FRAMEWORKS (drfmesos's own call)
        call = {"type": "GET_FRAMEWORK_WHY",
                "get_framework_why": {"framework_id": {"value": driver.framework_id}}}  # fmt: skip
        mesos = await asyncio.to_thread(_post, f"{web}api/v1", call)
    assert mesos["type"] == "GET_FRAMEWORK_WHY"
    assert mesos["get_framework_why"]["reasons"] == answer["reasons"]
    reason = top(answer)
    assert reason["code"] == "min-offer-fits-no-slave"
    assert reason["numbers"]["short"] == {"cpus": 1.0}
    assert reason["numbers"]["largest"] == {"cpus": 2.0, "mem": 1024.0}
    assert reason["numbers"]["of"] == "total"
    assert answer["offered"] == []


async def test_task_fits_no_slave(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path) as web,
        framework(mosquitto, Declines(1.0), "tall") as driver,
    ):
        driver.request_resources([(Resources(cpus=1, mem=4096), 2)])
        await eventually(lambda: bool(driver.framework_id))
        await asyncio.sleep(0)  # (the Request is on its way; the answer below is after it)

        async def says() -> dict[str, Any]:
            return await asked(mosquitto, web, "tall")

        answer = await says()
        while top(answer)["code"] != "task-fits-no-slave":  # (the Request not there yet)
            answer = await says()
    reason = top(answer)
    assert reason["numbers"]["need"] == {"cpus": 1.0, "mem": 4096.0}
    assert reason["numbers"]["short"] == {"mem": 3072.0}


async def test_suppressed(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path) as web,
        framework(mosquitto, Declines(0.5), "shy") as driver,
    ):
        driver.suppress_offers()
        answer = await asked(mosquitto, web, "shy")
        while top(answer)["code"] != "suppressed":  # (the Suppress not there yet)
            answer = await asked(mosquitto, web, "shy")
    assert top(answer)["message"].startswith("it suppressed its offers")


async def test_declined_filter(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    scheduler = Declines(60.0)
    async with (
        cluster(mosquitto, tmp_path) as web,
        framework(mosquitto, scheduler, "picky"),
    ):
        state = await wait_state(mosquitto.url, CLUSTER, lambda s: s.offer_count == 0 and any(
            f.name == "picky" for f in s.frameworks))  # fmt: skip
        answer = await asked(mosquitto, web, "picky")
    reason = top(answer)
    assert reason["code"] == "declined-filter", (reason, state)
    until = reason["numbers"]["until"]
    assert len(until) == 2  # both slaves
    assert all(50 < left <= 60 for left in until.values())
    assert {o["slave_id"] for o in answer["offered"]} == set(until)  # offered, then declined


async def test_offers_outstanding(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path) as web,
        framework(mosquitto, Ignores(), "hoarder") as driver,
    ):
        await eventually(lambda: len(driver.offers) == 2)
        answer = await asked(mosquitto, web, "hoarder")
    reason = top(answer)
    assert reason["code"] == "offers-outstanding"
    assert reason["numbers"]["offers"] == 2
    # (the slaves offer ports:[31000-32000] each, as Mesos agents do)
    assert reason["numbers"]["resources"] == {"cpus": 4.0, "mem": 2048.0, "ports": 2002.0}
    assert len(answer["offered"]) == 2  # what and when
    assert all(o["seconds_ago"] >= 0 and o["at"] > 0 for o in answer["offered"])


async def test_quota_limit(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with cluster(mosquitto, tmp_path) as web:
        await quota(mosquitto, "capped", limit=Limit(cpus=1, mem=512))
        async with framework(mosquitto, Ignores(), "capped") as driver:
            await eventually(lambda: len(driver.offers) == 1)
            answer = await asked(mosquitto, web, "capped")
    reason = top(answer)
    assert reason["code"] == "quota-limit"
    assert reason["numbers"]["role"] == "capped"
    assert reason["numbers"]["limit"] == {"cpus": 1.0, "mem": 512.0}
    # (and all of a slave's ports, which the limit does not name)
    assert reason["numbers"]["held"] == {"cpus": 1.0, "mem": 512.0, "ports": 1001.0}


async def test_role_frozen_by_a_zero_limit(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with cluster(mosquitto, tmp_path) as web:
        await quota(mosquitto, "frozen", limit=Limit(cpus=0))
        async with framework(mosquitto, Ignores(), "frozen"):
            answer = await asked(mosquitto, web, "frozen")
    assert top(answer)["code"] == "role-not-allowed"
    assert top(answer)["numbers"] == {"role": "frozen", "limit": {"cpus": 0.0}}


async def test_held_for_guarantee(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with cluster(mosquitto, tmp_path) as web:
        # another role is guaranteed the whole cluster (and has no framework yet: Mesos
        # holds an unmet guarantee back all the same)
        await quota(mosquitto, "promised", guarantee=Resources(cpus=4, mem=2048))
        async with framework(mosquitto, Ignores(), "outsider"):
            answer = await asked(mosquitto, web, "outsider")
    reason = top(answer)
    assert reason["code"] == "held-for-guarantee"
    assert reason["numbers"]["roles"] == ["promised"]
    assert reason["numbers"]["held_back"] == {"cpus": 4.0, "mem": 2048.0}


async def test_lower_in_order(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with cluster(mosquitto, tmp_path, 3) as web:
        big = Fills(2)
        async with framework(mosquitto, big, "big"):
            await eventually(lambda: big.launched == 2, timeout=20)
            small = Fills(5)
            async with framework(mosquitto, small, "small"):
                await eventually(lambda: small.launched == 1, timeout=20)
                await wait_state(mosquitto.url, CLUSTER, lambda s: s.offer_count == 0 and sum(
                    f.running_tasks for f in s.frameworks) == 3)  # fmt: skip
                # the fair share is the ideal the master works out beside its loop: asked
                # until it is in (a loaded machine may answer first without it)
                url, deadline = f"{web}api/v1/frameworks/big/why", time.monotonic() + 20
                while "fair_share" not in top(await asyncio.to_thread(_get, url))["numbers"]:
                    assert time.monotonic() < deadline, "no fair share in the answer"
                    await asyncio.sleep(0.05)  # (polled as eventually polls: no busy asking)
                behind = await asked(mosquitto, web, "big")
                first = await asked(mosquitto, web, "small")
    reason = top(behind)
    assert reason["code"] == "lower-in-order"
    assert reason["numbers"]["position"] == 2
    assert reason["numbers"]["dominant_share"] == round(2 / 3, 4)
    assert list(reason["numbers"]["ahead"].values()) == [round(1 / 3, 4)]
    assert reason["numbers"]["weight"] == 1
    assert "fair_share" in reason["numbers"]
    assert top(first)["code"] == "cluster-full"
    assert top(first)["numbers"]["position"] == 1


async def test_rate_limited(mosquitto: MosquittoBroker, tmp_path: Path) -> None:
    async with (
        cluster(mosquitto, tmp_path, 2, "--rate-limit", "1", "--rate-capacity", "3") as web,
        framework(mosquitto, Ignores(), "chatty") as driver,
    ):
        for _ in range(30):  # each a charged call: 3 wait, the rest are refused
            driver.request_resources([(Resources(cpus=1), 1)])
        answer = await asked(mosquitto, web, "chatty")
        while top(answer)["code"] != "rate-limited":  # (the flood not all there yet)
            answer = await asked(mosquitto, web, "chatty")
    reason = top(answer)
    assert reason["numbers"]["qps"] == 1
    assert reason["numbers"]["capacity"] == 3
    assert reason["numbers"]["refused"] > 0
