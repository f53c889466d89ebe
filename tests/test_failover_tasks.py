"""A failover with many tasks (issue #34), at a small scale: the benchmark's cluster --
ZooKeeper, mosquitto, two masters, a process of simulated slaves -- with one SDK framework
that launches more tasks than one Reconcile call may ask about. The leader is killed; the
new leader holds every task back from the slaves that re-registered with them, the
framework's reconciliation answers each one RUNNING, and nothing is reported lost."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

import pytest

from benchmarks.failover_tasks import Filler
from benchmarks.slaves import Run, verdict
from frameworks.calls import reconcile_calls
from master.intake import MAX_CALL_BYTES, MAX_CALL_ITEMS
from protocol.transport.batching import Counted, chunked, encoded
from protocol.transport.bus import MAX_PAYLOAD
from protocol.wire.codec import DecodeError, decode_many, encode, encode_batch, items_of
from protocol.wire.messages import (
    MAX_RECONCILE_TASKS,
    Accept,
    CommandInfo,
    Offer,
    Reason,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources

from conftest import need_mosquitto, need_zookeeper

pytestmark = pytest.mark.timeout(300)


def test_reconciling_many_tasks_asks_in_calls_the_master_takes() -> None:
    tasks = [
        TaskStatus(task_id=f"t{i}", state=TaskState.RUNNING, slave_id="s") for i in range(9000)
    ]
    calls = reconcile_calls("fw", tasks)
    assert [len(c.tasks) for c in calls] == [MAX_RECONCILE_TASKS, MAX_RECONCILE_TASKS, 808]
    assert [t.task_id for c in calls for t in c.tasks] == [t.task_id for t in tasks]
    assert [c.tasks for c in reconcile_calls("fw", [])] == [[]]  # implicit: all of them


def test_what_a_framework_posts_in_one_turn_leaves_in_payloads_the_master_reads() -> None:
    """A callback that launches 100 tasks on each of 50 offers: 5,000 tasks, more than a
    master reads in one payload of a framework's. The bus packs them into payloads it
    reads whole, and the calls arrive in order."""
    small = Resources(cpus=0.01, mem=1)
    accepts = [
        Accept(
            framework_id="fw",
            offer_ids=[f"o{i}"],
            tasks=[
                TaskInfo(
                    task_id=f"t{i}-{j}",
                    name="t",
                    slave_id=f"s{i}",
                    resources=small,
                    command=CommandInfo(value="sleep 60"),
                )
                for j in range(100)
            ],
        )
        for i in range(50)
    ]
    posted = [Counted(encode(a, None, 0), items_of(a)) for a in accepts]
    payloads = [
        encode_batch(chunk, None) if len(chunk) > 1 else chunk[0]
        for chunk in chunked(encoded(list(posted), None, MAX_PAYLOAD), MAX_PAYLOAD)
    ]
    assert len(payloads) > 1
    read = [e for p in payloads for e in decode_many(p, MAX_CALL_BYTES, MAX_CALL_ITEMS)]
    assert not [e for e in read if isinstance(e, DecodeError)]
    assert [e.message for e in read if not isinstance(e, DecodeError)] == accepts


class Revives:
    """What a Filler asks of its driver here: revives, counted."""

    def __init__(self) -> None:
        self.revives = 0

    def revive_offers(self) -> None:
        self.revives += 1


async def test_a_launch_refused_at_the_rate_limit_is_launched_again_not_counted_lost() -> None:
    """A round offers thousands of slaves at once and the benchmark's framework answers
    with an Accept each, past its rate limit: the master refuses some (TASK_LOST,
    REASON_RATE_LIMITED). They are launched again under new ids on the offers a revive
    brings, and none counts as lost; after the failover a lost task is one."""
    filler = Filler("bench0", 3, Resources(cpus=1))
    filler.launched = {"bench0-0": "s0", "bench0-1": "s1", "bench0-2": "s2"}
    filler._made = 3
    driver = Revives()
    refused = TaskStatus(
        task_id="bench0-1", state=TaskState.LOST, slave_id="s1", reason=Reason.RATE_LIMITED
    )
    await filler.status_update(driver, refused)  # type: ignore[arg-type]
    assert "bench0-1" not in filler.launched
    assert filler.relaunched == 1
    assert not filler.bad
    assert filler._reviver is not None
    await asyncio.sleep(0)  # (it revives at once)
    assert driver.revives == 1
    offer = Offer(offer_id="o", framework_id="f", slave_id="s1", hostname="h",
                  resources=Resources(cpus=1))  # fmt: skip
    await filler.resource_offers(Launches(), [offer])  # type: ignore[arg-type]
    assert sorted(filler.launched) == ["bench0-0", "bench0-2", "bench0-3"]  # a new id
    await filler.close()
    filler.failover = True
    lost = TaskStatus(task_id="bench0-0", state=TaskState.LOST, slave_id="s0")
    await filler.status_update(driver, lost)  # type: ignore[arg-type]
    assert filler.bad == {"TASK_LOST": 1}


class Launches:
    """A driver that takes launches and suppresses."""

    def launch_tasks(self, *_: object) -> None:
        pass

    def decline_offer(self, *_: object) -> None:
        pass

    def suppress_offers(self) -> None:
        pass


async def test_a_failover_brings_back_every_task_and_reconciliation_answers_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_mosquitto()
    need_zookeeper()
    monkeypatch.chdir(Path(__file__).parent.parent)  # (the benchmark's PYTHONPATH)
    tasks = MAX_RECONCILE_TASKS + 904  # 100 a slave: more than one Reconcile asks about
    args = argparse.Namespace(
        count=50,
        processes=1,
        heartbeat=1.0,
        slave_timeout=75.0,
        backoff_factor=1.0,
        window=3.0,
        no_failover=False,
        json=True,
        tasks=tasks,
        frameworks=1,
        work_dir=str(tmp_path),
    )
    run = Run(args)
    try:
        result = await run.measure()
    finally:
        await run.stop()
    assert result["failover_tasks"] == tasks  # the new leader holds every one
    assert result["tasks_answered"] == tasks  # reconciliation answered each RUNNING
    assert result["tasks_lost"] == 0, result["tasks_lost_by_state"]
    assert result["lost_slaves"] == 0
    assert verdict(result) == [], (result, os.getloadavg())
    # the election's time, split: the new leader says how long its own start took
    assert 0 < float(result["failover_takeover_s"]) < float(result["failover_elected_s"])  # type: ignore[arg-type]
    assert float(result["failover_until_won_s"]) > 0  # type: ignore[arg-type]
