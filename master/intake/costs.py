"""What a call costs its principal's rate limit, and which calls are read even past it.

A call is charged by what it costs the master to answer, at least 1: a Reconcile one, and
one more per RECONCILE_TASKS_PER_CHARGE tasks it asks about (each is answered with an
update, which the bus sends in lists: at one per task, a framework's 100,000 tasks took
100 s of its limit to reconcile after a failover, with every other call of it waiting
behind), an Accept one, and one more per ACCEPT_TASKS_PER_CHARGE tasks (launching is the
cluster's work, which DRF shares out, and an SDK framework at full speed launches tens of
tasks an Accept; but a thousand tasks the master must refuse one by one are not one
call). A bucket may go into debt for a big call, and the calls behind it wait the debt
off, so one huge message cannot dodge the limit (`master.intake.queues`).
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Acknowledges,
    Decline,
    Error,
    Reconcile,
    Suppress,
    Teardown,
    Wire,
)

# What gives the cluster back (resources, bookkeeping) is never held up or charged: a
# limit must not cost the cluster offers that sit unanswered or updates re-sent.
FREE = (Acknowledge, Decline, Suppress, Teardown, Error)
# What must be read even past a principal's capacity: the free calls, and an Accept (its
# refusal gives its offers back). Anything else is refused unread then: a flood costs little.
READ_WHEN_FULL = frozenset({*(t.TYPE for t in FREE), Acknowledges.TYPE, Accept.TYPE})

ACCEPT_TASKS_PER_CHARGE = 100
RECONCILE_TASKS_PER_CHARGE = 10  # 100,000 tasks: 10 s of the default limit


def call_cost(message: Wire) -> float | None:
    """What a call is charged (see the module's docstring); None if free. (An implicit
    Reconcile asks for all the framework's tasks: the intake charges that.)"""
    if isinstance(message, FREE):
        return None
    if isinstance(message, Accept):  # no tasks: the offers given back, free
        launched = len(message.all_tasks())  # (its groups' tasks count as its tasks)
        return 1.0 + launched // ACCEPT_TASKS_PER_CHARGE if launched else None
    if isinstance(message, Reconcile):
        return reconcile_cost(len(message.tasks))
    return 1.0


def reconcile_cost(tasks: int) -> float:
    """What reconciling `tasks` tasks is charged (an implicit Reconcile: all of them)."""
    return 1.0 + tasks // RECONCILE_TASKS_PER_CHARGE


def read_when_full(types: Iterable[str] | None) -> bool:
    """Whether calls of these types must be read past their principal's capacity (None or
    none: a payload that is not even a list of calls, read and refused as such)."""
    return not types or not READ_WHEN_FULL.isdisjoint(types)
