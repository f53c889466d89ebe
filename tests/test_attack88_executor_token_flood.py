"""A neighbour's wrong tokens do not spend the victim's executor's line (attack88).

A Mesos executor's adapter (frameworks.mesos_executor) serves its HTTP API on a loopback
port any local process can reach, and asked its slave about every bearer token that was
not its own (`CheckExecutorToken`: whose is it? 401 or 403). Every message an executor
sends waits its principal's pace on the slave (slave.message_budget.UpdatePace,
attack87), so mallory's task, sending alice's adapter wrong tokens from 16 threads, had
alice's executor queue check after check on her own line, ahead of her own messages and
status updates: her framework message waited seconds behind them. Now the adapter asks
the slave at most a few times a second, and answers the rest at once (429).

Run as a real root slave with tenants (harness.shared_slave), its pace lowered as
attack87's test lowers it, so that a short flood shows it.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from test_isolation_tenants import (
    _cmdline,
    _descendants,
    _environ,
    _executor_pid,
    _message,
    adapter_executor,
    endpoint_of,
)

import slave.executor_side
from protocol.transport.aio import loop_time
from protocol.wire.messages import CommandInfo, ExecutorInfo
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, shared_slave
from task_python import task_python_env

RATE, BURST = 200.0, 100.0
FLOOD_SECONDS = 8
AT_ONCE = 400  # wrong tokens under way at once

FLOOD = """
import json, selectors, socket, sys, time
host, port = sys.argv[1].split(":")
seconds, at_once = float(sys.argv[2]), int(sys.argv[3])
body = json.dumps({"type": "MESSAGE"}).encode()
request = (b"POST /api/v1/executor HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n"
           b"Authorization: Bearer not.a.token\\r\\nContent-Length: %d\\r\\n\\r\\n%s"
           % (len(body), body))
answers = {}
poll = selectors.DefaultSelector()
def ask():
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setblocking(False)
    s.send(request)
    poll.register(s, selectors.EVENT_READ)
for _ in range(at_once):  # each with a request under way, asked again once answered
    ask()
print("flooding", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for key, _ in poll.select(0.5):
        s = key.fileobj
        try:
            got = s.recv(1 << 16)
        except OSError:
            got = b""
        if got.startswith(b"HTTP/1.1 "):
            status = got[9:12].decode()
            answers[status] = answers.get(status, 0) + 1
        poll.unregister(s)
        s.close()
        ask()
print(json.dumps(answers), flush=True)
"""

pytestmark = pytest.mark.timeout(120)


async def test_wrong_tokens_from_a_neighbour_do_not_hold_the_victims_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(slave.executor_side, "UPDATES_A_SECOND", RATE)
    monkeypatch.setattr(slave.executor_side, "UPDATES_AT_ONCE", BURST)
    async with shared_slave(task_env=task_python_env()) as s:
        await s.master.run("alice", ALICE, "a1", "", executor=adapter_executor("ae", "sleep 300"))
        alices = s.sandbox(ALICE, "executor-ae")
        await eventually(lambda: endpoint_of(alices) is not None, timeout=30)
        endpoint = endpoint_of(alices)
        assert endpoint is not None
        adapter = next(
            p
            for p in _descendants(_executor_pid(s, ALICE, "ae"))
            if "frameworks.mesos_executor" in _cmdline(p) and not _cmdline(p).startswith("/bin/sh")
        )
        token = _environ(adapter)["MESOS_EXECUTOR_AUTHENTICATION_TOKEN"]

        program = s.work.parent / "flood.py"
        program.write_text(FLOOD)
        os.chmod(program, 0o644)
        flood = f"/usr/bin/python3 {program} {endpoint} {FLOOD_SECONDS} {AT_ONCE}"
        spy = ExecutorInfo(
            executor_id="spy", command=CommandInfo(value=flood), resources=Resources(cpus=0.1)
        )
        await s.master.run("mallory", MALLORY, "m1", "", executor=spy)
        out = s.sandbox(MALLORY, "executor-spy") / "stdout"
        await eventually(lambda: out.exists() and "flooding" in out.read_text(), timeout=30)
        await asyncio.sleep(FLOOD_SECONDS / 2)  # (the flood under way: the attack's time)

        sent = loop_time()
        status = await asyncio.to_thread(_message, endpoint, token, ALICE, "ae")
        assert status == 202
        await eventually(lambda: [m.data for m in s.master.messages] == [b"hello"], timeout=30)
        took = loop_time() - sent
        await s.master.ends(MALLORY, "m1", timeout=60)
        answers = out.read_text().splitlines()[-1]
    print(f"mallory's answers: {answers}; alice's message: {took:.2f} s")
    assert took < 1.0, f"alice's message reached her framework {took:.2f} s after she sent it"
