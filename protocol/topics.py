"""The MQTT topic layout, under one cluster prefix (`drfmesos/<cluster>`).

    <p>/master                      calls from frameworks and slaves to the master
    <p>/framework/<inbox>           events from the master to one framework
    <p>/slave/<slave_id>            master -> slave, and executor -> its slave
    <p>/executor/<slave_id>/<key>   slave -> one custom executor
    <p>/gone/<kind>/<id>            Last Wills: the broker announces a party that vanished
    <p>/state                       the master's snapshot (retained)
    <p>/events                      the master's event stream (allocations, launches, ...)

Several clusters can share one broker by using different names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SAFE = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")


def check_segment(value: str, what: str = "id") -> str:
    """Ids become topic segments, so they may not hold MQTT wildcards or separators."""
    if not _SAFE.match(value):
        raise ValueError(f"{what} {value!r} must be 1-200 chars of letters, digits, _ . : @ -")
    return value


@dataclass(frozen=True, slots=True)
class Topics:
    cluster: str = "default"

    def __post_init__(self) -> None:
        check_segment(self.cluster, "cluster name")

    @property
    def prefix(self) -> str:
        return f"drfmesos/{self.cluster}"

    @property
    def master(self) -> str:
        return f"{self.prefix}/master"

    def framework(self, inbox: str) -> str:
        return f"{self.prefix}/framework/{inbox}"

    def slave(self, slave_id: str) -> str:
        return f"{self.prefix}/slave/{slave_id}"

    def executor(self, slave_id: str, key: str) -> str:
        return f"{self.prefix}/executor/{slave_id}/{key}"

    def gone(self, kind: str, party_id: str) -> str:
        return f"{self.prefix}/gone/{kind}/{party_id}"

    @property
    def gone_all(self) -> str:
        return f"{self.prefix}/gone/#"

    @property
    def state(self) -> str:
        return f"{self.prefix}/state"

    @property
    def events(self) -> str:
        return f"{self.prefix}/events"
