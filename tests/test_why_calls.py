"""Why a framework is offered nothing, asked over the bus, in process on the memory
transport: the SDK's `driver.why()` and its warning when offers do not come, `drfmesos
why`'s question and its table, and who may ask about whom (a tenant only of its own)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import click
import pytest
import structlog
from click.testing import CliRunner
from rich.console import Console

import cluster.local.why_cli as why_cli
import master.why_answers as why_answers
from cluster.local.reaching import CONNECT_TRIES
from cluster.local.why_cli import fetch_why, render_why
from frameworks import DriverError, Resources, Scheduler, SchedulerDriver, build_task
from master.config import MasterConfig
from protocol.mesos_json import status_to_mesos
from protocol.wire.messages import Accept, Filters, TaskState
from protocol.wire.why import Why, WhyReason
from protocol.wire.why_codes import WhyCode

from harness.helpers import InProcess, Recorder, eventually, in_process_cluster, running
from harness.schedulers import Fills

CLUSTER = "why"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    async with in_process_cluster(CLUSTER, tmp_path, MasterConfig(allocation_interval=0.1)) as c:
        yield c


def framework(
    cluster: InProcess,
    name: str,
    principal: str | None = None,
    scheduler: Scheduler | None = None,
    **kw: object,
) -> contextlib.AbstractAsyncContextManager[SchedulerDriver]:
    driver = SchedulerDriver(
        scheduler or Recorder(),
        name=name,
        broker=cluster.broker.connector(principal),
        cluster=CLUSTER,
        **kw,  # type: ignore[arg-type]
    )
    return running(driver)


async def test_the_driver_asks_why_and_hears_the_resource_short(cluster: InProcess) -> None:
    async with framework(cluster, "greedy", min_offer=[Resources(cpus=3, mem=64)]) as driver:
        why = await driver.why()
    assert why.name == "greedy"
    assert why.top is not None
    assert why.top.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE
    assert why.top.numbers["short"] == {"cpus": 1.0}  # slaves of 2 cpus
    assert why.top.numbers["largest"] == {"cpus": 2.0, "mem": 1024.0}
    assert not why.offered


async def test_a_framework_offered_lately_says_what_and_when(cluster: InProcess) -> None:
    async with framework(cluster, "fed") as driver:
        await eventually(lambda: len(driver.offers) == 2)
        why = await driver.why()
    assert {o.slave_id for o in why.offered} == {"slave-0", "slave-1"}
    assert all(o.resources == Resources(cpus=2, mem=1024) for o in why.offered)
    assert why.top is not None
    assert why.top.code == WhyCode.OFFERS_OUTSTANDING  # it holds them, unanswered
    assert why.top.numbers["offers"] == 2


async def test_a_new_framework_is_told_of_the_rounds_since_it_came_alone(
    cluster: InProcess,
) -> None:
    """The rounds `why` counts are those since the framework registered (newcomer 63: a
    framework of 4 s heard it was offered nothing in 251 s, 32 rounds)."""
    async with framework(cluster, "fed") as driver:
        await eventually(lambda: len(driver.offers) == 2)
        # (rounds that make offers: one declined each time is offered again)
        for _ in range(5):
            offer = next(iter(driver.offers.values()))
            await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=0))
            await eventually(lambda offer=offer: offer.offer_id not in driver.offers)
            await eventually(lambda: len(driver.offers) == 2)
        before = len(cluster.master.cycle.offers_log)
        assert before >= 5
        async with framework(cluster, "late", min_offer=[Resources(cpus=8)]) as late:
            why = await late.why()
    assert why.rounds < before
    assert why.since < 2.0, why.since


async def test_the_driver_warns_once_with_the_top_reason_when_no_offer_comes(
    cluster: InProcess,
) -> None:
    with structlog.testing.capture_logs() as logs:
        async with framework(
            cluster, "waiting", min_offer=[Resources(cpus=8)], no_offer_warning=0.3
        ):
            await eventually(lambda: any(e["event"] == "framework.no_offers" for e in logs))
            warned = [e for e in logs if e["event"] == "framework.no_offers"]
            # once a drought: a second look finds the same single line
            await eventually(lambda: cluster.master.offer_rounds.count > 10)
    warned = [e for e in logs if e["event"] == "framework.no_offers"]
    assert len(warned) == 1
    assert warned[0]["log_level"] == "warning"
    assert warned[0]["reason"] == "min-offer-fits-no-slave"
    assert "cpus:6" in warned[0]["why"]  # short by 6 of the 2 any slave has


async def test_a_suppressed_framework_is_not_warned(cluster: InProcess) -> None:
    with structlog.testing.capture_logs() as logs:
        async with framework(cluster, "quiet", no_offer_warning=0.2) as driver:
            driver.suppress_offers()
            await eventually(lambda: cluster.master.offer_rounds.count > 10)
            why = await driver.why()
    assert why.top is not None
    assert why.top.code == WhyCode.SUPPRESSED
    assert not [e for e in logs if e["event"] == "framework.no_offers"]


async def test_a_tenant_may_ask_only_about_its_own(cluster: InProcess) -> None:
    async with framework(cluster, "alices", principal="alice", min_offer=[Resources(cpus=9)]):
        fid = next(iter(cluster.master.books.frameworks))
        mallory = cluster.broker.connector("mallory")
        for asked in (fid, "alices"):
            with pytest.raises(click.ClickException, match="unknown-framework") as e:
                await fetch_why(mallory, CLUSTER, asked, kind="framework", timeout=5)
            assert fid not in str(e.value) or asked == fid  # (it learns nothing it did not say)
        mine = await fetch_why(
            cluster.broker.connector("alice"), CLUSTER, "alices", kind="framework", timeout=5
        )
        assert mine.framework_id == fid
        ops = await fetch_why(cluster.broker.connector("ops"), CLUSTER, fid, timeout=5)
        assert ops.top is not None
        assert ops.top.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE


async def test_a_framework_asks_about_itself_by_name_on_a_cluster_without_credentials(
    cluster: InProcess,
) -> None:
    """`drfmesos why NAME --as framework` on a cluster without credentials (the
    first-framework tutorial's, where run.md sends a `drfmesos run` user): a framework's
    principal there is its name, so the command asks as that one and is answered. An id
    names no principal: the refusal says to ask as the operator instead."""
    async with framework(cluster, "big", min_offer=[Resources(cpus=3)]) as driver:
        mine = await fetch_why(cluster.connect, CLUSTER, "big", kind="framework", timeout=5)
        assert mine.framework_id == driver.framework_id
        assert mine.top is not None
        assert mine.top.code == WhyCode.MIN_OFFER_FITS_NO_SLAVE
        assert driver.framework_id
        with pytest.raises(click.ClickException, match="leave --as out, and ask as the operator"):
            await fetch_why(
                cluster.connect, CLUSTER, driver.framework_id, kind="framework", timeout=5
            )


async def test_a_driver_asking_about_an_unknown_framework_hears_it(cluster: InProcess) -> None:
    async with framework(cluster, "x") as driver:
        driver.framework_id = "not-mine"  # (as if the master had forgotten it)
        with pytest.raises(DriverError, match="unknown-framework"):
            await driver.why(timeout=5)


async def test_the_command_prints_the_reasons_as_a_table(cluster: InProcess) -> None:
    async with framework(cluster, "big", min_offer=[Resources(cpus=3)]):
        why = await fetch_why(cluster.connect, CLUSTER, "big", timeout=5)
    console = Console(width=200, record=True)
    console.print(render_why(why))
    text = console.export_text()
    assert "min-offer-fits-no-slave" in text
    assert "short: cpus=1" in text
    assert "offered nothing in" in text


def test_the_command_prints_the_answer_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    canned = Why(
        framework_id="f1",
        name="big",
        role="big",
        reasons=[WhyReason(code=WhyCode.SUPPRESSED, message="it suppressed its offers")],
    )
    asked: list[tuple[object, ...]] = []

    async def answer(*args: object, **kw: object) -> Why:
        asked.append((*args, kw))
        return canned

    monkeypatch.setattr(why_cli, "fetch_why", answer)
    done = CliRunner().invoke(why_cli.why, ["big", "--json", "--as", "framework"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["reasons"][0]["code"] == "suppressed"
    assert asked[0][2] == "big"
    assert asked[0][3] == {"kind": "framework", "timeout": 10.0, "tries": CONNECT_TRIES}


async def test_an_operator_asks_by_a_name_two_frameworks_share(cluster: InProcess) -> None:
    async with framework(cluster, "twin", principal="a"), framework(cluster, "twin", principal="b"):
        with pytest.raises(click.ClickException, match="ambiguous: 2 frameworks are named twin"):
            await fetch_why(cluster.connect, CLUSTER, "twin", timeout=5)


async def test_a_tenant_hears_who_comes_first_counted_not_named(cluster: InProcess) -> None:
    """The tenancy rule (one answer for not yours and unknown: no principal learns which
    framework ids exist) holds in why's answers too: an operator hears who comes first
    in the order, a tenant how many and their shares."""
    fills = Fills(2)
    async with framework(cluster, "bobs", principal="bob", scheduler=fills) as bob:
        await eventually(lambda: fills.launched == 2)  # its tasks fill the cluster
        async with framework(cluster, "alices", principal="alice") as alice:
            await eventually(lambda: alice.framework_id in list(cluster.master.allocator.order()))
            mine = await bob.why()
            ops = await fetch_why(cluster.broker.connector("ops"), CLUSTER, "bobs", timeout=5)
    assert alice.framework_id
    for answer in (mine, ops):
        assert answer.top is not None
        assert answer.top.code == WhyCode.LOWER_IN_ORDER, answer.reasons
        assert answer.top.numbers["position"] == 2
    assert mine.top is not None
    assert mine.top.numbers["ahead"] == {"#1": 0.0}
    assert alice.framework_id not in mine.model_dump_json()
    assert ops.top is not None
    assert ops.top.numbers["ahead"] == {alice.framework_id: 0.0}


async def test_a_refused_launch_names_the_resource_and_slave_short(cluster: InProcess) -> None:
    """The master's own check of a launch (the SDK checks first; a Mesos framework, or a
    hostile one, does not): the task's update says which resource of which slave was
    short and by how much, a Mesos framework reads the same in its UPDATE, and the event
    stream and the web UI's events say it too."""
    rec = Recorder()
    async with framework(cluster, "greedy", scheduler=rec) as driver:
        await rec.wait(lambda: bool(rec.offers))
        offer = rec.offers[0]
        task = build_task(offer, "big", Resources(cpus=3, mem=64), command="true", task_id="big")
        assert driver.bus is not None
        driver.bus.post(
            driver.to_master,
            Accept(
                framework_id=driver.framework_id or "", offer_ids=[offer.offer_id], tasks=[task]
            ),
        )
        status = await rec.update("big", TaskState.ERROR)
    said = f"on slave {offer.slave_id}: short of cpus:1"
    assert said in status.message
    assert said in status_to_mesos(status)["message"]  # (a Mesos framework's UPDATE)
    refused = [e for e in cluster.master.outbox.recent_events if e.kind == "launch_refused"]
    assert [(e.task_id, e.slave_id) for e in refused] == [("big", offer.slave_id)]
    assert said in refused[0].detail


async def test_questions_past_the_budget_get_the_last_answer_or_are_refused_busy(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer reads every slave: a flood of questions about many frameworks may cost
    the master's loop only its budget, then gets the last answer, or `busy`."""
    monkeypatch.setattr(why_answers, "BUDGET", 1e-9)  # (one answer spends it)
    # (the budget is each asker's: both frameworks are one principal's, who asks)
    async with framework(cluster, "one") as one, framework(cluster, "two", "one") as two:
        books, answers = cluster.master.books, cluster.master.why
        mine = books.frameworks[one.framework_id or ""]
        asker = mine.principal
        first = answers.answer(mine, principal=asker)
        assert isinstance(first, Why)
        again = answers.answer(mine, "asked-again", principal=asker)
        assert isinstance(again, Why)
        assert again.timestamp == first.timestamp  # the last one, as it was
        assert again.request_id == "asked-again"
        busy = answers.answer(books.frameworks[two.framework_id or ""], principal=asker)
        assert busy == why_answers.Refusal("busy", busy.message)  # type: ignore[union-attr]
        with pytest.raises(DriverError, match="busy"):
            await two.why(timeout=5)
