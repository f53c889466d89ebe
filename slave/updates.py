"""A slave's status updates until they are acknowledged: each is written to the work dir,
and sent again with backoff -- across reconnects and restarts -- until the master
acknowledges it (Mesos's status update manager, agent side).

A quiet slave (nothing else owed) sends an update that does not end its task as its
write begins, not once it is on disk: the sync then overlaps its way to the master and
on to the framework (an `fdatasync` and two thread wake-ups were a fifth of a task's way
from offer to RUNNING). A task's end waits for its write, which drops the task's
checkpoint: a slave that died before the sync would find the task again on restart and
report a second end. A busy one sends each once it is on disk, with the others of its
write, as one list: under load the disk's trips gather them, and that saves more than
the wait costs. What makes an update durable holds either way: it is acknowledged only
once it is on disk (an acknowledgement that comes sooner is taken then), so an update is
never forgotten here before it was written. A slave that dies before the sync forgets an
update its framework may have heard: a task it reported RUNNING and did not write down
is then reported TASK_GONE (TASK_LOST) when the slave comes back without it, as a task
lost with its slave is.

The master forwards each update to its framework and acknowledges it here once the
framework has acknowledged it (or when the framework will never hear it: it heard the
task end already), so an update is owed until its framework has it.

Each task's updates are a stream: only its oldest unacknowledged update is in flight (and
re-sent); the later ones wait behind it, in order, and the next goes the moment the one
before it is acknowledged. A re-sent STARTING can then never reach the framework after
RUNNING. Every update sent carries the task's latest state (`latest_state`), so the
master frees a task's resources as soon as it ended here, while its terminal update
still waits its turn. The journal replays its records in the order they were put (and
compacts in that order), so the streams keep their order across a restart.

A stream holds at most three updates: the one in flight, the latest non-terminal one
behind it (a newer one takes its place: an executor that reports RUNNING a thousand
times while its framework does not acknowledge costs one update, not a thousand), and
the task's terminal one, never dropped. A framework then hears the update in flight, the
task's latest state before its end, and its end.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from protocol.journal import Journal
from protocol.transport.base import Transport
from protocol.wire.messages import EndingTask, Reason, StatusUpdate, TaskState

MAX_RESEND_BACKOFF = 30.0
RESEND_CHECK = 0.2  # seconds between looks for updates due again
WRITE_RETRY = 1.0  # seconds before updates that could not be written are written again

StreamKey = tuple[str, str]  # (framework id, task id)


def _key(raw: Any) -> StreamKey:
    return (raw["framework_id"], raw["status"]["task_id"])


def _with_latest(update: StatusUpdate, latest: TaskState) -> StatusUpdate:
    """`update` saying its task's `latest_state` is `latest`: itself, set in place (0.5 us,
    where a copy was 3.5, and a task that ends at once is sent so each time). Safe: a
    task's latest state only moves on, so an earlier send of the update that is still
    waiting in this turn's flush to be encoded goes with news, not with a wrong state."""
    if update.latest_state != latest:
        update.latest_state = latest
    return update


class OwedUpdates:
    def __init__(
        self, bus: Transport, to_master: str, journal: Journal, resend_after: float
    ) -> None:
        self.bus = bus
        self.to_master = to_master
        self.resend_after = resend_after  # first re-send of an unacknowledged update
        self.journal = journal
        self._streams: dict[StreamKey, deque[str]] = {}  # a task's owed uuids, oldest first
        self._stream_of: dict[str, StreamKey] = {}  # uuid -> its task's stream
        self._resend_at: dict[str, tuple[float, float]] = {}  # head uuid -> (when, backoff)
        # the updates made by this run, as made (what a previous run left is read back
        # from the journal when sent): not validated again from their records at each send
        self._made: dict[str, StatusUpdate] = {}
        self._unwritten: set[str] = set()  # made, and not on disk yet
        self._sent_unwritten: set[str] = set()  # of those, sent (by a quiet slave)
        self._acknowledged_early: set[str] = set()  # and acknowledged: taken once written
        self._write_again: set[str] = set()  # their write failed (a full disk): tried again
        self._write_retry: asyncio.TimerHandle | None = None
        # called with the time the next re-send is due whenever one is scheduled: a fleet
        # looks at a slave only then (walking its 4,000 slaves five times a second was most
        # of an idle process's CPU; so was walking those owing an update, in a failover)
        self.on_scheduled: Callable[[float], None] | None = None
        for uuid, raw in self.journal.items():  # (what a previous run still owed, in order)
            self._join(uuid, _key(raw))

    def __len__(self) -> int:
        return len(self.journal)

    def next_resend(self) -> float | None:
        """When the next update is due to go again (None: none is)."""
        return min((when for when, _ in self._resend_at.values()), default=None)

    def _scheduled(self, when: float) -> None:
        if self.on_scheduled is not None:
            self.on_scheduled(when)

    def tell_scheduled(self) -> None:
        """Say again when the next re-send is due (a fleet set a slave aside while it was
        not registered: it is looked at again once it is)."""
        when = self.next_resend()
        if when is not None:
            self._scheduled(when)

    def in_flight(self) -> list[str]:
        """The uuids sent and not yet acknowledged: each stream's head."""
        return [stream[0] for stream in self._streams.values()]

    def send_all_soon(self) -> None:
        """Every stream's head goes again at the next look once registered (after an
        announcement, and what a previous run of this slave still owed)."""
        heads = self.in_flight()
        for uuid in heads:
            self._resend_at[uuid] = (0.0, self.resend_after)
        if heads:
            self._scheduled(0.0)

    async def send(self, update: StatusUpdate, along: Callable[[], None] | None = None) -> None:
        """`owe` the update, and return once it is on disk."""
        self.owe(update, along)
        await self.journal.synced()

    def owe(
        self,
        update: StatusUpdate,
        along: Callable[[], None] | None = None,
        record: dict[str, Any] | None = None,
    ) -> None:
        """Write the update down, and send it if it heads its task's stream: now if nothing
        else is owed, else once it is on disk (see the module's docstring). It is owed
        until acknowledged, and acknowledged only once on disk; the caller goes on
        meanwhile (a slave's launches wait for no disk). `along` records what goes to
        disk with it, behind it in the same write (a task's checkpoint, in a journal of
        the same file: one sync for both). One that ends the task behind an
        unacknowledged update has that one go again within `resend_after`, whatever its
        backoff: its `latest_state` frees the task's resources at the master without
        waiting for the framework. Usually the acknowledgement comes first, and the end
        goes then, with no re-send: re-sending at once doubled a short task's messages
        (e2e: a fifth fewer tasks/s). `record`: the map the update was validated from,
        each of its fields as the update has it, journaled as it is (a dump of the update
        was 4.4 us, twice a task)."""
        uuid = update.status.uuid or ""
        key = (update.framework_id, update.status.task_id)
        stream = self._streams.get(key)
        if (
            stream is not None
            and len(stream) > 1
            and not update.status.state.terminal
            and not self._terminal(stream[-1])
        ):
            self._forget(stream.pop())  # (the latest waits in its place: written together)
        quiet = not self._streams
        self._made[uuid] = update
        self._join(uuid, key)
        self._unwritten.add(uuid)
        head = self._streams[key][0]
        if (
            quiet
            and not update.status.state.terminal
            and update.status.reason != Reason.TASK_HEALTH_CHECK_STATUS_UPDATED
        ):  # (its own state is the latest)
            # sent before its records are made: they go to disk in this turn's write all
            # the same, and the update is on its way meanwhile. Not a task's end: its
            # write also drops the task's checkpoint, and a slave that died before the
            # sync would find the task again and report a second end. Nor a health
            # verdict: its write keeps the verdict with the task, and a slave that died
            # before the sync would go on from the one before, which its framework no
            # longer holds, and never say the next change (no latency rides on it)
            self._sent_unwritten.add(uuid)
            self._send(uuid, _with_latest(update, update.status.state))
        self.journal.put_soon(
            uuid, record if record is not None else update.model_dump(mode="python")
        )
        if along is not None:
            along()
        self.journal.on_disk(lambda error: self._written(uuid, error))
        if head != uuid and update.status.state.terminal and head in self._resend_at:
            when, backoff = self._resend_at[head]
            sooner = min(when, time.monotonic() + self.resend_after)
            self._resend_at[head] = (sooner, backoff)
            if sooner < when:
                self._scheduled(sooner)

    def _written(self, uuid: str, error: OSError | None) -> None:
        """The update is on disk: sent if it heads its stream and was not sent yet; an
        acknowledgement that came meanwhile is taken now. One that could not be written
        (a full disk: any tenant's task may fill it) is still owed, and written again
        after WRITE_RETRY (the journal's next write is its live set, whole) until it is
        on disk: taken as acknowledged, the task's end never reached the master."""
        if error is not None:
            if uuid in self._stream_of:  # (else forgotten meanwhile: nothing to write)
                self._write_again.add(uuid)
                if self._write_retry is None:
                    loop = asyncio.get_running_loop()
                    self._write_retry = loop.call_later(WRITE_RETRY, self._retry_writes)
            return
        self._unwritten.discard(uuid)
        sent, early = uuid in self._sent_unwritten, uuid in self._acknowledged_early
        self._sent_unwritten.discard(uuid)
        self._acknowledged_early.discard(uuid)
        key = self._stream_of.get(uuid)
        if key is None:
            return  # replaced, or its framework forgotten, while it was being written
        if early:
            self.acknowledged(uuid)
        elif not sent and self._streams[key][0] == uuid:
            self._post(uuid)

    def _retry_writes(self) -> None:
        self._write_retry = None
        again, self._write_again = self._write_again, set()
        for uuid in again:
            self.journal.on_disk(functools.partial(self._written, uuid))

    def acknowledged(self, uuid: str) -> None:
        """The master has it acknowledged: forget it, and send the next of its stream (once
        it is on disk: what is acknowledged sooner waits for its write)."""
        if uuid in self._sent_unwritten:
            self._acknowledged_early.add(uuid)
            return
        self._resend_at.pop(uuid, None)
        self._made.pop(uuid, None)
        self.journal.discard(uuid)  # (not awaited: a batch of acks is one turn)
        key = self._stream_of.pop(uuid, None)
        stream = self._streams.get(key) if key is not None else None
        if key is None or stream is None:
            return  # a duplicate acknowledgement
        was_head = stream[0] == uuid
        stream.remove(uuid)
        if not stream:
            del self._streams[key]
        elif was_head:
            self._post(stream[0])

    def ending(self) -> list[EndingTask]:
        """The tasks whose end the master has not acknowledged yet (a re-registering
        slave names them, so that the master does not count them as lost)."""
        return [
            EndingTask(framework_id=raw["framework_id"], task_id=raw["status"]["task_id"])
            for _, raw in self.journal.items()
            if TaskState(raw["status"]["state"]).terminal
        ]

    async def forget_framework(self, framework_id: str) -> None:
        """The framework is gone: nothing more is owed to it."""
        for uuid, raw in self.journal.items():
            if raw.get("framework_id") == framework_id:
                await self.journal.drop(uuid)
                self._resend_at.pop(uuid, None)
                self._made.pop(uuid, None)
                self._stream_of.pop(uuid, None)
        for key in [k for k in self._streams if k[0] == framework_id]:
            del self._streams[key]

    def resend_due(self, now: float) -> None:
        """Send again the heads that are due, each next time after twice its last wait
        (at most MAX_RESEND_BACKOFF)."""
        for uuid, (when, backoff) in list(self._resend_at.items()):
            if when > now:
                continue
            if uuid not in self.journal:
                self._resend_at.pop(uuid, None)
                self._made.pop(uuid, None)
                continue
            self._post(uuid, first=False)
            nxt = min(backoff * 2, MAX_RESEND_BACKOFF)
            self._resend_at[uuid] = (now + nxt, nxt)

    async def resend_loop(self, registered: asyncio.Event) -> None:
        """Re-send what is due while registered (an unregistered slave's updates would be
        refused: they go again after it registers)."""
        while True:
            await asyncio.sleep(RESEND_CHECK)
            if registered.is_set():
                self.resend_due(time.monotonic())

    async def close(self) -> None:
        if self._write_retry is not None:
            self._write_retry.cancel()
            self._write_retry = None
        await self.journal.close()

    def _terminal(self, uuid: str) -> bool:
        raw = self.journal.get(uuid)
        return raw is not None and TaskState(raw["status"]["state"]).terminal

    def _forget(self, uuid: str) -> None:
        """A waiting update, never sent, replaced by a newer one of its task."""
        self._stream_of.pop(uuid, None)
        self._made.pop(uuid, None)
        self.journal.discard(uuid)

    def _join(self, uuid: str, key: StreamKey) -> None:
        if uuid not in self._stream_of:
            self._streams.setdefault(key, deque()).append(uuid)
            self._stream_of[uuid] = key

    def _post(self, uuid: str, *, first: bool = True) -> None:
        """Send a stream's head with its task's latest state; `first`: its first send
        (or one with news), which starts its re-send schedule unless one runs."""
        raw = self.journal.get(uuid)
        key = self._stream_of.get(uuid)
        if raw is None or key is None or uuid in self._unwritten:
            return  # (an unwritten one goes once it is written)
        newest = self.journal.get(self._streams[key][-1])
        made = self._made.get(uuid) or StatusUpdate.model_validate(raw)
        self._send(uuid, _with_latest(made, TaskState(newest["status"]["state"])), first=first)

    def _send(self, uuid: str, update: StatusUpdate, *, first: bool = True) -> None:
        if first and uuid not in self._resend_at:
            when = time.monotonic() + self.resend_after
            self._resend_at[uuid] = (when, self.resend_after)
            self._scheduled(when)
        self.bus.post(self.to_master, update)
