"""What the master says, and to whom: messages to frameworks and slaves, refusals, and the
event stream. The books' changes are elsewhere (`master.offers`, `master.updates`,
`master.removals` and the call handlers); they say what happened through this.

A framework hears on its inbox topic over the bus, or through the sink of the transport
that serves it (a Mesos HTTP stream, `master.mesos_api`: `sinks`); a slave on its own
topic. A refused call is answered with an `Error` where its sender reads (sampled per
principal: a flood of bad calls is not a flood of answers or log lines), and counted.
Every change worth telling is a `ClusterEvent`: counted, kept (the last 200), told to
the change listeners (`master.changes`: the web UI's feed, Mesos's operator stream), put
on the bus while an operator watches, and it makes the published state stale.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

from master.authz import Caller
from master.books import Framework, Task
from master.changes import TASK_ADDED, TASK_UPDATED, Changes
from master.counters import MessageCounts
from master.refusal_sampling import RefusalSampling
from protocol import logs
from protocol.transport.aio import loop_time
from protocol.transport.base import Transport
from protocol.wire.messages import ClusterEvent, Error, TaskState, Wire
from protocol.wire.resources import Resources
from protocol.wire.slave import CheckpointResources
from protocol.wire.topics import Topics

MAX_ERROR_TEXT = 8192  # characters of a refusal's reason sent back (1000 tasks' reasons)
RECENT_EVENTS = 200  # events kept for /api/v1/events

_Unbuilt = tuple[str, int, float, dict[str, Any]]  # an event's kind, seq, timestamp, fields


def _built(kept: ClusterEvent | _Unbuilt) -> ClusterEvent:
    if isinstance(kept, ClusterEvent):
        return kept
    kind, seq, timestamp, fields = kept
    return ClusterEvent(kind=kind, seq=seq, timestamp=timestamp, **fields)


class Outbox:
    """Constructed with the bus, the cluster's topics, whose each slave id is (its topic
    names its principal), the calls' counts (a refusal is a call's outcome) and the
    master's log; `clock`: the loop's, which sampling and the event stream's lease read."""

    def __init__(
        self,
        bus: Transport,
        topics: Topics,
        slave_owners: Mapping[str, str],
        messages: MessageCounts,
        log: Any,
        clock: Callable[[], float] = loop_time,
    ) -> None:
        self.bus, self.topics, self.log, self.clock = bus, topics, log, clock
        self._slave_owners = slave_owners
        self.messages = messages
        # topics served by another transport (a Mesos HTTP stream): what the master says
        # there goes to that sink, not to the bus
        self.sinks: dict[str, Callable[[Wire], None]] = {}
        self.refused: Counter[str] = Counter()  # calls refused, by reason code
        self.sampling = RefusalSampling()  # refusals' log lines and answers, per principal
        # what the event stream said, counted (the metrics read these), and the last of it
        self.event_counts: Counter[str] = Counter()
        self.tasks_ended: Counter[str] = Counter()  # by terminal state
        # the last events, each built only when read or watched (see `emit`): an event
        # or what makes one (kind, seq, timestamp, fields)
        self._recent: deque[ClusterEvent | _Unbuilt] = deque(maxlen=RECENT_EVENTS)
        self._unbuilt = False  # whether one of `_recent` is not built yet
        self.changes = Changes()  # who hears of each change
        # the event stream goes out on the bus until then (loop time): an operator's lease
        self.events_watched_until = 0.0
        self.events_emitted = 0  # each event's number (seq), for followers to see a gap
        self._stale = True  # the published state is older than the books
        # each slave's CheckpointResources last numbered (`checkpoint_resources`)
        self._resource_versions: dict[str, int] = {}

    # -- messages ---------------------------------------------------------------------------
    def send_framework(self, fw: Framework, message: Wire) -> None:
        if not fw.inbox:
            return  # recovered from the registry, not re-subscribed yet: nowhere to send
        self.send_topic(self.topics.framework(fw.principal, fw.inbox), message)

    def send_topic(self, topic: str, message: Wire) -> None:
        """To a framework's topic (its inbox, or where a call of its asked answers to go)."""
        sink = self.sinks.get(topic)
        if sink is not None:
            sink(message)
        else:
            self.bus.post(topic, message)

    def send_slave(self, slave_id: str, message: Wire) -> None:
        principal = self._slave_owners.get(slave_id)
        if principal is not None:
            self.bus.post(self.topics.slave(principal, slave_id), message)

    def checkpoint_resources(
        self, slave_id: str, resources: Resources, destroyed: Resources | None = None
    ) -> None:
        """What the slave is to keep (its dynamic reservations and volumes, whole; and
        the volumes a DESTROY took), numbered past every one before it: this master's
        epoch (a later leader's outranks it), then a number past both this master's last
        to the slave and the slave's own (`resource_version_reported`: a master of the
        same epoch before this one may have numbered it)."""
        version = self._resource_versions.get(slave_id, 0) + 1
        self._resource_versions[slave_id] = version
        message = CheckpointResources(
            slave_id=slave_id, resources=resources, epoch=self.bus.epoch, version=version,
            destroyed=destroyed or Resources(),
        )  # fmt: skip
        self.send_slave(slave_id, message)

    def resource_version_reported(self, slave_id: str, version: int) -> None:
        """The version of the last CheckpointResources the slave applied, as its
        (re-)registration says: the next is numbered past it."""
        if version > self._resource_versions.get(slave_id, 0):
            self._resource_versions[slave_id] = version

    def send_slave_as(self, principal: str, slave_id: str, message: Wire) -> None:
        """To a slave's topic under `principal`, whether or not the books know the slave."""
        self.bus.post(self.topics.slave(principal, slave_id), message)

    def refuse(
        self,
        caller: Caller | None,
        message: str,
        code: str,
        about: str,
        *,
        tell: bool = True,
        **ids: Any,
    ) -> None:
        """Refuse a call: an Error to its sender, a log line with who, a count; no change.
        Without `tell` no Error: the sender hears it otherwise (a task's update)."""
        self.refused[code] += 1
        self.messages.refused(about, code)
        if caller is not None and caller.refused is not None:
            caller.refused(code, message)
        principal = caller.principal if caller else ""
        now = self.clock()
        # A flood of bad calls must not become a flood of log lines or answers: each
        # principal gets a few lines a second (with how many were left out) and a few
        # hundred answers.
        who = {"kind": caller.kind, "principal": principal} if caller else {}
        said = {"reason": message, "code": code, "about": about, **who, **ids}
        sampled = self.sampling.line(principal, code, now, said)
        if sampled is not None:
            self._log_refused(said, sampled)
        answer = tell and caller is not None and caller.reply_to
        if answer and caller is not None and self.sampling.answer(principal, now):
            assert caller.reply_to is not None
            self.send_topic(
                caller.reply_to,
                Error(message=logs.clip(message, MAX_ERROR_TEXT), code=code, about=about),
            )

    def _log_refused(self, said: dict[str, Any], sampled: dict[str, Any]) -> None:
        # the reason and the ids a refused call named are its sender's text, of any
        # length (an id may be refused for its length): cut
        cut = {k: logs.clip(v) if isinstance(v, str) else v for k, v in said.items()}
        self.log.warning("master.refused", **cut, **sampled)

    def flush_refused(self) -> None:
        """Log the refusals' lines left out whose senders' rates let one now: a burst
        that stops is told whole, not only with its sender's next refusal (the master's
        timers ask, every tick)."""
        if self.sampling.unlogged:
            for _, said, sampled in self.sampling.due(self.clock()):
                self._log_refused(said, sampled)

    def count_refused(self, code: str, n: int = 1) -> None:
        """Refusals nobody is told of (a slave's claim the books do not take)."""
        self.refused[code] += n

    def sampled(self, principal: str, code: str) -> dict[str, Any] | None:
        """Whether a line about `principal` may be logged now (see RefusalSampling.line)."""
        return self.sampling.line(principal, code, self.clock())

    # -- the event stream -------------------------------------------------------------------
    def emit(self, kind: str, **fields: Any) -> None:
        """A change, told as an event (see the module's docstring). The event is built
        only when someone takes it: at once for the bus's stream and the change
        listeners while they watch, else when the recent events are read (a launch and a
        release a task, kept for /api/v1/events: building each was some 6% of a busy
        master's CPU in benchmarks.e2e)."""
        self.events_emitted += 1
        self.event_counts[kind] += 1
        if kind == "release" and (state := fields.get("state")) is not None:
            self.tasks_ended[TaskState(state).value] += 1
        self._stale = True
        watched = self.events_watched_until and self.clock() < self.events_watched_until
        if not watched and not self.changes.wanted:
            self._recent.append((kind, self.events_emitted, time.time(), fields))
            self._unbuilt = True
            return
        # (validated as built: pydantic-core's validation is several times quicker than
        # `model_construct`, whose default factories (the timestamp's, resources') cost
        # an `inspect.signature` each)
        event = ClusterEvent(kind=kind, seq=self.events_emitted, **fields)
        if watched:
            self.bus.post(self.topics.events, event, qos=0, lazy=True)
        self._recent.append(event)
        self.changes.emit(event)

    @property
    def recent_events(self) -> deque[ClusterEvent]:
        """The last RECENT_EVENTS events, oldest first."""
        if self._unbuilt:
            self._recent = deque(map(_built, self._recent), maxlen=RECENT_EVENTS)
            self._unbuilt = False
        return self._recent  # type: ignore[return-value]  # (all built now)

    def watch_events(self, seconds: float) -> None:
        """Publish the event stream for (at least) the next `seconds` (WatchEvents)."""
        self.events_watched_until = max(self.events_watched_until, self.clock() + seconds)

    def task_changed(self, task: Task, *, added: bool = False) -> None:
        """A task's state changed (or it became known) where no event says so: told to
        the change listeners that want tasks, not to the bus's event stream."""
        if self.changes.tasks_wanted:
            self.changes.emit(
                ClusterEvent(
                    kind=TASK_ADDED if added else TASK_UPDATED,
                    framework_id=task.framework_id,
                    slave_id=task.slave_id,
                    task_id=task.task_id,
                    state=task.state,
                )
            )

    def state_changed(self) -> None:
        """The published state is stale: the next state tick publishes it again."""
        self._stale = True

    def take_stale(self) -> bool:
        """Whether the published state is stale; it is taken to be fresh from now."""
        stale, self._stale = self._stale, False
        return stale
