"""A slave process's heartbeats for its logical slaves, taken in one pass.

A `Heartbeats` message names up to 4,096 slaves. Each counts only for a slave registered
under the principal whose topic the message came on (the payload proves nothing); the
ones that do not are returned, for the master to tell them to register again. One
message is one call on the master's loop, a dict lookup an id: at 50,000 slaves and a
15 s interval, some 3,300 ids a second in a dozen messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

from protocol import logs

log = logs.get("master")


class Heard(Protocol):
    principal: str
    last_seen: float
    incarnation: str


def take_heartbeats(
    slaves: Mapping[str, Heard], ids: Iterable[str], principal: str, now: float, incarnation: str
) -> list[str]:
    """Mark the sender's own slaves among `ids` heard at `now`; the ids that are not."""
    unknown = []
    for slave_id in ids:
        slave = slaves.get(slave_id)
        if slave is None or slave.principal != principal:
            unknown.append(slave_id)
            continue
        slave.last_seen = now
        if incarnation:
            slave.incarnation = incarnation
    return unknown


H = TypeVar("H", bound=Heard)


def silent(
    slaves: Iterable[H], now: float, timeout: float, behind: float, probe_interval: float
) -> list[H]:
    """The slaves unheard for `timeout`, counted from what the master could have read,
    as Mesos's ping timeout counts: a master `behind` seconds in reading its calls has not
    seen what slaves sent in the last `behind` seconds (their heartbeats wait in its own
    backlog), so their silence is that much shorter than it looks. The lag probe sees a
    wait up to `probe_interval` late: that too, once the master is behind at all."""
    behind += probe_interval if behind > 0 else 0.0
    horizon = now - timeout - behind
    found: list[H] = []
    spared = 0
    for slave in slaves:
        if slave.last_seen < horizon:
            found.append(slave)
        elif behind and slave.last_seen < horizon + behind:
            spared += 1  # silent past the timeout if the backlog were not counted
    if spared:
        log.info("slaves.expiry_deferred", behind=round(behind, 3), slaves=spared)
    return found
