"""Review 63 (on 2060393): an Accept the master refuses for its offers is told on the
operators' event stream as one `launch_refused` event a task, each carrying the whole
refusal in its `detail`, uncut: every problem of every offer id the Accept named.

A tenant sends one Accept (charged 11 calls by its rate limit) of 1,000 tasks naming
1,000 offer ids it does not hold, each id 194 characters: the refusal is some 250 KB of
text, and the master publishes it 1,000 times, once a task, to the operators' stream
(`drfmesos events`, and so the broker and every operator tool that follows it; the web
UI's feed and the Mesos operator API's SUBSCRIBE build the same events). At the default
rate limit a tenant may send some 90 such Accepts a second.

A status message is cut at 4,096 characters (protocol.wire.values.StatusMessage); an
event's detail is not.

In process, on the memory transport, an operator watching the events."""

from __future__ import annotations

import pytest

from protocol.wire.messages import Accept, CommandInfo, Filters, TaskInfo
from protocol.wire.resources import Resources

from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

pytestmark = pytest.mark.timeout(60)
TASKS = 1000
EVENT_BOUND = 8 * 1024  # bytes an event may take on the stream, generously


async def test_one_refused_accept_does_not_publish_hundreds_of_megabytes_of_events(
    cluster: Cluster,
) -> None:
    watcher = await cluster.stack.enter_async_context(
        cluster.connect(name="ops", inbox=None, will=None)
    )
    published = {"events": 0, "bytes": 0}

    async def seen(topic: str, data: bytes) -> None:
        published["events"] += 1
        published["bytes"] += len(data)

    await watcher.subscribe_raw(T.events, seen, qos=0)
    cluster.master.outbox.watch_events(600)  # (an operator follows the stream)
    m = await cluster.framework("M", role="m")
    await cluster.slave("s1", Resources(cpus=4, mem=4096))
    fw = cluster.master.books.frameworks[m.framework_id]
    bogus = [f"x{i:03d}" + "o" * 190 for i in range(TASKS)]
    tasks = [
        TaskInfo(
            task_id=f"t{i:04d}",
            name="n",
            slave_id="s1",
            resources=Resources(cpus=0.1),
            command=CommandInfo(value="true"),
        )
        for i in range(TASKS)
    ]
    before = dict(published)
    await m.bus.publish(
        m.to_master,
        Accept(framework_id=m.framework_id, offer_ids=bogus, tasks=tasks, filters=Filters()),
    )
    await eventually(lambda: len(fw.completed) >= TASKS, timeout=30)
    await cluster.rounds_pass(3)  # (what the master published of it has arrived)
    events = published["events"] - before["events"]
    sent = published["bytes"] - before["bytes"]
    assert sent <= events * EVENT_BOUND, (
        f"one Accept of {TASKS} tasks naming {TASKS} offer ids it does not hold (charged "
        f"{1 + TASKS // 100} calls) had the master publish {events} events, "
        f"{sent / 1e6:.0f} MB, on the operators' event stream: "
        f"{sent / max(events, 1) / 1e3:.0f} KB an event (each task's launch_refused "
        f"carries the whole refusal, uncut)"
    )
