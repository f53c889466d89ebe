"""The bus's physical limits: messages per second one way, and round-trip latency.

    python -m benchmarks.bus [--messages 5000] [--round-trips 2000]

For mosquitto and for the embedded amqtt broker, with a realistic message (an Offers event
with 10 offers): one-way throughput at QoS 0 and QoS 1 (one publisher pipelining, one
subscriber), and the round trip of a QoS 1 ping answered by a QoS 1 pong, p50 and p99.
Everything above the bus (master, slaves, frameworks) is measured against these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

from benchmarks.common import percentile, table
from protocol import logs
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker, MosquittoBroker
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.codec import encode
from protocol.wire.messages import Heartbeat, Offer, Offers, Wire
from protocol.wire.resources import Resources


def offers_event() -> Offers:
    return Offers(
        offers=[
            Offer(
                offer_id=f"offer-{i:06d}-{'x' * 20}",
                framework_id="framework-0001",
                slave_id=f"slave-{i:04d}",
                hostname=f"host-{i}.cluster.local",
                resources=Resources(cpus=24, mem=4096, disk=100_000),
                attributes={"rack": "r1"},
            )
            for i in range(10)
        ]
    )


async def one_way(url: BrokerURL, n: int, qos: int, message: Wire) -> float:
    got = 0
    done = asyncio.Event()

    async def count(_m: Wire, _r: str | None) -> None:
        nonlocal got
        got += 1
        if got >= n:
            done.set()

    async with Bus(url, name="bench-rx") as rx, Bus(url, name="bench-tx") as tx:
        await rx.subscribe("bench/oneway", count, qos=qos)
        start = time.perf_counter()
        for i in range(n):
            tx.post("bench/oneway", message, qos=qos)
            if i % 500 == 499:
                await asyncio.sleep(0)  # let the network loop breathe, as a real party does
        await within(done.wait(), 120)
        return n / (time.perf_counter() - start)


async def round_trips(
    url: BrokerURL,
    n: int,
    answerer: BrokerURL | None = None,
    ping: str = "bench/ping",
    pong: str = "bench/pong",
) -> list[float]:
    """QoS 1 ping from `url`, QoS 1 pong from `answerer` (default: `url` too); on a broker
    with ACLs, give two principals and topics each may use."""

    async def echo(m: Wire, _r: str | None) -> None:
        b.post(pong, m)

    async with Bus(answerer or url, name="bench-b") as b:
        await b.subscribe(ping, echo)
        return await _pings(url, n, ping, pong)


class Pinger:
    """QoS 1 pings from `url` on `ping`, each answered on `pong`: one round trip a call."""

    def __init__(self, url: BrokerURL, ping: str, pong: str) -> None:
        self.url, self.ping, self.pong = url, ping, pong
        self._pongs = asyncio.Queue[Wire]()
        self._bus = Bus(url, name="bench-a")
        self._n = 0

    async def __aenter__(self) -> Pinger:
        await self._bus.start()

        async def back(m: Wire, _r: str | None) -> None:
            self._pongs.put_nowait(m)

        await self._bus.subscribe(self.pong, back)
        for _ in range(50):  # warm up
            await self.once()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._bus.close()

    async def once(self) -> float:
        """One round trip, in seconds (the pong back, and the ping's PUBACK)."""
        self._n += 1
        t = time.perf_counter()
        await self._bus.publish(self.ping, Heartbeat(source=str(self._n)))
        await self._pongs.get()
        return time.perf_counter() - t


async def _pings(url: BrokerURL, n: int, ping: str, pong: str) -> list[float]:
    """Ping `n` times (after 50 to warm up), each once the last one's pong is back."""
    async with Pinger(url, ping, pong) as pinger:
        return [await pinger.once() for _ in range(n)]


async def echo(url: BrokerURL, ping: str, pong: str) -> None:
    """Answer every ping on `ping` with the same message on `pong`, until killed (the far
    end of `echo_process`, in a process of its own). Says "ready" when subscribed."""

    async def answer(m: Wire, _r: str | None) -> None:
        bus.post(pong, m)

    async with Bus(url, name="bench-echo") as bus:
        await bus.subscribe(ping, answer)
        print("ready", flush=True)
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def echo_process(
    answerer: BrokerURL, answerer_secret: str | None, ping: str, pong: str
) -> AsyncIterator[None]:
    """An echo (see `echo`) in a process of its own, as the parties of a cluster are: each
    hop then wakes another process, as a task's messages do. Ping it with a `Pinger`."""
    user = f"{answerer.username}@" if answerer.username else ""
    args = ["--echo", f"{answerer.scheme}://{user}{answerer.host}:{answerer.port}"]
    args += ["--ping", ping, "--pong", pong]
    if answerer_secret:
        args += ["--secret-file", answerer_secret]
    if answerer.ca:
        args += ["--ca", answerer.ca]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.bus", *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await within(proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError("the echo process did not start")
        yield
    finally:
        proc.terminate()
        await proc.wait()


async def measure(kind: str, messages: int, trips: int) -> list[object]:
    broker: EmbeddedBroker | MosquittoBroker = (
        MosquittoBroker() if kind == "mosquitto" else EmbeddedBroker()
    )
    await broker.start()
    try:
        event = offers_event()
        q0 = await one_way(broker.url, messages, 0, event)
        q1 = await one_way(broker.url, messages, 1, event)
        rtt = await round_trips(broker.url, trips)
    finally:
        await broker.stop()
        if isinstance(broker, MosquittoBroker):
            broker.cleanup()
    return [kind, q0, q1, percentile(rtt, 50) * 1e3, percentile(rtt, 99) * 1e3]


async def main(messages: int, trips: int) -> None:
    size = len(encode(offers_event()))
    rows = [await measure(kind, messages, trips) for kind in ("mosquitto", "embedded")]
    print(
        f"bus benchmark: Offers event with 10 offers = {size} bytes on the wire; "
        f"{messages} messages one way, {trips} QoS 1 round trips"
    )
    print(table(["broker", "QoS0 msg/s", "QoS1 msg/s", "RTT p50 ms", "RTT p99 ms"], rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--round-trips", type=int, default=2000)
    # the far end of a round trip across processes (echo_process starts it)
    parser.add_argument("--echo", metavar="BROKER", help=argparse.SUPPRESS)
    parser.add_argument("--ping", help=argparse.SUPPRESS)
    parser.add_argument("--pong", help=argparse.SUPPRESS)
    parser.add_argument("--secret-file", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logs.configure("warning")
    if args.echo:
        url = BrokerURL.parse(args.echo, ca=args.ca, secret_file=args.secret_file)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(echo(url, args.ping, args.pong))
    else:
        asyncio.run(main(args.messages, args.round_trips))
