"""Who leads: a master serves only while it holds the leadership, and stops at once
when it loses it.

A `Candidate` campaigns until it leads and then hands out a `Term`: the epoch (larger
than every earlier term's), the registry's store, and an event set the moment the
leadership is lost. `LoneCandidate` is one master on its own (its registry in
`--work-dir`, or in memory); `master.ha.zookeeper.ZkCandidate` is one of several, elected in
ZooKeeper. `lead` runs terms one after another: connect, recover, serve, and on losing
the term send nothing more (see `Bus.close(abandon=True)`) and campaign again.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from master.ha.registry import JournalStore, MemoryStore, Store
from protocol import logs
from protocol.transport.aio import cancel_and_wait, finish
from protocol.transport.base import ConnectedElsewhere
from protocol.transport.bus import Bus, BusRefused, first_of

log = logs.get("leadership")


class LeadershipError(RuntimeError):
    """This master cannot campaign (another master holds its work dir, say)."""


def next_epoch(previous: int) -> int:
    """Epochs only grow: past the last one, and at least the wall clock's seconds, so that
    a registry started afresh (a new --work-dir, a new ZooKeeper path) still outranks the
    terms the parties remember."""
    return max(previous + 1, int(time.time()))


@dataclass
class Term:
    epoch: int
    store: Store
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = field(default_factory=time.monotonic)
    # the wall clock when the election was won (for a failover's timeline beside the old
    # leader's end, which only the wall clock of another process can say)
    won_at: float = field(default_factory=time.time)
    # what the term put in ZooKeeper besides its election node, taken back at its end
    # after the master stopped (a shutdown may skip them: the session's end removes them)
    withdrawals: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


class Candidate(Protocol):
    async def campaign(self) -> Term: ...

    async def still_leads(self) -> bool: ...

    async def resign(self) -> None: ...

    async def close(self) -> None: ...


class LoneCandidate:
    """A master on its own: it leads at once. With a work dir its registry (and epoch)
    survive a restart, and a second master on the same work dir is refused."""

    def __init__(self, work_dir: Path | None) -> None:
        self.work_dir = work_dir
        self._lock: IO[bytes] | None = None
        self._term: Term | None = None
        self._epoch = 0

    async def campaign(self) -> Term:
        if self.work_dir is None:
            self._epoch = next_epoch(self._epoch)
            self._term = Term(self._epoch, MemoryStore())
            return self._term
        await asyncio.to_thread(self.work_dir.mkdir, parents=True, exist_ok=True)
        self._lock = await asyncio.to_thread(_lock_file, self.work_dir / "master.lock")
        store = JournalStore(self.work_dir)
        epoch = next_epoch(int(store.journal.get("epoch") or 0))
        await store.put("epoch", epoch)
        self._term = Term(epoch, store)
        return self._term

    async def still_leads(self) -> bool:
        return self._term is not None and not self._term.lost.is_set()

    async def resign(self) -> None:
        if self._term is not None:
            await self._term.store.close()
            self._term = None
        if self._lock is not None:
            self._lock.close()  # closing the file releases the lock
            self._lock = None

    async def close(self) -> None:
        await self.resign()


def _lock_file(path: Path) -> IO[bytes]:
    f = open(path, "a+b")  # noqa: SIM115 - held for the term, closed by resign()
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise LeadershipError(
            f"another master is running with the work dir {path.parent}"
        ) from None
    f.truncate(0)
    f.write(f"{os.getpid()}\n".encode())
    f.flush()
    return f


Serve = Callable[[Bus, Term], Awaitable[Callable[[], Awaitable[None]]]]


async def lead(candidate: Candidate, make_bus: Callable[[], Bus], serve: Serve) -> None:
    """Campaign, serve the term, and again, until cancelled.

    `serve(bus, term)` starts the master on a connected bus stamped with the term's epoch
    and returns how to stop it (only this process's own parts: it is run to its end even
    when a cancel lands meanwhile; what the term left in ZooKeeper goes in
    `term.withdrawals`). When the term is lost (or the bus may not reconnect) the master
    is stopped and the bus abandoned: nothing queued is sent any more.

    A cancel (SIGTERM) ends this for good, whatever it lands on: the term's own stop is
    finished first, and then nothing waits for ZooKeeper, whose session the candidate's
    `close` ends (taking its ephemeral nodes with it).
    """
    while True:
        if _stopping():  # a cancel that something under the last term swallowed
            raise asyncio.CancelledError
        log.info("leadership.campaigning")
        term = await candidate.campaign()
        log.info("leadership.elected", epoch=term.epoch)
        bus = make_bus()
        bus.epoch = term.epoch
        bus.may_reconnect = candidate.still_leads
        stop: list[Callable[[], Awaitable[None]]] = []
        try:
            connecting = asyncio.ensure_future(bus.start(timeout=None))
            losing = asyncio.ensure_future(term.lost.wait())
            try:
                await asyncio.wait({connecting, losing}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                losing.cancel()
            if connecting.done() and isinstance(connecting.exception(), BusRefused):
                raise connecting.exception()  # type: ignore[misc]  # bad credentials: say so
            if connecting.done() and connecting.exception() is None:
                stop.append(await serve(bus, term))
                await first_of(term.lost, bus.gave_up)
            else:
                await cancel_and_wait(connecting)  # (not `suppress`: our own cancel goes on)
            log.warning(
                "leadership.lost",
                epoch=term.epoch,
                led_seconds=round(time.monotonic() - term.started, 3),
                why="session" if term.lost.is_set() else "bus",
            )
            if isinstance(bus.refused, ConnectedElsewhere) and isinstance(
                candidate, LoneCandidate
            ):  # another master took the masters' client id over, and nothing elects
                # one of them: campaigning again would take it back, and so on for ever
                raise LeadershipError(
                    "another master of this cluster took its broker connection over: "
                    "without ZooKeeper (--zk) a cluster has one master; this one stops"
                )
        finally:
            term.lost.set()
            await finish(_stop_serving(bus, stop))
            if not _stopping():  # else the candidate's close() ends the session instead
                for withdraw in term.withdrawals:  # these may wait for ZooKeeper
                    await withdraw()
                await candidate.resign()


async def _stop_serving(bus: Bus, stop: list[Callable[[], Awaitable[None]]]) -> None:
    with contextlib.suppress(Exception):
        await bus.close(abandon=True)  # first: not one more message leaves
    for step in stop:
        await step()


def _stopping() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
