"""Framework <-> master: a framework's calls, and the events the master sends it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from protocol.wire.reservations import conversion
from protocol.wire.resources import Resources, to_millis
from protocol.wire.values import (
    MAX_FAILOVER_TIMEOUT,
    MAX_OFFERS_PER_CALL,
    MAX_OFFERS_PER_MESSAGE,
    MAX_RECONCILE_TASKS,
    MAX_ROLES,
    MAX_TASKS_PER_ACCEPT,
    MAX_WEIGHT,
    Filters,
    FrameworkCapability,
    Id,
    Incarnation,
    KillPolicy,
    Offer,
    TaskGroup,
    TaskInfo,
    TaskStatus,
    Wire,
    wire_maps,
)

# --- framework -> master (calls) ---------------------------------------------------------


MOST_FILTERS = 20  # offer filters a framework sets (in one role): each round reads them all


class OfferFilters(Wire):
    """What a framework can use (Mesos 1.10's offer_filters): it is offered a slave only if
    the slave's free resources hold at least one of `min_allocatable` (none: anything)."""

    min_allocatable: list[Resources] = Field(default_factory=list, max_length=MOST_FILTERS)
    # a multi-role framework's by role, as Mesos's map (a Mesos framework's): each role
    # named takes its own ([]: anything), a role not named the master's minimum, and
    # `min_allocatable` is not read; None: `min_allocatable` in every role
    by_role: dict[str, Annotated[list[Resources], Field(max_length=MOST_FILTERS)]] | None = Field(
        default=None, max_length=MAX_ROLES
    )


class Subscribe(Wire):
    """Register a framework, or re-register with its framework_id after a failover."""

    name: str = Field(min_length=1, max_length=200)
    role: str = Field(default="*", min_length=1, max_length=200)
    # a role's weight is its operator's: None takes it; anything else must be it
    weight: float | None = Field(default=None, gt=0, le=MAX_WEIGHT)
    failover_timeout: float = Field(
        default=0.0, ge=0, le=MAX_FAILOVER_TIMEOUT, allow_inf_nan=False
    )  # seconds: a finite number (the master's --max-failover-timeout may cut it)
    framework_id: str | None = None
    inbox: Id  # where the master sends this framework's events
    incarnation: Incarnation = ""  # the sender's bus connection, to tell stale Wills apart
    offer_filters: OfferFilters | None = None  # (replaced on every subscribe)
    capabilities: list[FrameworkCapability] = Field(default_factory=list, max_length=20)
    # a multi-role framework's roles (MULTI_ROLE): offered in each, its `role` left out
    roles: list[str] | None = Field(default=None, min_length=1, max_length=MAX_ROLES)
    # the roles it wants no offers in (Mesos 1.9's suppressed_roles): a (re-)subscription
    # sets its suppression to exactly these, so a new process does not inherit its
    # predecessor's SUPPRESS (MESOS-9793); each one of its roles
    suppressed_roles: list[str] = Field(default_factory=list, max_length=MAX_ROLES)

    @model_validator(mode="after")
    def _one_role_or_roles(self) -> Subscribe:
        check_roles(self.role, self.roles, self.capabilities)
        return self

    def all_roles(self) -> list[str]:
        """The roles it subscribes in: its roles, or its one role."""
        return list(self.roles) if self.roles is not None else [self.role]


def check_roles(
    role: str, roles: list[str] | None, capabilities: list[FrameworkCapability]
) -> None:
    """A framework's one `role`, or a MULTI_ROLE framework's `roles` (ValueError if not)."""
    multi = FrameworkCapability.MULTI_ROLE in capabilities
    if roles is None:
        if multi:
            raise ValueError("a MULTI_ROLE framework subscribes with roles")
        return
    if not multi:
        raise ValueError("roles are a MULTI_ROLE framework's: declare the capability")
    if role != "*":  # (its default: the wire carries it either way)
        raise ValueError("a MULTI_ROLE framework names its roles in roles, not role")
    if len(set(roles)) != len(roles):
        raise ValueError("roles must not repeat a role")
    if any(not r or len(r) > 200 for r in roles):
        raise ValueError("each role is 1 to 200 characters")


class UpdateFramework(Wire):
    """Change what may change of a subscribed framework without subscribing again
    (Mesos 1.9's UPDATE_FRAMEWORK): what a Subscribe says of it, each field replaced --
    its name, failover timeout, offer filters, capabilities and suppressed roles, and a
    MULTI_ROLE framework's roles (one it holds nothing in may go; any it may use may
    come). Its outstanding offers are rescinded; `FrameworkUpdated` says it is done."""

    framework_id: Id
    name: str = Field(min_length=1, max_length=200)
    role: str = Field(default="*", min_length=1, max_length=200)  # (a one-role one's: kept)
    failover_timeout: float = Field(default=0.0, ge=0, le=MAX_FAILOVER_TIMEOUT, allow_inf_nan=False)
    offer_filters: OfferFilters | None = None
    capabilities: list[FrameworkCapability] = Field(default_factory=list, max_length=20)
    roles: list[str] | None = Field(default=None, min_length=1, max_length=MAX_ROLES)
    suppressed_roles: list[str] = Field(default_factory=list, max_length=MAX_ROLES)

    @model_validator(mode="after")
    def _one_role_or_roles(self) -> UpdateFramework:
        check_roles(self.role, self.roles, self.capabilities)
        return self


class OfferOperation(Wire):
    """An operation on offered resources besides a launch (Mesos's `Offer.Operation`):
    RESERVE names the resources as they are to be (`cpus(team-a,alice):1`), UNRESERVE
    as they are; CREATE the volumes to make on reserved disk (`disk(team-a,alice)[id:path]`),
    DESTROY the volumes to end. A reservation's principal left out is the caller's.
    GROW_VOLUME names a volume as it is (whole) and, in `addition`, disk of the same
    reservation to add to it; SHRINK_VOLUME a volume and, in `subtract`, how much disk to
    take from it (more than 0, less than its size): both are non-speculative, as in Mesos,
    so the resized volume is not for a launch of the same Accept but offered again."""

    type: Literal["RESERVE", "UNRESERVE", "CREATE", "DESTROY", "GROW_VOLUME", "SHRINK_VOLUME"]
    resources: Resources
    addition: Resources | None = None  # GROW_VOLUME's
    subtract: float | None = None  # SHRINK_VOLUME's, in the volume's unit (MB)

    @model_validator(mode="after")
    def _converts(self) -> OfferOperation:
        if self.resources.is_empty():
            raise ValueError(f"{self.type} names no resources")
        self.conversion()  # (ReservationError, ResourceError: ValueErrors)
        return self

    def conversion(
        self, millis: Mapping[str, int] | None = None
    ) -> tuple[dict[str, int], dict[str, int]]:
        """(consumed, converted) by its identity (`millis`: its resources as the master
        filled them in, a reservation's principal the caller's)."""
        subtract = None if self.subtract is None else to_millis("disk", self.subtract)
        addition = None if self.addition is None else self.addition.millis
        keys = self.resources.millis if millis is None else millis
        return conversion(self.type, keys, addition=addition, subtract=subtract)


class Accept(Wire):
    # (lean: most of a task's fields hold their defaults; an Accept of small command
    # tasks was 192 bytes a task, 107 lean, and decoded in 6.2 us a task, 4.7 lean; the
    # slave reads the same maps: the launch is sent as the Accept carried it)
    LEAN = True

    framework_id: Id
    offer_ids: list[Id] = Field(min_length=1, max_length=MAX_OFFERS_PER_CALL)
    tasks: list[TaskInfo] = Field(default_factory=list, max_length=MAX_TASKS_PER_ACCEPT)
    filters: Filters = Field(default_factory=Filters)
    # applied in order, before the tasks are launched (which may use what they made)
    operations: list[OfferOperation] = Field(default_factory=list, max_length=20)
    # task groups (Mesos's LAUNCH_GROUP), each launched all or none after the tasks; their
    # tasks count in the Accept's bound with `tasks`
    groups: list[TaskGroup] = Field(default_factory=list, max_length=MAX_TASKS_PER_ACCEPT)
    # each task's map as it came on the wire, once it validated as `tasks` (None: made
    # here, not read): what the master sends the slave for the task, which validates as
    # it did here, instead of a dump of the model (see `task_maps`)
    _wire_tasks: list[dict[str, Any]] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_wire_tasks(cls, data: Any, handler: ModelWrapValidatorHandler[Accept]) -> Accept:
        message = handler(data)
        message._wire_tasks = wire_maps(data, "tasks")
        return message

    @model_validator(mode="before")
    @classmethod
    def _tasks_bounded(cls, data: Any) -> Any:
        """Its tasks and its groups' counted together before any is read (bounds.md: a
        list over its bound is refused unread; groups of a thousand tasks each were a
        way past it)."""
        groups = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(groups, list) or not groups:
            return data
        tasks = data.get("tasks")
        count = len(tasks) if isinstance(tasks, list) else 0
        for group in groups:
            grouped = group.get("tasks") if isinstance(group, dict) else None
            if isinstance(group, TaskGroup):
                grouped = group.tasks
            count += len(grouped) if isinstance(grouped, list) else 0
        if count > MAX_TASKS_PER_ACCEPT:
            most = MAX_TASKS_PER_ACCEPT
            raise ValueError(f"at most {most} tasks, grouped or not, in one Accept, not {count}")
        return data

    def all_tasks(self) -> list[TaskInfo]:
        """Its tasks, then its groups' tasks."""
        if not self.groups:
            return self.tasks
        return [*self.tasks, *(t for g in self.groups for t in g.tasks)]

    def __eq__(self, other: object) -> bool:
        """Equal as messages: their fields (the maps kept from the wire are not theirs)."""
        if not isinstance(other, Accept):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def task_maps(self) -> list[dict[str, Any] | None]:
        """Each task as a map that validates as it (`TaskInfo.model_validate`): the map it
        came in on the wire, else None."""
        if self._wire_tasks is None:
            return [None] * len(self.tasks)
        return list(self._wire_tasks)


class Decline(Wire):
    framework_id: Id
    offer_ids: list[Id] = Field(min_length=1, max_length=MAX_OFFERS_PER_CALL)
    filters: Filters = Field(default_factory=Filters)


class Revive(Wire):
    framework_id: Id
    # a multi-role framework's roles to revive (none: every one, as Mesos's REVIVE)
    roles: list[str] = Field(default_factory=list, max_length=MAX_ROLES)


class TaskRequest(Wire):
    """`count` more tasks of this size, wanted (a framework's declared demand)."""

    resources: Resources
    """One task's size (not empty)."""
    count: int = Field(default=1, ge=1, le=1_000_000)
    """How many such tasks are still wanted (`frameworks.ENDLESS`: as many as it can get);
    each launch of this size counts one off."""

    @model_validator(mode="after")
    def _not_empty(self) -> TaskRequest:
        if self.resources.is_empty():
            raise ValueError("a task request needs some resources")
        return self


class Request(Wire):
    """What the framework still wants to run (Mesos v1's REQUEST, pymesos's
    requestResources): replaces what it declared before; an empty list (or Suppress)
    clears it. The master's fair shares -- and so preemption -- follow it."""

    framework_id: Id
    requests: list[TaskRequest] = Field(default_factory=list, max_length=100)


class Suppress(Wire):
    framework_id: Id
    # a multi-role framework's roles to suppress (none: every one, as Mesos's SUPPRESS)
    roles: list[str] = Field(default_factory=list, max_length=MAX_ROLES)


class Kill(Wire):
    framework_id: Id
    task_id: Id
    slave_id: str | None = None
    kill_policy: KillPolicy | None = None  # this kill's, over the task's (as Mesos's KILL)


class Acknowledge(Wire):
    LEAN = True  # (as every message that travels in lists: protocol.wire.messages.LISTS)

    framework_id: Id
    slave_id: str | None = None
    task_id: Id
    uuid: Id


class ReconcileTask(Wire):
    task_id: Id
    slave_id: str | None = None


class Reconcile(Wire):
    """Ask for the latest state of the given tasks; an empty list means all of them."""

    framework_id: Id
    tasks: list[ReconcileTask] = Field(default_factory=list, max_length=MAX_RECONCILE_TASKS)


class Message(Wire):
    """Opaque data from a scheduler to one of its executors."""

    framework_id: Id
    slave_id: Id
    executor_id: Id
    data: bytes


class Teardown(Wire):
    framework_id: Id


# --- master -> framework (events) ----------------------------------------------------------


class Subscribed(Wire):
    framework_id: Id
    heartbeat_interval_seconds: float
    master_id: str = ""
    resubscribed: bool = False
    epoch: int = Field(default=0, ge=0)  # the leading master's epoch (see Leader)


class FrameworkUpdated(Wire):
    """Master -> framework: its UpdateFramework is recorded in the registry and in effect."""

    framework_id: Id
    roles: list[str]  # the roles it is in now (a one-role framework's one)


class Offers(Wire):
    offers: list[Offer] = Field(max_length=MAX_OFFERS_PER_MESSAGE)


class Rescind(Wire):
    offer_id: Id


class Update(Wire):
    LEAN = True  # (as every message that travels in lists: protocol.wire.messages.LISTS)

    status: TaskStatus


class FrameworkMessage(Wire):
    """Opaque data between a scheduler and an executor, delivered to the other side."""

    framework_id: Id
    slave_id: Id
    executor_id: Id
    data: bytes


class Failure(Wire):
    """A slave was lost (executor_id None) or an executor exited (status is its exit code)."""

    slave_id: Id
    executor_id: str | None = None
    status: int | None = None


class Error(Wire):
    """Something the receiver sent was refused. `message` says what and why."""

    message: str
    code: str = "error"
    about: str | None = None  # the message type or id the error refers to


class PreemptedTask(Wire):
    """A task named in `Preempting`: it will be killed."""

    task_id: Id
    """The task."""
    slave_id: Id
    """The slave it runs on."""


class Preempting(Wire):
    """Master -> framework: these tasks of yours will be killed after `deadline_seconds`
    to give another framework its fair share (the warning before the kill; Mesos's
    inverse offers ask, this tells). They end TASK_KILLED, REASON_TASK_PREEMPTED."""

    framework_id: Id
    """The framework whose tasks these are (the one told)."""
    tasks: list[PreemptedTask]
    """The tasks that will be killed."""
    deadline_seconds: float = Field(ge=0)
    """Seconds until the slave kills them (the master's --preemption-notice)."""
    message: str = ""
    """Why, for people: that a framework is below its fair share, or its role's
    guarantee. A framework of another principal's is not named, nor its role; one of
    the same principal's is."""


class Heartbeat(Wire):
    """Liveness: master -> framework, and slave -> master. (The leading master's beat on
    its leader topic is its `Leader` again: protocol.transport.leader.)"""

    source: str = ""
    incarnation: Incarnation = ""
