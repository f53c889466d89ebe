"""A bus's account of its connection: how long to wait before the next attempt, what to
tell a person while it has none, and when to stop trying.

- No broker: once it has waited TELL_AFTER seconds, the bus says at warning what it waits
  for and why (refused, an unknown host, unreachable, no answer, TLS failing), and again
  every TELL_AGAIN seconds or when the reason changes; once connected it says so at the
  same level. Credentials or a certificate refused are final (`mqtt_client.refusal`).
- Taken over: a party that keeps a persistent session keeps one client id (a slave's
  comes from its slave id, the masters share one), so a second connection with the same
  one makes the broker close the first, which reconnects and closes the second, and so
  on. MQTT 3.1.1, which both our brokers
  speak (amqtt knows no other), gives the closed one no reason: the sign is a connection
  that the broker ends, and the next one it ends soon after it was made, while each next
  attempt gets in at once. Each such end waits longer before the next attempt; the
  second is told plainly, the third ends the bus (`ConnectedElsewhere`). The incumbent
  counts the end of its long connection as the first (the broker ended it while it was
  reachable: a takeover's first sign); the newcomer's first end is already a short one
  and it started later, so the incumbent gives up one takeover before the newcomer
  would (an incumbent whose connection was young counts it as short: it still ends first).
  The last to connect keeps the principal, as MQTT means it to, and says it took it over
  once its connection has lasted SHORT seconds (`held`): before that it cannot know.
- Dropped for what it sent: mosquitto closes a 3.1.1 connection that publishes where its
  ACL forbids, and the bus sends the unacknowledged message again after the reconnect.
  The same message in flight at two such ends in a row is that, not a takeover: said so,
  and final at the third.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiomqtt

from protocol.tooling.brokers import BrokerURL
from protocol.transport.base import BusRefused, ConnectedElsewhere, PublishDropped
from protocol.transport.batching import Outgoing
from protocol.transport.mqtt_client import broker_ended, refusal, unreachable

FIRST_DELAY = 0.05  # seconds before reconnecting after an ordinary end, doubling per failure
MOST_DELAY = 2.0  # seconds between attempts at most
TELL_AFTER = 1.0  # seconds without a connection before the wait is told
TELL_AGAIN = 10.0  # seconds between two tellings of the same wait
SHORT = 5.0  # seconds: a connection the broker ends sooner may have been taken over (the
# delays before the third such end are 1.5 s in all: room for a loaded machine)
SHORT_DELAY = 0.5  # seconds before reconnecting after the first short end, doubling
TOLD_AT = 2  # short ends in a row that are told as a takeover (or an ACL's drop)
FINAL_AT = 3  # ... and after which the bus gives up


class Reconnects:
    def __init__(
        self,
        log: Any,
        broker: BrokerURL,
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.broker, self.clock = log, broker, clock
        self.who = f"principal {broker.username}" if broker.username else f"client id {client_id}"
        self.reason: str | None = None  # what the last failed attempt met
        self.failures = 0  # attempts failed since the last connection
        # the last attempt waited out its time for an answer (nothing answered as a broker:
        # TLS spoken to as mqtt://, a firewall): a command need not wait so again
        self.unanswered = False
        self._delay = FIRST_DELAY
        self._waiting_since = clock()
        self._told: tuple[float, str] | None = None  # when the wait was last told, and why
        self._opened_at = 0.0
        self._open = False  # a connection is up
        self._short = 0  # short ends in a row, the broker's doing (a takeover's sign)
        self._newcomer = False  # the first of them ended a short connection: we came last
        self._dropped = 0  # of those, ends in a row with the same message in flight
        self._in_flight: Outgoing | None = None  # the oldest unacknowledged at the last end

    def failed(self, error: aiomqtt.MqttError) -> float | BusRefused:
        """An attempt to connect failed: seconds to wait before the next, or why never."""
        why = refusal(error, self.broker)
        if why is not None:
            self.log.error("bus.refused", broker=str(self.broker), reason=why)
            return BusRefused(why)
        self.failures += 1
        self.unanswered = isinstance(error.__cause__ or error.__context__, TimeoutError)
        self._short = self._dropped = 0  # the broker was away: not a takeover
        self.reason = reason = unreachable(error, self.broker)
        now = self.clock()
        waited = now - self._waiting_since
        told = self._told
        new = told is None or now - told[0] >= TELL_AGAIN or told[1] != reason
        if waited >= TELL_AFTER and new:
            self._told = (now, reason)
            self.log.warning(
                "bus.waiting_for_broker",
                broker=str(self.broker),
                waited=round(waited, 1),
                detail=f"cannot reach the broker at {self.broker.bare}: {reason}; "
                f"trying again every {MOST_DELAY:g} s",
            )
        else:
            self.log.debug("bus.connect_failed", broker=str(self.broker), reason=reason)
        delay, self._delay = self._delay, min(self._delay * 2, MOST_DELAY)
        return delay

    def opened(self) -> float:
        """The broker accepted a connection (CONNACK): when, to name it to `held`."""
        self._opened_at, self._open = self.clock(), True
        return self._opened_at

    def held(self, opened_at: float) -> None:
        """The connection opened at `opened_at`, if it is still open, has lasted SHORT
        seconds: if it fought another for its principal, it won (say so, once)."""
        if not self._open or opened_at != self._opened_at:
            return
        if self._newcomer and self._short >= TOLD_AT:
            self.log.warning(
                "bus.took_over",
                broker=str(self.broker),
                detail=f"this connection took {self.who} over from another connection with "
                f"the same {self._credentials()}, another process's: the broker closed that "
                "one, which gave up (its log says bus.taken_over)",
            )
        self._short = self._dropped = 0
        self._newcomer = False

    def connected(self, **fields: Any) -> None:
        """Subscribed and ready: said at warning if the wait before it was (else info)."""
        told = self._told is not None or self._short >= TOLD_AT
        if told:  # (the line that closes a warning is said where the warning was)
            waited = round(self.clock() - self._waiting_since, 1)
            self.log.warning("bus.connected", broker=str(self.broker), waited=waited, **fields)
        else:
            self.log.info("bus.connected", broker=str(self.broker), **fields)
        self._told, self.reason, self.failures, self._delay = None, None, 0, FIRST_DELAY
        self.unanswered = False

    def ended(self, error: aiomqtt.MqttError, in_flight: Outgoing | None) -> float | BusRefused:
        """A connection ended (`in_flight`: its oldest message not yet acknowledged): seconds
        to wait before reconnecting, or why never."""
        now = self.clock()
        self._waiting_since, self._open = now, False
        ended_by_broker = broker_ended(error)
        cause = "the broker closed it" if ended_by_broker else str(error.__cause__ or error)
        if not ended_by_broker:
            self._short = self._dropped = 0
            self.log.warning("bus.disconnected", broker=str(self.broker), error=cause)
            self._delay = FIRST_DELAY * 2
            return FIRST_DELAY
        if now - self._opened_at >= SHORT:  # maybe taken over: the first sign (see above)
            self._short, self._newcomer = 1, False
            self._dropped, self._in_flight = int(in_flight is not None), in_flight
            self.log.warning("bus.disconnected", broker=str(self.broker), error=cause)
            self._delay = FIRST_DELAY * 2
            return FIRST_DELAY
        if self._short == 0 and self._dropped == 0:
            self._newcomer = True
        same = in_flight is not None and in_flight is self._in_flight
        self._in_flight = in_flight
        self._dropped = self._dropped + 1 if same else int(in_flight is not None)
        self._short = 0 if same else self._short + 1
        ends = max(self._short, self._dropped)
        if self._dropped >= TOLD_AT and in_flight is not None:
            said = (
                f"the broker closed this connection {ends} times as it published to "
                f"{in_flight.topic}: {self.who} may not publish there (the broker's ACL)"
            )
            if ends >= FINAL_AT:
                self.log.error("bus.dropped", broker=str(self.broker), detail=said)
                return PublishDropped(said)
            self.log.warning("bus.dropped", broker=str(self.broker), detail=said)
        elif self._short >= TOLD_AT:
            final = ends >= FINAL_AT
            closed = f"the broker closed this connection {ends} times within moments of opening it"
            if self._newcomer and not final:
                said = f"{self.who} is connected elsewhere too: {closed}, as the other came back"
                self.log.warning("bus.taking_over", broker=str(self.broker), detail=said)
            else:
                said = (
                    f"{self.who} was taken over by another connection with the same "
                    f"{self._credentials()}: another process uses them ({closed})"
                )
                if final:
                    said = f"{said}: this one gives up; {self._remedy()}"
                    self.log.error("bus.taken_over", broker=str(self.broker), detail=said)
                    return ConnectedElsewhere(said)
                said = f"{said}; this one gives up at {FINAL_AT}"
                self.log.warning("bus.taken_over", broker=str(self.broker), detail=said)
        else:
            self.log.warning("bus.disconnected", broker=str(self.broker), error=cause)
        delay = SHORT_DELAY * 2.0 ** (ends - 1)
        self._delay = min(delay * 2, MOST_DELAY)
        return delay

    def _credentials(self) -> str:
        # (a principal holds many connections, each its own id: mqtt_client.connection_id;
        # one id twice is one party started twice)
        return "credentials and client id" if self.broker.username else "client id"

    def _remedy(self) -> str:
        return "two slaves with one --work-dir, or two masters of one cluster without ZooKeeper?"
