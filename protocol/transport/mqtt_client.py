"""The MQTT client one connection of the bus uses, and what a failed connection says.

Every connection of a `Bus` is a fresh aiomqtt client: its client id is the principal's
name and a part no other principal can compute when it has one (`connection_id`), its Last
Will announces this incarnation as `Gone`, Nagle is off on its socket (TCP_NODELAY:
without it a QoS 1 round trip is ~88 ms), and its arrivals are stamped with when they came
(see `StampedQueue`).

Its (un)subscribe calls wait for the broker's answer under our deadline, not aiomqtt's:
aiomqtt's is a Python 3.11 `asyncio.wait_for`, which loses a cancel that comes as the
answer does (see `within`). Its connect and disconnect still wait in aiomqtt's: the bus's
connection loop makes them, and `Bus.close` stops that loop with `cancel_and_wait`, which
cancels again until it has stopped (and a disconnect after a cancelled connect is quiet:
`_disconnects_told_once`).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import math
import socket
import ssl
from collections.abc import Awaitable
from typing import Any

import aiomqtt

from protocol.tooling.brokers import BrokerURL
from protocol.transport.aio import within
from protocol.transport.backlog import StampedQueue
from protocol.wire.codec import encode
from protocol.wire.messages import Gone

MQTT_LOG = logging.getLogger("mqtt")
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
ANSWER_TIMEOUT = 10.0  # seconds the broker may take to answer a call (aiomqtt's default)


def mqtt_client(
    broker: BrokerURL,
    client_id: str,
    *,
    will: tuple[str, str, str, str] | None,
    persistent: bool,
    keepalive: int,
) -> aiomqtt.Client:
    """A client for one connection to `broker`. `will`: the topic, kind, party id and
    incarnation its `Gone` names."""
    last_will = None
    if will is not None:
        topic, kind, party_id, incarnation = will
        gone = Gone(kind=kind, id=party_id, incarnation=incarnation)
        last_will = aiomqtt.Will(topic, encode(gone), qos=1, retain=False)
    client = aiomqtt.Client(
        broker.host,
        broker.port,
        username=broker.username,
        password=broker.password,
        identifier=connection_id(broker, client_id),
        tls_context=broker.ssl_context(),
        clean_session=not persistent,
        keepalive=keepalive,
        will=last_will,
        socket_options=NODELAY,
        max_inflight_messages=1000,
        timeout=ANSWER_TIMEOUT,
        logger=MQTT_LOG,
        queue_type=StampedQueue,  # stamped: how long arrivals wait (see Bus.backlog())
    )
    _disconnects_told_once(client)
    return client


def connection_id(broker: BrokerURL, client_id: str) -> str:
    """The MQTT client id a connection uses. A principal may hold many connections at once
    (frameworks, `drfmesos run`s, a `why` beside them, slaves), as Mesos lets many
    frameworks share a principal; each needs a client id of its own, or the broker closes
    one when the next connects. An authenticated connection's id is its principal's name,
    `~`, and an HMAC of the bus's own id under the principal's secret: the embedded broker
    admits only ids under the username's name, and mosquitto, which cannot bind ids to
    usernames but by using the username as the id, is given ids no other principal can
    compute, so none can take another's session over. The same bus id gives the same
    client id, so a persistent session (a slave's, the masters' one) resumes."""
    if not broker.username:
        return client_id
    key = (broker.password or "").encode()
    tag = hmac.new(key, client_id.encode(), hashlib.sha256).hexdigest()[:32]
    return f"{broker.username}{ID_SEPARATOR}{tag}"


ID_SEPARATOR = "~"  # (no principal's name holds one: credentials.NAME)


def _disconnects_told_once(client: aiomqtt.Client) -> None:
    """aiomqtt's disconnect callback reads its connect's outcome, which raises when that
    connect was cancelled (a bus closed while connecting): the loop logged the error.
    And a disconnect's error nobody awaits any more (its bus closed) was logged when
    collected. Neither is news: the bus has its own account of what ended."""
    inner: Any = client._client.on_disconnect

    def on_disconnect(*args: Any) -> None:
        if client._connected.cancelled():
            return
        inner(*args)
        ended = client._disconnected
        if ended.done() and not ended.cancelled():
            ended.exception()  # (marked seen; whoever awaits it still gets it)

    client._client.on_disconnect = on_disconnect


async def mqtt_subscribe(client: aiomqtt.Client, topic: str, qos: int) -> None:
    """Subscribe, once the broker has answered (MqttError if it does not in time)."""
    await _answered(client.subscribe(topic, qos=qos, timeout=math.inf), f"SUBACK for {topic}")


async def mqtt_unsubscribe(client: aiomqtt.Client, topic: str) -> None:
    """Unsubscribe, once the broker has answered (MqttError if it does not in time)."""
    await _answered(client.unsubscribe(topic, timeout=math.inf), f"UNSUBACK for {topic}")


async def _answered(call: Awaitable[object], answer: str) -> None:
    """`call` (made with no deadline of aiomqtt's), under ours; MqttError as aiomqtt's."""
    try:
        await within(call, ANSWER_TIMEOUT)
    except TimeoutError:
        raise aiomqtt.MqttError(f"no {answer} in {ANSWER_TIMEOUT:g} s") from None


def refusal(error: aiomqtt.MqttError, broker: BrokerURL) -> str | None:
    """Why a failed connection attempt is final, or None if it is worth retrying."""
    said = str(error).lower()
    if isinstance(error, aiomqtt.MqttCodeError) and ("authoriz" in said or "password" in said):
        if not broker.username:  # (a secret, or none, with no principal named)
            return (
                f"the broker at {broker.bare} refused a connection that names no principal "
                f"({error}): name yours, as in {broker.scheme}://NAME@{broker.host}:{broker.port}"
            )
        return (
            f"the broker at {broker.bare} refused the credentials of principal "
            f"{broker.username!r} ({error}): a wrong secret, or a principal it does not know"
        )
    cause = error.__cause__ or error.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"the broker's certificate is not trusted: {cause.verify_message} (--ca?)"
    return None


def unreachable(error: aiomqtt.MqttError, broker: BrokerURL) -> str:
    """Why an attempt to connect to `broker` failed, in words a person can act on: refused
    (nothing listens there), an unknown host, unreachable, no answer, or TLS failing."""
    cause = error.__cause__ or error.__context__
    where = f"{broker.host}:{broker.port}"
    if isinstance(cause, ConnectionRefusedError):
        return f"connection refused: nothing listens at {where} (is the broker running there?)"
    if isinstance(cause, socket.gaierror):
        return f"unknown host {broker.host!r} ({cause.strerror})"
    if isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return f"{where} is unreachable ({cause.strerror})"
    if broker.tls and isinstance(cause, ssl.SSLError | ConnectionResetError | TimeoutError):
        return f"TLS with {where} fails: {cause or 'no handshake'} (a broker without TLS? mqtt://)"
    if isinstance(cause, TimeoutError):
        return f"no MQTT answer from {where} (a broker with TLS? mqtts://; or a firewall)"
    return str(error)


KEEPALIVE_TIMEOUT = 0x8D  # paho's reason for a connection whose pings went unanswered


def broker_ended(error: aiomqtt.MqttError) -> bool:
    """Did the broker end this connection (closed it), rather than our pings going
    unanswered?"""
    code = getattr(error.__cause__, "rc", None)
    return getattr(code, "value", None) != KEEPALIVE_TIMEOUT
