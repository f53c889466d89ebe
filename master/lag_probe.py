"""How long a message waits before the master reads it, measured with a probe.

The backlog of a master that cannot keep up is mostly outside it: in the broker's queue
for its session and in its socket (the MQTT client reads one packet a turn of the loop).
So the master measures it the way a message lives it: it publishes a probe, now and
then, to a topic it reads itself, and times how long the probe takes to come back. The
probe waits behind every call queued for the master at that moment, so its round trip is
how far behind the master is; and a probe not back yet has waited at least its age.

The topic is the master's own `gone/master/<principal>`: the one its broker ACL lets it
both write and read (see protocol.tooling.credentials.acl_rules), and no other party reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MAX_OUTSTANDING = 64  # probes remembered while none comes back (a broker that drops them)


class LagProbe:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._sent: dict[int, float] = {}  # probe number: when it was sent
        self._next = 0
        self.returned = 0  # probes back (none: the broker does not deliver them)
        self.last_lag = 0.0  # seconds the last probe back took

    def send(self) -> bytes:
        """A new probe's payload, noted as sent now."""
        self._next += 1
        self._sent[self._next] = self._clock()
        if len(self._sent) > MAX_OUTSTANDING:
            del self._sent[min(self._sent)]
        return b"probe %d" % self._next

    def back(self, payload: bytes) -> float | None:
        """A probe came back: its round trip (returned; None if it is not one of ours);
        probes sent before it are not coming."""
        try:
            number = int(payload.removeprefix(b"probe "))
        except ValueError:
            return None
        sent = self._sent.pop(number, None)
        if sent is None:
            return None
        self.returned += 1
        self.last_lag = self._clock() - sent
        for earlier in [n for n in self._sent if n < number]:
            del self._sent[earlier]
        return self.last_lag

    def oldest_waiting(self) -> float:
        """Seconds the oldest probe not back has waited: at least as long as the calls
        queued ahead of it. 0 until one has come back (a broker that never delivers
        them must not look like a master falling behind)."""
        if not self.returned or not self._sent:
            return 0.0
        return self._clock() - min(self._sent.values())


@dataclass(frozen=True)
class Backlog:
    """How far behind the master is in reading its calls (/metrics, /health)."""

    messages: int  # received from the broker, not yet handled
    oldest_wait: float  # seconds the oldest message not yet handled has waited, at least
    last_wait: float  # seconds the last probe back (else the last message) waited


def backlog_of(queued: int, queue_ages: tuple[float, float], probe: LagProbe) -> Backlog:
    """The bus's inbound queue and the probe, together: the queue sees the messages the
    MQTT client has read, the probe the ones still at the broker or in the socket."""
    queue_oldest, queue_last = queue_ages
    last = probe.last_lag if probe.returned else queue_last
    return Backlog(queued, max(queue_oldest, probe.oldest_waiting()), last)
