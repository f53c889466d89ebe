"""What an operator's command says when the broker refuses it (a newcomer's wrong secret,
or a `--broker` without its principal): the refusal and what to fix, and nothing about
operator principals, which only a command the broker silently ignores (its ACL: a team's
principal on an operator's topics) needs to hear."""

from __future__ import annotations

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from cluster.local.reaching import bus_failure
from protocol.tooling.brokers import BrokerURL
from protocol.transport.base import BusRefused, PublishDropped
from protocol.transport.mqtt_client import refusal


def refused(url: BrokerURL) -> str:
    """What the bus says of the broker's CONNACK refusing `url`'s credentials."""
    connack = ReasonCode(PacketTypes.CONNACK, "Not authorized")
    why = refusal(aiomqtt.MqttCodeError(connack), url)
    assert why is not None
    return why


def test_a_wrong_secret_is_said_without_the_operator_hint() -> None:
    url = BrokerURL.parse("mqtts://ops@127.0.0.1:8883")
    said = bus_failure(BusRefused(refused(url)), url)
    assert "refused the credentials of principal 'ops'" in said
    assert "a wrong secret" in said
    assert "operator principal" not in said, said


def test_an_untrusted_certificate_is_said_without_the_operator_hint() -> None:
    url = BrokerURL.parse("mqtts://ops@127.0.0.1:8883")
    said = bus_failure(BusRefused("the broker's certificate is not trusted: x (--ca?)"), url)
    assert said == "the broker's certificate is not trusted: x (--ca?)"


def test_a_broker_url_without_a_principal_says_to_name_one() -> None:
    url = BrokerURL.parse("mqtts://127.0.0.1:8883")
    said = refused(url)
    assert "names no principal" in said
    assert "mqtts://NAME@127.0.0.1:8883" in said


def test_a_publish_the_acl_drops_still_says_it_takes_an_operator() -> None:
    url = BrokerURL.parse("mqtts://web-team@127.0.0.1:8883")
    dropped = PublishDropped("the broker closed this connection 5 times as it published")
    said = bus_failure(dropped, url)
    assert said.startswith("the broker closed this connection 5 times as it published. ")
    assert "takes an operator principal" in said
