"""The master's event stream on the bus goes out while an operator watches (a lease, as
Mesos streams events to its subscribers only): unwatched, a busy master published about a
third of its bytes a task to nobody."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from unittest.mock import MagicMock

import msgpack

from cluster.local.events import follow_events
from cluster.local.view import operator_call
from master.counters import MessageCounts
from master.master import Master, MasterConfig
from master.outbox import Outbox
from protocol.tooling.brokers import BrokerURL, MosquittoBroker, QueueBounds, end_process
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.codec import PROTOCOL_VERSION
from protocol.wire.messages import ClusterEvent, Error, SetWeights, TaskState, WatchEvents, Wire
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from conftest import need_mosquitto
from harness.helpers import Inbox, eventually, in_process_cluster, open_transport, until
from harness.proxy import largest_send_buffer, proxy_to

CONFIG = MasterConfig(allocation_interval=0.1)


async def test_events_go_out_while_watched_and_stop_when_the_lease_ends(tmp_path: Path) -> None:
    async with (
        in_process_cluster("events", tmp_path, CONFIG, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        shell = c.master.outbox
        ops = c.topics.inbound("operator", "ops")
        operator = await open_transport(stack, c.connect, "ops", inbox=c.topics.operator("ops"))
        stream = Inbox()
        await operator.subscribe(c.topics.events, stream)

        async def weigh(weight: float) -> None:  # an operator's call that makes one event
            count = shell.event_counts["weights"]
            await operator.publish(ops, SetWeights(weights={"a": weight}))
            await eventually(lambda: shell.event_counts["weights"] == count + 1)

        clock, skew = shell.clock, 0.0  # the master's own clock, moved on by the test
        shell.clock = lambda: clock() + skew
        await weigh(1)  # unwatched: not published
        await operator.publish(ops, WatchEvents(seconds=30))
        await weigh(2)  # watched
        skew = 31  # the lease ends, and the stream with it
        await weigh(3)
        await operator.publish(ops, WatchEvents(seconds=60))  # watched again
        await weigh(4)
        # in order on the stream: had 1 or 3 gone out, they would have come before 2 or 4
        await stream.wait_count(ClusterEvent, 2)
        assert [e.detail for e in stream.of(ClusterEvent)] == ["a=2", "a=4"]
        assert shell.event_counts["weights"] == 4  # counted and kept, watched or not
        assert [e.detail for e in shell.recent_events if e.kind == "weights"][-1] == "a=4"


async def test_only_an_operator_may_watch_and_a_lease_is_bounded(tmp_path: Path) -> None:
    async with (
        in_process_cluster("events", tmp_path, CONFIG, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        inbox = c.topics.outbox("framework", "tenant") + "/driver"
        tenant = await open_transport(stack, c.connect, "tenant", inbox=inbox)
        answers = Inbox()
        await tenant.subscribe(inbox, answers)
        await tenant.publish(c.topics.inbound("framework", "tenant"), WatchEvents())
        error = await answers.wait_for(Error)
        assert (error.code, error.about) == ("forbidden", "WatchEvents")
        assert c.master.outbox.events_watched_until == 0

        ops = c.topics.operator("ops")
        operator = await open_transport(stack, c.connect, "ops", inbox=ops)
        told = Inbox()
        await operator.subscribe(ops, told)
        # a lease past the bound (ten minutes) is refused on arrival, as any invalid call
        endless = [PROTOCOL_VERSION, "WatchEvents", ops, {"seconds": 1e9}]
        await operator.publish_raw(c.topics.inbound("operator", "ops"), msgpack.packb(endless))
        invalid = await told.wait_for(Error)
        assert (invalid.code, invalid.about) == ("invalid", "WatchEvents")
        assert c.master.outbox.events_watched_until == 0


async def test_an_operators_call_is_not_answered_by_its_leases_refusal(
    mosquitto: MosquittoBroker,
) -> None:
    """`operator_call` sends a lease, then the call: a refused lease (rate limited, or a
    master that does not know it) is not the call's answer; if the call's event then never
    shows, it says the outcome is unknown, and why."""
    topics = Topics("lease")
    refuse_call = False

    async def master(message: Wire, reply_to: str | None) -> None:  # answers, does nothing
        if isinstance(message, WatchEvents) or refuse_call:
            fake.reply_error(reply_to, "not now", code="rate-limited", about=message.TYPE)

    async with Bus(mosquitto.url, name="fake-master") as fake:
        await fake.subscribe(topics.inbound("operator", "+"), master)
        call = SetWeights(weights={"a": 2})
        why = await operator_call(mosquitto.url, "lease", call, lambda _e: True, timeout=0.5)
        assert why is not None
        assert why.startswith("its outcome is unknown: the master would not stream events")
        assert "rate-limited: not now" in why
        refuse_call = True  # now the call itself is refused: that is its answer
        why = await operator_call(mosquitto.url, "lease", call, lambda _e: True, timeout=10)
        assert why == "rate-limited: not now"


@contextlib.asynccontextmanager
async def following(
    url: BrokerURL, cluster: str, lease: float
) -> AsyncIterator[tuple[list[ClusterEvent], asyncio.Event]]:
    """`drfmesos events`' follower, in a task: what it saw, and an event set as it sees."""
    seen: list[ClusterEvent] = []
    arrived, stop = asyncio.Event(), asyncio.Event()

    def on_event(event: ClusterEvent) -> None:
        seen.append(event)
        arrived.set()

    follower = asyncio.create_task(follow_events(url, cluster, on_event, stop, lease=lease))
    try:
        yield seen, arrived
    finally:
        stop.set()
        await within(follower, 10)


async def start_master(
    stack: contextlib.AsyncExitStack, url: BrokerURL, topics: Topics, epoch: int
) -> Master:
    bus = await stack.enter_async_context(Bus(url, name=f"master-{epoch}"))
    master = Master(bus, topics, CONFIG, epoch=epoch)
    await master.start()
    stack.push_async_callback(master.stop)
    return master


def details(seen: list[ClusterEvent]) -> list[str]:
    return [e.detail for e in seen if e.kind == "weights"]


async def test_a_follower_renews_its_lease_while_it_follows(mosquitto: MosquittoBroker) -> None:
    topics = Topics("follow")
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, mosquitto.url, topics, int(time.time()))
        async with following(mosquitto.url, "follow", lease=0.4) as (seen, arrived):
            # (two at once: its first, and the one it takes from the leader it finds)
            await eventually(lambda: master.messages.received["WatchEvents"] >= 2)
            first = master.outbox.events_watched_until
            # a lease every 0.2 s: still watched when the first ones (0.4 s) have ended
            await eventually(lambda: master.outbox.clock() > first + 0.2, timeout=5)
            master.outbox.emit("weights", detail="still watched")
            await until(arrived, lambda: details(seen) == ["still watched"], timeout=10)


async def test_a_follower_takes_a_lease_from_each_new_leader(mosquitto: MosquittoBroker) -> None:
    """A lease is the master's: after a failover the follower asks the new leader for one
    at once (its own renewal, at half of a minute's lease, would come 30 s late)."""
    topics, epoch = Topics("follow"), int(time.time())
    async with contextlib.AsyncExitStack() as stack:
        first = await start_master(stack, mosquitto.url, topics, epoch)
        async with following(mosquitto.url, "follow", lease=60) as (seen, arrived):
            await eventually(lambda: first.messages.received["WatchEvents"] >= 1)
            first.outbox.emit("weights", detail="first")
            await until(arrived, lambda: details(seen) == ["first"], timeout=10)
            await first.stop()
            second = await start_master(stack, mosquitto.url, topics, epoch + 1)
            await eventually(lambda: second.messages.received["WatchEvents"] >= 1)
            second.outbox.emit("weights", detail="second")
            await until(arrived, lambda: details(seen) == ["first", "second"], timeout=10)


async def test_drfmesos_events_prints_the_stream_a_line_an_event(
    mosquitto: MosquittoBroker,
) -> None:
    """The command, as an operator runs it: a process that follows the stream."""
    topics = Topics("follow")
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, mosquitto.url, topics, int(time.time()))
        command = [sys.executable, "-m", "cluster", "events", "--broker", str(mosquitto.url)]
        proc = await asyncio.create_subprocess_exec(
            *command, "--cluster", "follow", "--json", "--seconds", "30",
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stack.push_async_callback(interrupt, proc)
        await eventually(lambda: master.messages.received["WatchEvents"] >= 1, timeout=30)
        master.outbox.emit("weights", detail="a=3")
        assert proc.stdout is not None
        line = await within(proc.stdout.readline(), 10)
        event = ClusterEvent.model_validate(json.loads(line))
        assert (event.kind, event.detail) == ("weights", "a=3")


async def test_drfmesos_events_ends_when_its_reader_does(mosquitto: MosquittoBroker) -> None:
    """`drfmesos events | head -1`: once head has gone, the follower ends (its lease with
    it), with no traceback; it used to log one an event and renew its lease for good."""
    topics = Topics("follow")
    async with contextlib.AsyncExitStack() as stack:
        master = await start_master(stack, mosquitto.url, topics, int(time.time()))
        command = f"{sys.executable} -m cluster events --broker {mosquitto.url} --cluster follow"
        proc = await asyncio.create_subprocess_exec(
            "bash", "-o", "pipefail", "-c", f"{command} | head -1",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        stack.callback(kill_group, proc.pid)  # (the pipeline's processes, not bash alone)
        await eventually(lambda: master.messages.received["WatchEvents"] >= 1, timeout=30)
        ended = asyncio.ensure_future(proc.communicate())
        for n in range(200):  # an event each 0.05 s until the pipeline has ended
            master.outbox.emit("weights", detail=f"a={n}")
            if (await asyncio.wait({ended}, timeout=0.05))[0]:
                break
        out, err = await within(ended, 5)
        assert out.decode().count("\n") == 1
        assert b"Traceback" not in err, err.decode()
        assert proc.returncode == 0  # (the follower's own status: pipefail)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


async def interrupt(proc: asyncio.subprocess.Process) -> None:
    """Ctrl-C: it stops following, and ends cleanly (killed if it does not)."""
    proc.send_signal(signal.SIGINT)
    try:
        assert await within(proc.wait(), 10) == 0
    finally:
        await end_process(proc, kill=True)


async def test_drfmesos_events_stops_when_told_even_before_it_connects() -> None:
    """A broker that never answers (it takes the connection, and says nothing, as a
    firewall's or a TLS listener's would): `--seconds` and Ctrl-C still end it at once,
    with no traceback (it used to wait out the 30 s first connection and fail). (With
    nothing listening it says so at once: see test_first_contact.)"""
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    command = [sys.executable, "-m", "cluster", "events", "--broker", f"mqtt://127.0.0.1:{port}"]
    timed = await asyncio.create_subprocess_exec(
        *command, "--seconds", "1", stderr=asyncio.subprocess.PIPE
    )
    interrupted = await asyncio.create_subprocess_exec(*command, stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await within(timed.communicate(), 15)
        assert timed.returncode == 0, err.decode()
        assert b"Traceback" not in err
        await interrupt(interrupted)
    finally:
        for proc in (timed, interrupted):
            await end_process(proc, kill=True)
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_follower_that_fell_behind_is_told_how_many_events_it_missed() -> None:
    """A follower whose link stops carrying (a proxy between it and the broker stops
    reading) while the master streams more events than that link holds, through a
    mosquitto that holds 10 messages for one client: the broker drops the rest for it, and
    once its link carries again it says how many it missed: the events' numbers skip (at
    the first event after the gap).

    The events go out in rounds of ROUND, each once the test's own follower saw the last
    one's: a payload then holds one round at most. Posted all at once, one payload took
    as many as the bus's lazy flush gathered (up to MAX_PAYLOAD_ITEMS, 4,096), and one run
    in three the broker's 20 payloads held every event: nothing was dropped, nothing told."""
    need_mosquitto()
    # (the stream goes at QoS 0, which mosquitto bounds by its count of packets alone)
    tight = QueueBounds(inflight_messages=10, queued_messages=10)
    broker = MosquittoBroker(bounds=tight)
    await broker.start()
    topics, size = Topics("behind"), 2048
    # twice what the broker may hold for the follower: its 20 payloads (a round and its
    # marker each, at most), what its socket to the proxy may grow to, the proxy's
    on_the_way = largest_send_buffer() + 2**20
    held = (tight.inflight_messages + tight.queued_messages) * (ROUND + 1) + on_the_way // size
    sent = 2 * held
    try:
        async with contextlib.AsyncExitStack() as stack:
            master = await start_master(stack, broker.url, topics, int(time.time()))
            link = await stack.enter_async_context(proxy_to(broker.url.port))
            through = dataclasses.replace(broker.url, port=link.port)
            command = [sys.executable, "-m", "cluster", "events", "--broker", str(through)]
            slow = await asyncio.create_subprocess_exec(
                *command, "--cluster", "behind", "--seconds", "120",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            stack.push_async_callback(end_process, slow, kill=True)
            await eventually(lambda: master.messages.received["WatchEvents"] >= 1, timeout=30)
            async with following(broker.url, "behind", lease=60) as (seen, arrived):
                await eventually(lambda: master.messages.received["WatchEvents"] >= 2)
                link.carrying.clear()
                for start in range(0, sent, ROUND):
                    for n in range(start, min(sent, start + ROUND)):
                        master.outbox.emit("weights", detail=f"{n:05}" + "x" * size)
                    await sent_out(master, seen, arrived)
            link.carrying.set()
            # it learns of the gap from the next event that reaches it: one a second (a
            # line before that one is its bus's: a broker may drop a link stopped for long)
            told = asyncio.ensure_future(line_saying(slow, b"events missed here"))
            for _ in range(30):
                master.outbox.emit("weights", detail="after")
                if (await asyncio.wait({told}, timeout=1))[0]:
                    break
            line = await within(told, 1)
            # (how many: what the broker dropped for it, past what the link held)
            assert int(line.split()[0].replace(b",", b"")) > 0, line
    finally:
        await broker.stop()
        broker.cleanup()


ROUND = 200  # events posted together: the most one payload of the stream holds (see below)


async def sent_out(master: Master, seen: list[ClusterEvent], arrived: asyncio.Event) -> None:
    """Until the follower `seen` saw an event posted after every one posted so far (so
    the bus sent them all): a marker, again each second unheard (the follower reads in
    this busy process, so the broker may drop some for it too)."""
    for _ in range(60):
        master.outbox.emit("weights", detail="marker")
        heard = functools.partial(caught_up, seen, master.outbox.events_emitted)
        with contextlib.suppress(TimeoutError):
            await until(arrived, heard, timeout=1)
            return
    raise AssertionError("the test's own follower heard none of 60 markers")


def caught_up(seen: list[ClusterEvent], seq: int) -> bool:
    return bool(seen) and seen[-1].seq >= seq


async def line_saying(proc: asyncio.subprocess.Process, words: bytes) -> bytes:
    """The first line `proc` writes to its standard error with `words` in it."""
    assert proc.stderr is not None
    before: list[bytes] = []
    while words not in (line := await proc.stderr.readline()):
        assert line, b"".join(before).decode()  # (it ended without saying them)
        before.append(line)
    return line


def test_an_event_nobody_watches_is_built_when_the_recent_events_are_read() -> None:
    """Unwatched, an event is kept as what makes it and built when read (a launch and a
    release a task): the same event, with the time it was emitted; a listener that
    takes events now has each built at once."""
    outbox = Outbox(MagicMock(), Topics("t"), {}, MessageCounts(), MagicMock(), clock=lambda: 0.0)
    heard: list[ClusterEvent] = []
    watching = [False]
    outbox.changes.listen(heard.append, wanted=lambda: watching[0])
    before = time.time()
    outbox.emit("release", framework_id="f", task_id="t", resources=Resources(cpus=1),
                state=TaskState.FINISHED)  # fmt: skip
    assert not heard
    assert outbox.tasks_ended == {"TASK_FINISHED": 1}
    watching[0] = True
    outbox.emit("launch", framework_id="f", task_id="u")
    assert [e.kind for e in heard] == ["launch"]
    kept = list(outbox.recent_events)
    assert [(e.kind, e.seq, e.state) for e in kept] == [
        ("release", 1, TaskState.FINISHED),
        ("launch", 2, None),
    ]
    assert before <= kept[0].timestamp <= kept[1].timestamp
    assert kept[0].resources == Resources(cpus=1)
    assert kept[1] is heard[0]
    assert outbox.event_counts == {"release": 1, "launch": 1}
