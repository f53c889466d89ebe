"""The fuzzing attack run against a secured master: random and mutated calls from a
principal with valid credentials (the property test and the benchmark run it)."""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

from master.http.api import HttpApi
from master.http.config import HttpConfig
from master.rate_limits import RateLimits
from protocol.wire.messages import Error, Wire

from harness.fuzz import Fuzzer, Report, send_bus, send_http, statuses_of
from harness.helpers import books_balance, eventually, longest_step
from harness.strategies import ANY_MESSAGE
from harness.tenant import counted_alike, files_outside, log_written, tenant
from harness.trust import Secure, T, draw, intact


async def fuzz(
    sec: Secure,
    tmp_path: Path,
    messages: int,
    requests: int,
    seed: int,
    *,
    step_bound: float = 0.1,
    attacking: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run the fuzzer against `sec`, print what it sent and what came back, and check
    the invariants (the test's and the benchmark's one body: it measures the master's
    memory from `attacking`, awaited as the attack begins, and allows loop steps of
    `step_bound` while it traces that memory)."""
    master = sec.master
    master.queues.limits = RateLimits.defaults(None, None)  # all reach the handlers
    api = HttpApi(master.views, HttpConfig(port=0, credentials=sec.store.path))
    url = await api.start()
    secrets = {n: sec.store.secret_file(n).read_text().strip() for n in ("mallory", "ops")}
    fid_victim = sec.alice.framework_id or ""
    report = Report()
    errors: Counter[str] = Counter()
    try:
        async with tenant(sec) as (driver, mallory):
            fuzzer = Fuzzer(
                seed,
                driver.framework_id or "",
                {"framework_id": fid_victim, "slave_id": "sa", "task_id": "victim-task"},
                draw(ANY_MESSAGE, 200),
            )
            fuzzer.offers = mallory.offers  # (the one list its offers are kept in)
            await eventually(lambda: bool(fuzzer.offers), timeout=15)
            if attacking is not None:
                await attacking()
            gc.freeze()  # as `drfmesos master` does once started
            with log_written() as written, longest_step() as step:
                bus = driver.bus  # (mallory's one connection: a second would take it over)
                assert bus is not None

                async def publish(payload: bytes) -> None:
                    await bus.publish_raw(T.inbound("framework", "mallory"), payload, qos=0)

                async def answer(message: Wire, _reply_to: str | None) -> None:
                    if isinstance(message, Error):
                        errors[message.code] += 1

                # answers to its calls come here, counted, not to its driver (which would
                # log each one and fall behind with its offers)
                answers = T.outbox("framework", "mallory") + "/fuzz"
                await bus.subscribe(answers, answer)
                await send_bus(fuzzer, publish, messages, answers, report)
                await send_http(fuzzer, url, requests, fid_victim, secrets, report)
                # the master answers in order: an answer to a last call means all were handled
                await driver.reconcile_tasks(["the-last-one"])
                await eventually(lambda: mallory.last("the-last-one") is not None, timeout=60)
                await eventually(lambda: counted_alike(sec), timeout=30)
            gc.unfreeze()
            for line in report.lines(errors, statuses_of(mallory.statuses)):
                print(line)
            print(f"longest loop step: {step[0] * 1000:.1f} ms of CPU")
    finally:
        await api.stop()
    said = written.getvalue()
    failures = [line for line in said.splitlines() if any(f in line for f in FAILURES)]
    assert not failures, failures[:3]
    assert all(json.loads(line) for line in said.splitlines())  # one structured line each
    assert not report.http_5xx, report.http_5xx[:5]
    assert step[0] < step_bound, step[0]
    assert files_outside(tmp_path, [tmp_path / "sa", tmp_path / "sb"]) == []
    assert counted_alike(sec)
    books_balance(master)
    intact(sec)  # the victim's task runs on, its framework untouched


FAILURES = ("handler_failed", "callback_failed", "Traceback", '.failed"', "unhandled")
