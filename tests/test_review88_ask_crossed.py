"""review88: an answer to an ask a launch withdrew counts once the slave is asked again.

A slave back to the master that knew it is asked after the executors it booked there and
the slave named nowhere (CheckExecutors); a launch on such an executor, sent behind the
ask, withdraws it (the slave's answer, of before that launch, is of an executor the
launch starts again). The master kept only *whether* an executor was asked after: a
second ask (the slave announced itself again -- a registration retried while the master
was behind, a reconnect -- before it read that launch) made the first ask's answer count
again, and the executor the launch had just started was freed (its resources offered
while it runs; its framework told it was lost).

Here the first answer is held (the master reads it late), the launch is held on its way
to the slave while the slave announces itself again, then both go on.

Fixed: each ask carries its number (CheckExecutors.ask), its answers carry it back
(ExecutorExited.ask), and an answer counts only for the ask the master still waits on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_fix88_stale_custom_executor import (
    CLUSTER,
    EXECUTOR,
    TASK,
    Lost,
    exit_lost,
    framework,
    own_executor,
    reannounce,
)

from frameworks import Filters, TaskState, build_task
from master.authz import Caller
from master.master import MasterConfig
from protocol.wire.messages import CheckExecutors, ExecutorExited, RunTasks
from slave.default_executor import DefaultExecutor
from slave.slave import Slave

from harness.helpers import books_balance, eventually, in_process_cluster

pytestmark = pytest.mark.timeout(60)


async def test_a_first_answer_read_after_a_launch_and_a_second_ask_frees_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = {"hold": False}
    through, held, checked = asyncio.Event(), asyncio.Event(), asyncio.Event()
    run_tasks, on_check = Slave._on_run_tasks, DefaultExecutor.on_check

    async def gated(self: Slave, msg: RunTasks, reply_to: str | None) -> None:
        if gate["hold"]:
            held.set()
            await through.wait()
        await run_tasks(self, msg, reply_to)

    async def seen(self: DefaultExecutor, msg: CheckExecutors, reply_to: str | None) -> None:
        await on_check(self, msg, reply_to)
        checked.set()

    monkeypatch.setattr(Slave, "_on_run_tasks", gated)
    monkeypatch.setattr(DefaultExecutor, "on_check", seen)
    own = own_executor(tmp_path)
    config = MasterConfig(allocation_interval=0.1)
    async with in_process_cluster(CLUSTER, tmp_path, config, slaves=1) as cluster:
        [slave] = cluster.slaves
        rec = Lost()
        async with framework(cluster, rec) as driver:
            with monkeypatch.context() as mp:
                await exit_lost(slave, rec, driver, own, mp)
            fid = driver.framework_id or ""
            fw = cluster.master.books.frameworks[fid]
            key = (slave.slave_id, "own")

            # the first ask: answered (it runs no `own`), the answer read late
            answers: list[dict[str, Any]] = []
            with monkeypatch.context() as mp:
                mp.setattr(
                    slave.default_executor,
                    "_tell_exited",
                    lambda f, e, s, **kw: answers.append(dict(f=f, e=e, s=s, **kw)),
                )
                await reannounce(cluster, slave)
                await eventually(lambda: bool(answers))
            assert key in fw.executor_checks

            # a launch on `own` (still booked), held on its way to the slave ...
            checked.clear()
            gate["hold"] = True
            driver.revive_offers()
            again = await rec.offer_on(driver, slave.slave_id)
            later = build_task(again, "later", TASK, executor=own, task_id="later")
            await driver.launch_tasks([again.offer_id], [later], Filters())
            await held.wait()
            # ... as the slave announces itself again: a second ask, behind the launch
            slave.bus.incarnation = "again"
            await reannounce(cluster, slave)
            through.set()
            await rec.update("later", TaskState.RUNNING)
            await checked.wait()  # (the second ask read with `own` running: no answer)
            assert (fid, "own") in slave.executors

            # the first ask's answer, read only now
            [first] = answers
            late = ExecutorExited(
                framework_id=first["f"],
                slave_id=slave.slave_id,
                executor_id=first["e"],
                status=first["s"],
                checked=True,
                **({"ask": first["ask"]} if "ask" in first else {}),
            )
            caller = Caller("slave", cluster.master.books.slaves[slave.slave_id].principal, None)
            await cluster.master.slave_calls.on_executor_exited(late, caller)
            assert fw.executors == {key: EXECUTOR}  # still booked: it runs
            assert not rec.lost
            books_balance(cluster.master)
