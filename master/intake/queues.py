"""Each principal's one queue into the master: served fairly between principals, and each
framework or operator principal's calls at its rate limit.

Every call reaches the master over its one MQTT connection (or Mesos's HTTP API), in the
order it arrives: a tenant that floods would have everyone's calls (a slave's heartbeat,
another framework's launch) wait behind its backlog. So what arrives is only put in its
principal's queue here (a bus payload undecoded: a flood costs the master an append, not
a decode), and one server takes the queues' heads by deficit round robin (Shreedhar and
Varghese), each principal's share of the master's time in proportion to its weight. The
time an entry costs is measured as it is handled, so a principal that sends dear calls
gets fewer of them, not more time. Within a principal, what it sent keeps its order.
What arrives when nothing waits and nothing is being handled (an idle master: a lone
task's calls and updates) is handled at once, in its arrival's task (`serve_now`), as the
server would take it next, without the turn of the loop a hand-over to the server costs;
the server waits for its end.

A limited principal's calls are also charged to its rate limit (Mesos's framework rate
limiting: throttle, don't drop). Each limit (a principal's own, or the aggregate default
that the principals not listed share) is a token bucket of `qps` calls a second, one
second's worth at once. A call the bucket can pay for when it is read is handled then;
one it cannot is held in its principal's queue, ahead of what arrived after it, and
handled in order as the bucket fills. What a call costs is `master.intake.costs`'s.

Admission is one decision, on arrival (`over_capacity`): a limited principal's calls
waiting here count against its limit's `capacity` (once each not yet read, a read one
held for the bucket as its cost: what it holds parsed grows with it), and the payloads
not yet read against MOST_WAITING_BYTES; past either, what arrives is refused
(`master.intake.refusals`). What was admitted is never refused for
capacity later: it waits its turn and its tokens.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from master.rate_limits import Limit, RateLimits
from protocol import logs
from protocol.transport.aio import cancel_and_wait, loop_time

log = logs.get("intake")

Work = Callable[[], Awaitable[None]]

QUANTUM = 0.002  # seconds of handling a weight-1 principal is given a round
TURN = 0.005  # seconds of serving before the loop lets its other tasks run
# payload bytes waiting to be read against one limit, at most: its capacity counts calls,
# and a thousand payloads near the broker's packet limit are a gigabyte of the master's
MOST_WAITING_BYTES = 64 * 1024 * 1024


@dataclass
class PrincipalCounts:
    """What a principal's rate limit did with its calls, since the master started."""

    handled: int = 0  # calls charged to the limit and handled
    throttled: int = 0  # of those, the ones that waited for the bucket
    refused: int = 0  # calls refused, past the capacity
    queued: int = 0  # charged calls waiting for the bucket now


@dataclass
class _Bucket:
    """A rate limit's tokens, and the calls waiting against its capacity."""

    limit: Limit
    tokens: float
    at: float
    waiting: int = 0  # calls waiting, read or not, of every principal held to it
    waiting_bytes: int = 0  # of those not yet read, their payloads' bytes

    def wait(self, now: float) -> float:
        """Seconds until the bucket can pay for the next call (0: now)."""
        assert self.limit.qps is not None
        self.tokens = min(self.limit.burst, self.tokens + (now - self.at) * self.limit.qps)
        self.at = now
        return max(0.0, (1.0 - self.tokens) / self.limit.qps)


@dataclass
class _Entry:
    """What arrived: a payload of `calls` calls, or one call, served by `work`."""

    arrived: float
    seq: int
    calls: int
    bucket: _Bucket | None  # the limit its calls count against (None: not limited)
    work: Work
    nbytes: int = 0  # its payload's bytes, counted against its limit while it waits


@dataclass
class _Held:
    """A charged call read and waiting for its bucket."""

    cost: float
    principal: str
    bucket: _Bucket
    work: Work

    @property
    def units(self) -> int:
        """What it counts against its limit's capacity while it waits: its cost (a
        Reconcile of 4,096 tasks, 410): held parsed, a thousand of them held 1.5 GB."""
        return math.ceil(self.cost)


@dataclass
class _Queue:
    weight: float
    entries: deque[_Entry] = field(default_factory=deque)
    held: deque[_Held] = field(default_factory=deque)  # ahead of the entries
    calls: int = 0  # the calls its entries hold
    deficit: float = 0.0  # seconds of handling it may still take this round
    active: bool = False  # in the round (what arrives while its last is handled joins it)
    wake: asyncio.TimerHandle | None = None  # back in the round when its bucket can pay


class PrincipalQueues:
    """The queues, the rate limits' buckets, and the one server. `limits` may be replaced
    at run time: what waits keeps its place, held to the new limit from then on."""

    def __init__(
        self,
        limits: RateLimits,
        rate_clock: Callable[[], float] = loop_time,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`rate_clock`: the buckets' time (the loop's); `clock`: what handling is timed by."""
        self.limits = limits
        self.rate_clock, self.clock = rate_clock, clock
        self.counts: dict[str, PrincipalCounts] = {}  # by principal
        self._buckets: dict[str, _Bucket] = {}  # by the limit's key
        self._queues: dict[str, _Queue] = {}  # by "kind/principal"
        self._active: deque[str] = deque()  # queues with something to serve, in turn
        self._wake = asyncio.Event()
        self._server: asyncio.Task[None] | None = None
        self._serving: tuple[float, int] | None = None  # the entry being handled
        self._busy = False  # the server is handling something (an entry or a held call)
        # handled at once in its arrival's task (`serve_now`): the server waits for its end
        self._inline: asyncio.Future[None] | None = None
        self._seq = 0  # entries put so far: each entry's number
        # (n, t): the entries up to the n-th were sent by t (see sent_by)
        self._sent_by: deque[tuple[int, float]] = deque(maxlen=64)

    # -- admission ------------------------------------------------------------------------

    def limit_of(self, principal: str) -> tuple[str, Limit]:
        """(the key of the limit `principal` is held to, the limit)."""
        return self.limits.for_principal(principal)

    def over_capacity(self, principal: str, calls: float, nbytes: int = 0) -> bool:
        """The one admission check: whether `calls` more would take what waits against
        `principal`'s limit past its capacity. What arrives when nothing waits and the
        bucket can pay is always taken: its calls are charged as they are read."""
        bucket = self._bucket(principal)
        if bucket is None or bucket.limit.capacity is None:
            return False
        if not bucket.waiting and bucket.wait(self.rate_clock()) == 0:
            return False
        if nbytes and bucket.waiting_bytes + nbytes > MOST_WAITING_BYTES:
            return True
        return bucket.waiting + calls > bucket.limit.capacity

    def refused(self, principal: str, calls: int) -> None:
        """Count `calls` of `principal`'s refused past its capacity."""
        self.counts.setdefault(principal, PrincipalCounts()).refused += calls

    def _bucket(self, principal: str) -> _Bucket | None:
        """The bucket `principal`'s charged calls are paid from (None: not limited)."""
        key, limit = self.limits.for_principal(principal)
        if limit.qps is None:
            return None
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(limit, limit.burst, self.rate_clock())
        bucket.limit = limit  # (the operator may have changed it)
        return bucket

    # -- arrival ------------------------------------------------------------------------

    def put(
        self,
        queue_key: str,
        weight: float,
        principal: str | None,
        calls: int,
        work: Work,
        nbytes: int = 0,
    ) -> None:
        """Queue `work`, `calls` calls of `principal` (None: not limited) in the queue
        `queue_key`, served at `weight`."""
        queue = self._queues.get(queue_key)
        if queue is None:
            queue = self._queues[queue_key] = _Queue(weight)
        queue.weight = weight
        bucket = self._bucket(principal) if principal is not None else None
        if bucket is not None:
            bucket.waiting += calls
            bucket.waiting_bytes += nbytes
        self._seq += 1
        queue.entries.append(_Entry(time.monotonic(), self._seq, calls, bucket, work, nbytes))
        queue.calls += calls
        self._activate(queue_key)
        self._start_server()

    def _start_server(self) -> None:
        if self._server is None:
            self._server = asyncio.create_task(self._serve(), name="master-intake")

    async def serve_now(self, queue_key: str, weight: float, work: Work) -> bool:
        """Handle `work` at once, in the caller's task, if nothing waits here and nothing
        is being handled (else False, and nothing done): what the server would do with it
        next, without the turn of the loop its hand-over costs. While it runs the server
        waits; what `work` holds for its principal's rate limit is served in turn after."""
        if self._active or self._busy or self._inline is not None:
            return False
        queue = self._queues.get(queue_key)
        if queue is None:
            queue = self._queues[queue_key] = _Queue(weight)
        queue.weight = weight
        self._seq += 1
        self._inline = done = asyncio.get_running_loop().create_future()
        self._serving = (time.monotonic(), self._seq)
        started = self.clock()
        try:
            await work()
        except Exception:  # (as the server: a handler's bug is logged there, this goes on)
            log.exception("intake.handler_failed", queue=queue_key)
        finally:
            self._serving, self._inline = None, None
            done.set_result(None)
            if queue.held:  # a call held for its bucket: the server serves it in its turn
                self._activate(queue_key)
                self._start_server()
            if queue.active:  # (more of its came meanwhile: it owes the time, as served)
                queue.deficit -= self.clock() - started
        return True

    async def charge(self, queue_key: str, principal: str, cost: float, work: Work) -> None:
        """A call read in its turn, charged `cost` to `principal`'s limit: handled now if
        its bucket can pay and none of its queue's is held, else held in order."""
        bucket = self._bucket(principal)
        if bucket is None:
            await work()
            return
        counts = self.counts.setdefault(principal, PrincipalCounts())
        queue = self._queues[queue_key]
        if not queue.held and bucket.wait(self.rate_clock()) == 0:
            bucket.tokens -= max(1.0, cost)
            counts.handled += 1
            await work()
            return
        held = _Held(max(1.0, cost), principal, bucket, work)
        queue.held.append(held)
        bucket.waiting += held.units
        counts.queued += 1

    # -- what waits ---------------------------------------------------------------------

    def waiting(self, principal: str) -> int:
        """The calls waiting against `principal`'s limit, read or not (0: not limited)."""
        bucket = self._bucket(principal)
        return bucket.waiting if bucket is not None else 0

    def backlog(self) -> int:
        """Entries waiting to be read, all principals."""
        return sum(len(self._queues[k].entries) for k in self._active)

    def oldest_age(self) -> float:
        """Seconds the oldest entry here has waited to be read, the one being handled
        included (0: none): a payload's calls are handled one after another, and the last
        of a big one waits behind the rest (a slave process's heartbeats, its slaves'
        silence not theirs)."""
        queues = (self._queues[k] for k in self._active)
        heads = [(q.entries[0].arrived, q.entries[0].seq) for q in queues if q.entries]
        if self._serving is not None:
            heads.append(self._serving)
        if not heads:
            return 0.0
        return time.monotonic() - min(self._sent_no_later(a, n) for a, n in heads)

    def sent_by(self, sent: float) -> None:
        """Everything put here so far was sent by `sent` (monotonic): the master's lag
        probe, sent then, came back behind it. An entry's wait then counts from its
        sending, not from when it was read: a master behind has its backlog in the
        socket first, and the time it waited there is not forgotten once it is read."""
        if self._seq:
            self._sent_by.append((self._seq, sent))

    def _sent_no_later(self, arrived: float, n: int) -> float:
        for up_to, sent in self._sent_by:  # (in order: the first that covers it is earliest)
            if up_to >= n:
                return min(arrived, sent)
        return arrived

    # -- the server -----------------------------------------------------------------------

    def _activate(self, queue_key: str) -> None:
        queue = self._queues[queue_key]
        queue.wake = None
        if not queue.active:
            queue.active = True
            self._active.append(queue_key)
            self._wake.set()

    def _next(self, queue: _Queue) -> tuple[Work, _Entry | None] | float:
        """What `queue` serves next: a held call its bucket can pay for, else what arrived
        next; else the seconds until its bucket can pay (inf: nothing waits)."""
        if queue.held:
            held = queue.held[0]
            wait = held.bucket.wait(self.rate_clock())
            if wait == 0:
                queue.held.popleft()
                held.bucket.tokens -= held.cost
                held.bucket.waiting -= held.units
                counts = self.counts[held.principal]
                counts.queued -= 1
                counts.handled += 1
                counts.throttled += 1
                return held.work, None
            if not queue.entries:
                return wait
        if queue.entries:
            entry = queue.entries.popleft()
            queue.calls -= entry.calls
            if entry.bucket is not None:
                entry.bucket.waiting -= entry.calls
                entry.bucket.waiting_bytes -= entry.nbytes
            return entry.work, entry
        return float("inf")

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        turn_ends = loop.time() + TURN
        while True:
            if self._inline is not None:  # handled in its arrival's task: after it
                await asyncio.wait({self._inline})
                continue
            if not self._active:
                self._wake.clear()
                await self._wake.wait()
                turn_ends = loop.time() + TURN
                continue
            key = self._active[0]
            queue = self._queues[key]
            if queue.deficit <= 0 and (queue.entries or queue.held):
                queue.deficit += QUANTUM * queue.weight  # its turn is over: more time later
                self._active.rotate(-1)
                continue
            step = self._next(queue)
            if isinstance(step, float):  # idle: out of the round; it neither banks nor owes
                queue.active, queue.deficit = False, 0.0
                self._active.popleft()
                if step != float("inf"):
                    queue.wake = loop.call_later(step, self._activate, key)
                continue
            work, entry = step
            started = self.clock()
            self._serving = (entry.arrived, entry.seq) if entry is not None else None
            self._busy = True
            try:
                await work()
            except Exception:  # (a handler's bug is logged there; this server goes on)
                log.exception("intake.handler_failed", queue=key)
            finally:
                self._serving, self._busy = None, False
            queue.deficit -= self.clock() - started
            if loop.time() > turn_ends:  # a backlog must not starve rounds, timers, HTTP
                await asyncio.sleep(0)
                turn_ends = loop.time() + TURN

    async def close(self) -> None:
        """Stop serving (the master is stopping: what waits goes with its books)."""
        if self._server is not None:
            await cancel_and_wait(self._server)
            self._server = None
        for queue in self._queues.values():
            if queue.wake is not None:
                queue.wake.cancel()
            for held in queue.held:
                self.counts[held.principal].queued -= 1
                held.bucket.waiting -= held.units
            queue.held.clear()
