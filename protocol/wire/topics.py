"""The MQTT topic layout, under one cluster prefix `<p>` = `drfmesos/<cluster>`.

    <p>/in/<kind>/<principal>              a party's calls to the master
    <p>/out/framework/<principal>/<inbox>  the master's events for one framework driver
    <p>/out/slave/<principal>/<slave_id>   the master's orders for one slave
    <p>/out/operator/<principal>           the master's answers to an operator's tools
    <p>/gone/<kind>/<principal>            Last Wills: the broker announces a vanished party
    <p>/leader                             the leading master's announcement (retained),
                                           and its beat: the same again, not retained,
                                           every heartbeat interval
    <p>/state                              the master's snapshot (retained)
    <p>/events                             the master's event stream

Identity comes from the topic, never from a payload: the broker lets a principal publish
only under `in/<its kind>/<its name>` (see `protocol.tooling.credentials.acl_rules`), so the master
knows who sent a call by where it arrived. Only the master writes under `out/`.

Several clusters can share one broker by using different names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROOT = "drfmesos"  # every cluster's topics are under it
# characters of a topic a call names for its answers, at most (a framework's inbox under
# its outbox is far shorter; one of 70,000 was once taken, and could not be published to)
MAX_REPLY_TOPIC = 256
_SAFE = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
SENDER_KINDS = ("slave", "framework", "operator")


def check_segment(value: str, what: str = "id") -> str:
    """Ids become topic segments, so they may not hold MQTT wildcards or separators."""
    if not _SAFE.fullmatch(value):  # (match's `$` would let a trailing newline through)
        raise ValueError(f"{what} {value!r} must be 1-200 chars of letters, digits, _ . : @ -")
    return value


def too_long(reply_topic: str) -> str | None:
    """Why a topic cannot take answers for its length, or None."""
    if len(reply_topic) <= MAX_REPLY_TOPIC:
        return None
    return f"reply topic is {len(reply_topic):,} characters: at most {MAX_REPLY_TOPIC}"


ANNOUNCED = ("leader", "state")  # the master's: the only topics read retained


def announced(topic: str) -> bool:
    """Whether a retained message on `topic` is read: only on the master's announcements
    (`<p>/leader`, `<p>/state`). Anywhere else it is somebody's call the broker kept (a
    tenant may publish retained on its own call topic), to be replayed to every master
    that starts; nobody reads it."""
    prefix, _, rest = topic.partition("/")
    return prefix == ROOT and rest.partition("/")[2] in ANNOUNCED


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a call, as the topic it arrived on proves."""

    kind: str
    principal: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.principal}"


@dataclass(frozen=True, slots=True)
class Topics:
    cluster: str = "default"

    def __post_init__(self) -> None:
        check_segment(self.cluster, "cluster name")

    @property
    def prefix(self) -> str:
        return f"{ROOT}/{self.cluster}"

    # -- to the master ------------------------------------------------------------------------
    def inbound(self, kind: str, principal: str) -> str:
        return f"{self.prefix}/in/{kind}/{principal}"

    @property
    def inbound_all(self) -> str:
        return f"{self.prefix}/in/+/+"

    def sender(self, topic: str) -> Sender | None:
        """The sender a topic under `in/` names, or None for any other topic."""
        head, _, rest = topic.partition(f"{self.prefix}/in/")
        kind, _, principal = rest.partition("/")
        if head or kind not in SENDER_KINDS or not principal or "/" in principal:
            return None
        return Sender(kind, principal)

    # -- from the master ----------------------------------------------------------------------
    def outbox(self, kind: str, principal: str) -> str:
        """Everything the master sends one principal (subscribe to this plus `/#`)."""
        return f"{self.prefix}/out/{kind}/{principal}"

    def framework(self, principal: str, inbox: str) -> str:
        return f"{self.outbox('framework', principal)}/{inbox}"

    def slave(self, principal: str, slave_id: str) -> str:
        return f"{self.outbox('slave', principal)}/{slave_id}"

    def slaves_of(self, principal: str) -> str:
        return f"{self.outbox('slave', principal)}/+"

    def operator(self, principal: str) -> str:
        return self.outbox("operator", principal)

    def owns_reply_topic(self, sender: Sender, topic: str | None) -> bool:
        """May answers for `sender` go to `topic`? Only inside its own outbox, and only
        one of at most MAX_REPLY_TOPIC characters."""
        return topic is not None and self.in_outbox(sender, topic) and not too_long(topic)

    def in_outbox(self, sender: Sender, topic: str) -> bool:
        """Whether `topic` names a place in `sender`'s own outbox (of any length)."""
        box = self.outbox(sender.kind, sender.principal)
        if any(c in topic for c in "+#") or not topic.isprintable():
            return False  # a wildcard is no address; a control character breaks the session
        return topic == box or topic.startswith(box + "/")

    # -- the broker and the tools -------------------------------------------------------------
    def gone(self, kind: str, principal: str) -> str:
        return f"{self.prefix}/gone/{kind}/{principal}"

    @property
    def gone_all(self) -> str:
        return f"{self.prefix}/gone/+/+"

    @property
    def leader(self) -> str:
        return f"{self.prefix}/leader"

    @property
    def state(self) -> str:
        return f"{self.prefix}/state"

    @property
    def events(self) -> str:
        return f"{self.prefix}/events"
