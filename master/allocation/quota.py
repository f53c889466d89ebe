"""Quota, as Mesos 1.9 has it: a role's guarantee and its limit.

- A *limit* caps what a role's subtree may hold (offered or in use): offers to its
  frameworks are cut down to fit under it (a role at its cpus limit may still be offered
  a slave's memory, as in Mesos). A zero is a limit, and freezes the role: `cpus: 0` is
  offered nothing at all (Mesos would offer it the memory); a resource not named is
  unlimited. Lowering a limit below what a role holds kills nothing, as in Mesos: its
  running tasks run on, and what they give back is not offered to it again until it is
  under its limit.
- A *guarantee* is what a role gets before anyone else gets more than their own
  guarantee: roles below their guarantee are served first (on a slave with some of what
  they lack; in that offer they burst past it up to their limit while every unmet
  guarantee stays free, as Mesos 1.9's first stage), and resources they still need
  are held back (the headroom) from offers to everybody else, so that no offer makes a
  satisfiable guarantee unsatisfiable. A guarantee larger than the cluster is accepted and
  reported as unsatisfiable; it does not stop anything.

Quota belongs to role nodes: on a tree, `eng` counts everything under `eng/...`. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from protocol.wire.resources import Resources

Millis = dict[str, int]


class QuotaError(ValueError):
    """A quota that cannot be: a guarantee over its limit, a negative amount."""


@dataclass(frozen=True)
class Quota:
    guarantee: Resources
    # per resource named; one not named is unlimited. A `Limit` keeps its zeros (what
    # the CLI, the roles file, the API and the registry give); a plain `Resources` has none
    limit: Resources | None = None

    def __post_init__(self) -> None:
        if self.limit is not None:
            for name, amount in self.guarantee.millis.items():
                if name in self.limit and amount > self.limit.get_millis(name):
                    raise QuotaError(
                        f"guarantee {name}:{self.guarantee[name]:g} is over the limit "
                        f"{name}:{self.limit[name]:g}"
                    )


def ancestors_or_self(role: str, tree: bool) -> list[str]:
    """The role nodes whose quota applies to `role`: its path's prefixes on a tree."""
    if not tree:
        return [role]
    parts = role.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def gap(quota: Quota, held: Mapping[str, int]) -> Millis:
    """What `quota`'s guarantee still lacks, per resource."""
    out = {}
    for name, amount in quota.guarantee.millis.items():
        lack = amount - held.get(name, 0)
        if lack > 0:
            out[name] = lack
    return out


def cap_offer(
    free: Millis,
    limits: Iterable[tuple[Resources, Mapping[str, int]]],
    headroom: Mapping[str, int],
    unreserved: Mapping[str, int],
) -> Millis:
    """What of a slave's `free` resources may be offered: under every applicable limit
    (limit, held), and leaving `headroom` of the cluster's `unreserved` resources alone.
    Nothing at all where a limit of zero names a resource the slave has: an operator sets
    `cpus: 0` to freeze a role, not to have it offered memory without cpus."""
    out = dict(free)
    for limit, held in limits:
        for name, amount in limit.millis.items():
            if name in out:
                if amount == 0 and out[name] > 0:
                    return {}  # a zero limit freezes the role: nothing of this slave
                out[name] = max(0, min(out[name], amount - held.get(name, 0)))
    for name, need in headroom.items():
        if name in out:
            out[name] = max(0, min(out[name], unreserved.get(name, 0) - need))
    return {k: v for k, v in out.items() if v > 0}


def nesting_problem(
    quotas: Mapping[str, Quota], changes: Mapping[str, Quota | None] | None = None
) -> str | None:
    """Why these guarantees (with `changes`: None clears) cannot nest on a tree of roles
    (None if they can). A role's guarantee includes its sub-roles' (Mesos: "the quota of
    a node must always be greater than or equal to the sum of the quota'd resources of
    that role's children"), so under every guaranteed role, the nearest guaranteed roles
    below it may together be guaranteed no more than it is, resource by resource."""
    quotas = {r: q for r, q in {**quotas, **(changes or {})}.items() if q is not None}
    guaranteed = sorted(r for r, q in quotas.items() if q.guarantee.millis)
    for parent in guaranteed:
        below = [r for r in guaranteed if r.startswith(parent + "/")]
        nearest = [r for r in below if not any(r.startswith(o + "/") for o in below)]
        if not nearest:
            continue
        own = quotas[parent].guarantee
        for name in sorted({n for r in nearest for n in quotas[r].guarantee.millis}):
            total = sum(quotas[r].guarantee.get_millis(name) for r in nearest)
            if total > own.get_millis(name):
                return (
                    f"the guarantees of {', '.join(nearest)} ({name}:{total / 1000:g} in all) "
                    f"exceed their parent {parent}'s ({name}:{own.get_millis(name) / 1000:g}): "
                    f"a role's guarantee includes its sub-roles'"
                )
    return None
