"""The MQTT client one connection of the bus uses, and what a failed connection says.

Every connection of a `Bus` is a fresh aiomqtt client: its client id is the principal's
name when it has one (the broker insists), its Last Will announces this incarnation as
`Gone`, Nagle is off on its socket (TCP_NODELAY: without it a QoS 1 round trip is ~88 ms),
and its arrivals are stamped with when they came (see `StampedQueue`).
"""

from __future__ import annotations

import logging
import socket
import ssl

import aiomqtt

from protocol.tooling.brokers import BrokerURL
from protocol.transport.backlog import StampedQueue
from protocol.wire.codec import encode
from protocol.wire.messages import Gone

MQTT_LOG = logging.getLogger("mqtt")
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


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
    return aiomqtt.Client(
        broker.host,
        broker.port,
        username=broker.username,
        password=broker.password,
        # an authenticated connection's client id is its principal (the broker insists)
        identifier=broker.username or client_id,
        tls_context=broker.ssl_context(),
        clean_session=not persistent,
        keepalive=keepalive,
        will=last_will,
        socket_options=NODELAY,
        max_inflight_messages=1000,
        timeout=10,
        logger=MQTT_LOG,
        queue_type=StampedQueue,  # stamped: how long arrivals wait (see Bus.backlog())
    )


def refusal(error: aiomqtt.MqttError) -> str | None:
    """Why a failed connection attempt is final, or None if it is worth retrying."""
    said = str(error).lower()
    if isinstance(error, aiomqtt.MqttCodeError) and ("authoriz" in said or "password" in said):
        return f"the broker refused the credentials ({error})"
    cause = error.__cause__ or error.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"the broker's certificate is not trusted: {cause.verify_message} (--ca?)"
    return None
