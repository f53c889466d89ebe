"""The "why?" budget is each principal's: one tenant's questions leave another's answered (a
hostile tenant's review: before its fix the budget was the master's, shared by every tenant).

`master.why_answers.WhyAnswers.answer` lets new answers spend at most BUDGET seconds of
every BUDGET_WINDOW, whoever asks (`_window`, `_spent` are the master's, not a
principal's). On a large cluster one answer costs about the whole budget (the module
says some 0.1 s on 10,000 slaves, and BUDGET is 0.1 s), so a tenant asking about its
*own* framework once a window -- a thing it is allowed to do -- leaves every other
tenant `busy` for theirs: another tenant's questions deny it the feature. The test
makes one answer spend the budget (as test_why_calls does) instead of building
10,000 slaves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import master.why_answers as why_answers
from cluster.local.why_cli import fetch_why
from frameworks import Resources, SchedulerDriver
from master.config import MasterConfig

from harness.helpers import InProcess, Recorder, in_process_cluster

CLUSTER = "review53why"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcess]:
    async with in_process_cluster(CLUSTER, tmp_path, MasterConfig(allocation_interval=0.1)) as c:
        yield c


async def test_one_tenants_questions_about_its_own_leave_another_busy(
    cluster: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(why_answers, "BUDGET", 1e-9)  # (one answer costs the budget, as
    # one does on some 10,000 slaves)
    monkeypatch.setattr(why_answers, "BUDGET_WINDOW", 3600.0)  # (no new window mid-test:
    # on a slow machine the two questions might fall in two 1 s windows)
    drivers = [
        SchedulerDriver(
            Recorder(),
            name=name,
            broker=cluster.broker.connector(principal),
            cluster=CLUSTER,
            min_offer=[Resources(cpus=999)],
        )
        for name, principal in (("alices", "alice"), ("bobs", "bob"))
    ]
    for d in drivers:
        await d.start()
    try:
        alice, bob = (cluster.broker.connector(p) for p in ("alice", "bob"))
        # alice asks about her own framework: allowed, and spends the master's budget
        mine = await fetch_why(alice, CLUSTER, "alices", kind="framework", timeout=5)
        assert mine.name == "alices"
        # bob, who has asked nothing yet, asks about his own within the same second
        theirs = await fetch_why(bob, CLUSTER, "bobs", kind="framework", timeout=5)
        assert theirs.name == "bobs"  # fails: click.ClickException "busy: too many questions"
    finally:
        for d in drivers:
            d.stop()
            await d.join()
