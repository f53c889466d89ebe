"""The SDK's one error family: everything a framework can meet starting or running.

Catch `DriverError` for all of them, or a subclass for one case:

- `BrokerRefused`: the broker will not let this principal in (a wrong secret, an unknown
  principal, a certificate not trusted: `--ca`). Also a `BusRefused`, the transport's own.
- `BrokerUnreachable`: no connection to the broker in time. Also a `TimeoutError`.
- `MasterUnreachable`: connected, but no master answered the subscribe in time. Also a
  `TimeoutError`.
- `SubscribeRefused`: the master refused to register the framework; `RoleRefused`
  (a role the principal was not given), `TooManyFrameworks` (the principal's most) and
  `FrameworkRemoved` (a framework id the master has removed) say which case.
- a plain `DriverError`: a call the driver refuses (an offer that is gone, more than an
  offer holds, a file that cannot be read).

A framework the master removes while it runs (torn down, failover timeout passed) is
told through `Scheduler.error`; the driver then stops and `driver.removed` says why. So
is a driver whose framework another process took over (`FailedOver`: it subscribed with
the framework's id); the framework and its tasks go on, that process's.
"""

from __future__ import annotations

from protocol.transport.base import BusClosed, BusRefused


class DriverError(RuntimeError):
    """The SDK refused a call, or could not start or keep the framework: the base of every
    error the SDK raises to a framework."""


class BrokerRefused(DriverError, BusRefused):
    """The broker refused this principal for good: a wrong secret, an unknown principal, or
    a broker certificate the given CA does not trust. Retrying cannot help."""


class BrokerUnreachable(DriverError, TimeoutError):
    """No connection to the broker within the start's timeout (wrong address or port?)."""


class MasterUnreachable(DriverError, TimeoutError):
    """Connected to the broker, but no master answered the subscribe within the timeout
    (no master running on this cluster name?)."""


class SubscribeRefused(DriverError):
    """The master refused to register this framework; the message says why."""


class RoleRefused(SubscribeRefused):
    """The role asked for is not one this principal was given (`drfmesos auth add --roles`),
    or is not a valid role under the master's policy."""


class TooManyFrameworks(SubscribeRefused):
    """The principal already has the most frameworks registered the master allows
    (`--max-frameworks-per-principal`): tear one down first."""


class FrameworkRemoved(SubscribeRefused):
    """The framework id asked for belongs to a framework the master has removed."""


def connecting(error: BusClosed | TimeoutError, broker: str) -> DriverError:
    """What a failed connection to the broker is to a framework: refused (BusRefused is
    the MQTT bus's; a closed memory transport is its refusal), or no broker in time."""
    if isinstance(error, BusClosed):
        return BrokerRefused(f"{broker}: {error}")
    return BrokerUnreachable(str(error))


class PrincipalRemoved(SubscribeRefused):
    """The framework's principal was removed from the cluster's credentials store (`drfmesos
    auth remove`): the master disconnected it and takes no call of its."""


class FailedOver(DriverError):
    """Another scheduler process subscribed with this framework's id (its failover): the
    master serves that one now and ignores this one's calls, as Mesos's "Framework failed
    over". The framework is not removed: its tasks are the new process's."""


FATAL: dict[str, type[DriverError]] = {
    "subscribe-refused": SubscribeRefused,
    "role-refused": RoleRefused,
    "too-many-frameworks": TooManyFrameworks,
    "framework-removed": FrameworkRemoved,
    "principal-removed": PrincipalRemoved,
    "failed-over": FailedOver,
}
"""The master's error codes after which it will not serve a framework (its driver stops),
and what a start refused with each raises."""
