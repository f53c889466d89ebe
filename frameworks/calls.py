"""What the drivers' calls return: the call is made when it is called.

Every driver call (`launch_tasks`, `decline_offer`, `stop`, `send_status_update`, ...) does
its work -- checks its arguments, raising `DriverError` at once, and posts the message --
before it returns, and returns a `Made` that may be awaited: `await driver.stop()` and
`driver.stop()` do the same. A call written without `await` therefore still happens: were
the calls coroutines, a forgotten `await` would make one silently do nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel

from frameworks.errors import DriverError
from protocol.wire.discrete import Discrete
from protocol.wire.launches import OfferRoom
from protocol.wire.messages import (
    MAX_RECONCILE_TASKS,
    Accept,
    Acknowledge,
    Filters,
    Offer,
    OfferOperation,
    Reconcile,
    ReconcileTask,
    TaskGroup,
    TaskInfo,
    TaskStatus,
)
from protocol.wire.reservations import NON_SPECULATIVE
from protocol.wire.resources import Resources
from protocol.wire.topics import check_segment

P = ParamSpec("P")
T = TypeVar("T")

ENDLESS = 1_000_000  # the largest count `request_resources` takes: "as many as I can get"


def acknowledgement(framework_id: str, status: TaskStatus) -> Acknowledge:
    """What acknowledges a status update (one that carries a uuid), to the master."""
    return Acknowledge(
        framework_id=framework_id,
        slave_id=status.slave_id,
        task_id=status.task_id,
        uuid=status.uuid or "",
    )


def listed(items: Iterable[T], call: str, what: str, example: str) -> list[T]:
    """`items` as a list. One given alone (pymesos's calls take one or a list) is
    `DriverError` saying what to write (`example`): iterated, a string gives its
    characters (offers 'o', '-', '3', roles 'e', 'n', 'g', tasks 't' and '1' asked
    about) and a model or Resources its fields."""
    if isinstance(items, (str, bytes, Mapping, BaseModel)):
        raise DriverError(f"{call} takes a list of {what} ({example}), not one")
    return list(items)


def offer_ids_listed(offer_ids: Iterable[str], call: str) -> list[str]:
    """`offer_ids`, each once (one alone: `listed`)."""
    return list(dict.fromkeys(listed(offer_ids, call, "offer ids", "[offer.offer_id]")))


def outstanding_ids(
    outstanding: Mapping[str, Offer], offer_ids: Iterable[str], call: str
) -> list[str]:
    """`offer_ids` (`offer_ids_listed`), each still outstanding, or `DriverError`."""
    ids = offer_ids_listed(offer_ids, call)
    missing = [o for o in ids if o not in outstanding]
    if missing:
        raise DriverError(
            f"{call}: offers {', '.join(missing)} are not outstanding "
            "(rescinded, already used, or never offered)"
        )
    return ids


def launch_checked(
    call: str,
    outstanding: Mapping[str, Offer],
    offer_ids: Iterable[str],
    tasks: list[TaskInfo],
    operations: Sequence[OfferOperation] = (),
    groups: Sequence[TaskGroup] = (),
) -> list[str]:
    """The offers a launch uses, once it is sure they can hold its tasks: each offer still
    outstanding, all on one slave, holding what the tasks need as the master counts it (a
    new custom executor's resources too: `protocol.wire.launches`) after `operations` (a
    RESERVE or CREATE) made of them, the tasks on that slave, then each task group's
    (its new executor's resources and its tasks', all of it). Else `DriverError`, which
    names `call`, the call the framework made (`launch_tasks`, `launch_group`,
    `accept_offers`), and nothing is sent (a silent drop would leave a framework waiting
    for tasks the master refused)."""
    ids = outstanding_ids(outstanding, offer_ids, call)
    listed(tasks, call, "tasks", "[task]")
    if not ids:
        raise DriverError(f"{call} needs at least one offer")
    offers = [outstanding[o] for o in ids]
    if len({o.slave_id for o in offers}) > 1:
        raise DriverError(f"{call}: all offers in one launch must be on the same slave")
    running = {eid: None for o in offers for eid in o.executor_ids}
    left = sum((o.resources for o in offers), Resources())
    for op in operations:  # (validated as built: its conversion is known to be one)
        consumed, converted = op.conversion()
        used = Resources.from_millis(consumed)
        if not left.contains(used):
            raise DriverError(f"{call}: {op.type} needs {used} but the offers hold {left}")
        left = left - used
        if op.type not in NON_SPECULATIVE:  # (a resized volume is offered again, later)
            left = left + Resources.from_millis(converted)
    values = Discrete.union(o.discrete for o in offers)  # ports, each for one task
    room = OfferRoom(offers[0].slave_id, left, running, values)
    for task in tasks:
        problem = room.problem(task)
        if problem is not None:
            raise DriverError(f"{call}: {problem}")
        room.take(task)
    for group in groups:
        problem = room.group_problem(group)
        if problem is not None:
            raise DriverError(f"{call}: task group of executor {group.executor_id}: {problem}")
        room.take_executor(group.executor_id, group.executor_resources)
        for task in group.tasks:
            room.take(task)
    return ids


def accept_checked(
    call: str,
    framework_id: str | None,
    outstanding: Mapping[str, Offer],
    offer_ids: Iterable[str],
    tasks: list[TaskInfo],
    filters: Filters | None = None,
    operations: Iterable[OfferOperation] = (),
    groups: Iterable[TaskGroup] = (),
) -> Accept:
    """The Accept that `call` (`launch_tasks`, `launch_group`, `accept_offers`) sends, once
    `launch_checked` passes it."""
    ops = listed(operations, call, "operations", "[operation]")
    grouped = listed(groups, call, "task groups", "[group]")
    ids = launch_checked(call, outstanding, offer_ids, tasks, ops, grouped)
    return Accept(
        framework_id=framework_id or "",
        offer_ids=ids,
        tasks=tasks,
        filters=filters or Filters(),
        operations=ops,
        groups=grouped,
    )


def reconcile_calls(framework_id: str, tasks: Iterable[TaskStatus | str]) -> list[Reconcile]:
    """The Reconcile calls that ask about `tasks` (by status or id; none: all of them):
    one per MAX_RECONCILE_TASKS, what one call may ask: a framework reconciling its
    100,000 tasks after a failover sends 25 of them (the bus sends each in a payload of
    its own, see protocol.transport.batching)."""
    wanted = [
        ReconcileTask(task_id=t)
        if isinstance(t, str)
        else ReconcileTask(task_id=t.task_id, slave_id=t.slave_id)
        for t in listed(tasks, "reconcile_tasks", "tasks", "[status] or [task_id]")
    ]
    if not wanted:
        return [Reconcile(framework_id=framework_id)]
    return [
        Reconcile(framework_id=framework_id, tasks=wanted[i : i + MAX_RECONCILE_TASKS])
        for i in range(0, len(wanted), MAX_RECONCILE_TASKS)
    ]


def unauthenticated_principal(name: str) -> str:
    """A framework's principal on a cluster without credentials: its name, made a topic
    segment."""
    try:
        return check_segment(name.replace(" ", "_"), "name")
    except ValueError:
        return "framework"


class Made:
    """A call that has been made. Awaiting it waits for `then` (the executor's channel to
    drain, say), or for nothing."""

    __slots__ = ("_then",)

    def __init__(self, then: Callable[[], Awaitable[None]] | None = None) -> None:
        self._then = then

    def __await__(self) -> Generator[Any, None, None]:
        if self._then is not None:
            yield from self._then().__await__()


MADE = Made()


def made_at_once(call: Callable[P, None]) -> Callable[P, Made]:
    """Make a driver method do its work when called, and return an awaitable `Made`."""

    @functools.wraps(call)
    def made(*args: P.args, **kwargs: P.kwargs) -> Made:
        call(*args, **kwargs)
        return MADE

    return made
