"""The wire's shared value types: the base of every message (`Wire`), ids, bounds,
task states and reasons, and what calls and events carry (tasks, statuses, offers)."""

from __future__ import annotations

import os
import time
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from protocol.wire.discrete import EMPTY as NO_VALUES
from protocol.wire.discrete import Discrete, with_counts
from protocol.wire.health import HealthCheck, HealthCheckType
from protocol.wire.resources import ResourceError, Resources

Id = Annotated[str, Field(min_length=1, max_length=200)]
# A bus connection's name, which a party sends with its Subscribe, Register or heartbeats
# so that a stale Last Will is told apart, and the master keeps for as long as the party
# lives: ours are 16 hex digits (the Mesos API's, a stream id's 36 characters), and no
# party's may cost the master more than an id's 200 ("" for none)
Incarnation = Annotated[str, Field(max_length=200)]

# What one call may ask, at most (docs/reference/bounds.md). The codec refuses a
# longer list before validating a single item of it (see protocol.wire.codec).
MAX_TASKS_PER_ACCEPT = 1000
MAX_OFFERS_PER_CALL = 1000
MAX_ROLES = 100  # a multi-role framework's roles
# Offers in one `Offers` message: what one call can answer, and some 300 KB, far under the
# broker's 8 MiB (a round on 50,000 free slaves would otherwise put them all in one).
MAX_OFFERS_PER_MESSAGE = MAX_OFFERS_PER_CALL
MAX_RECONCILE_TASKS = 4096
MAX_LIST_ITEMS = 256  # items of a list message (StatusUpdates, Acknowledges, ...)
MAX_WEIGHT = 1e6  # a role's weight at most: an operator's, from the roles file or a call
# A kill's grace period at most, as a message may say it (a slave holds it to its own
# --max-kill-grace, shorter, so that a tenant's task cannot hold its resources for long)
MAX_KILL_GRACE = 3600.0
# A framework's failover timeout at most, in seconds (292 years): the longest Mesos takes
# (a Duration's int64 nanoseconds); infinity and NaN are refused (no JSON holds them, and
# NaN compares false with every deadline)
MAX_FAILOVER_TIMEOUT = 9.2e9
# A task status's free text and opaque bytes, at most: a slave keeps every update until
# it is acknowledged (in memory and in its journal), whatever an executor sends
MAX_STATUS_MESSAGE = 4096  # characters; a longer message is cut, its start kept
MAX_STATUS_DATA = 64 * 1024  # bytes; more is refused (opaque bytes cannot be cut)


def cut_status_message(text: str) -> str:
    """A status's message within MAX_STATUS_MESSAGE characters: its start, and how much
    was left out."""
    if len(text) <= MAX_STATUS_MESSAGE:
        return text
    head = text[: MAX_STATUS_MESSAGE - 40]
    return f"{head}... ({len(text) - len(head)} more characters cut)"


StatusMessage = Annotated[str, AfterValidator(cut_status_message)]


IDS_AT_ONCE = 256  # ids made from one read of the kernel's random bytes (see new_id)
_ids: list[str] = []  # made and not handed out yet (each handed out once: list.pop)
os.register_at_fork(after_in_child=_ids.clear)  # (a child makes its own)


def new_id() -> str:
    """128 random bits as 32 hex digits, unguessable (a uuid4's format without building a
    UUID: a quarter of the time, and ids are made on every task's path). Taken from the
    kernel's random bytes IDS_AT_ONCE ids at a time: a `getrandom` each was a slave's
    most frequent system call (two a task)."""
    try:
        return _ids.pop()
    except IndexError:
        digits = os.urandom(16 * IDS_AT_ONCE).hex()
        _ids.extend(digits[i : i + 32] for i in range(0, len(digits), 32))
        return _ids.pop()


class Wire(BaseModel):
    """Base of every message on the bus. `TYPE` is the tag the codec writes."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=False)
    TYPE: ClassVar[str] = ""
    # whether it goes on the wire without the fields that hold their defaults (the hot
    # messages: a task's launch and its updates, and their lists), which its reader's
    # validation then skips; a field left out is its default again when read
    LEAN: ClassVar[bool] = False

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.TYPE = cls.__name__

    def wire_dump(self) -> dict[str, Any]:
        """Its map, as the codec sends it: its fields dumped, without those that hold
        their defaults if it is `LEAN` (a message that keeps maps from the wire may send
        them as they came: `protocol.wire.slave.RunTasks`)."""
        return self.model_dump(mode="python", exclude_defaults=self.LEAN)


# --- shared value types ----------------------------------------------------------------


class TaskState(StrEnum):
    """Where a task is in its life (Mesos 1.x's TaskState, include/mesos/v1/mesos.proto).
    STAGING: accepted by the master, not yet started by its slave; STARTING: its process or
    executor is starting; RUNNING; KILLING: being killed. Then exactly one terminal state:
    FINISHED (ended by itself, successfully), FAILED (ended by itself, unsuccessfully, or
    its executor died), KILLED (by its framework, or by the master: preemption, its
    framework removed), ERROR (it could never run: an invalid task, not to be retried),
    LOST (it may or may not still run). DROPPED, UNREACHABLE, GONE, GONE_BY_OPERATOR and
    UNKNOWN go only to frameworks with the PARTITION_AWARE capability; the others hear
    TASK_LOST in their place (examples/task-states.md). `terminal`, `may_be_running` and
    `retryable` say what a state means to a framework."""

    STAGING = "TASK_STAGING"
    STARTING = "TASK_STARTING"
    RUNNING = "TASK_RUNNING"
    KILLING = "TASK_KILLING"
    FINISHED = "TASK_FINISHED"
    FAILED = "TASK_FAILED"
    KILLED = "TASK_KILLED"
    LOST = "TASK_LOST"
    ERROR = "TASK_ERROR"  # the task description is wrong: launching it again fails again
    DROPPED = "TASK_DROPPED"  # never started, for a passing reason: launch it again
    UNREACHABLE = "TASK_UNREACHABLE"  # its slave is out of touch: it may still run
    GONE = "TASK_GONE"  # it is not running (its slave says so, or knows it not)
    GONE_BY_OPERATOR = "TASK_GONE_BY_OPERATOR"  # an operator said its slave is gone
    UNKNOWN = "TASK_UNKNOWN"  # the master knows nothing of it: it may still run

    @property
    def terminal(self) -> bool:
        """No update follows for this task (Mesos's isTerminalState)."""
        return self in TERMINAL_STATES

    @property
    def may_be_running(self) -> bool:
        """The task may still be running somewhere: relaunching it now could run its work
        twice at once. (LOST too: a partitioned slave that returns has its non-partition-
        aware tasks killed only then; GONE_BY_OPERATOR: if the operator was wrong.)"""
        return self in MAY_BE_RUNNING

    @property
    def retryable(self) -> bool:
        """It ended for a reason outside the task: launching it again may well succeed."""
        return self in RETRYABLE_STATES


TERMINAL_STATES = frozenset(
    {
        TaskState.FINISHED,
        TaskState.FAILED,
        TaskState.KILLED,
        TaskState.LOST,
        TaskState.ERROR,
        TaskState.DROPPED,
        TaskState.GONE,
        TaskState.GONE_BY_OPERATOR,
    }
)
MAY_BE_RUNNING = frozenset(
    {
        TaskState.STAGING,
        TaskState.STARTING,
        TaskState.RUNNING,
        TaskState.KILLING,
        TaskState.LOST,
        TaskState.UNREACHABLE,
        TaskState.GONE_BY_OPERATOR,
        TaskState.UNKNOWN,
    }
)
RETRYABLE_STATES = frozenset(
    {
        TaskState.LOST,
        TaskState.DROPPED,
        TaskState.GONE,
        TaskState.GONE_BY_OPERATOR,
        TaskState.FAILED,
        TaskState.KILLED,
    }
)


class Source(StrEnum):
    """Who decided a task's state (Mesos's TaskStatus.Source)."""

    MASTER = "SOURCE_MASTER"
    SLAVE = "SOURCE_SLAVE"
    EXECUTOR = "SOURCE_EXECUTOR"


class FrameworkCapability(StrEnum):
    """What a framework declares it understands (Mesos's FrameworkInfo.Capability)."""

    PARTITION_AWARE = "PARTITION_AWARE"  # send me the finer states, not TASK_LOST
    TASK_KILLING_STATE = "TASK_KILLING_STATE"  # send me TASK_KILLING when a kill begins
    MULTI_ROLE = "MULTI_ROLE"  # I subscribe with `roles`, and each offer names its role
    SHARED_RESOURCES = "SHARED_RESOURCES"  # offer me shared volumes, even while in use


class Reason(StrEnum):
    """Why a task reached its state (a subset of Mesos's TaskStatus.Reason)."""

    INVALID_OFFERS = "REASON_INVALID_OFFERS"
    TASK_INVALID = "REASON_TASK_INVALID"
    TASK_GROUP_INVALID = "REASON_TASK_GROUP_INVALID"
    SLAVE_REMOVED = "REASON_SLAVE_REMOVED"
    SLAVE_REMOVED_BY_OPERATOR = "REASON_SLAVE_REMOVED_BY_OPERATOR"
    SLAVE_REREGISTERED = "REASON_SLAVE_REREGISTERED"
    SLAVE_DRAINING = "REASON_SLAVE_DRAINING"  # killed (or dropped) as its slave drains
    SLAVE_UNKNOWN = "REASON_SLAVE_UNKNOWN"
    FRAMEWORK_REMOVED = "REASON_FRAMEWORK_REMOVED"
    EXECUTOR_TERMINATED = "REASON_EXECUTOR_TERMINATED"
    COMMAND_EXECUTOR_FAILED = "REASON_COMMAND_EXECUTOR_FAILED"
    # its custom executor did not register in time (the slave's
    # --executor-registration-timeout), and was killed
    EXECUTOR_REGISTRATION_TIMEOUT = "REASON_EXECUTOR_REGISTRATION_TIMEOUT"
    MEMORY_LIMIT = "REASON_CONTAINER_LIMITATION_MEMORY"
    # its sandbox held more than its `disk` (the slave's disk watch: slave.disk_isolator)
    DISK_LIMIT = "REASON_CONTAINER_LIMITATION_DISK"
    # over a limit of its container's other than memory: a port it was not given
    CONTAINER_LIMITATION = "REASON_CONTAINER_LIMITATION"
    KILLED_BY_FRAMEWORK = "REASON_TASK_KILLED_BY_FRAMEWORK"
    RECONCILIATION = "REASON_RECONCILIATION"
    TASK_UNKNOWN = "REASON_TASK_UNKNOWN"
    TASK_PREEMPTED = "REASON_TASK_PREEMPTED"
    # not Mesos's: the master's queue for the framework's principal was full (launch again)
    RATE_LIMITED = "REASON_RATE_LIMITED"
    # the container could not be started (its image unknown, podman failing), as Mesos's
    CONTAINER_LAUNCH_FAILED = "REASON_CONTAINER_LAUNCH_FAILED"
    # a TASK_RUNNING that says its health check's verdict changed (`TaskStatus.healthy`)
    TASK_HEALTH_CHECK_STATUS_UPDATED = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"


MAX_REFUSE_SECONDS = 365 * 24 * 3600.0  # a filter's longest, as Mesos's allocator caps it


class Filters(Wire):
    """How long a framework does not want to see again what it declined (or left unused
    of an offer it accepted): the master does not offer that slave's resources to it for
    `refuse_seconds` (Mesos's Filters)."""

    refuse_seconds: float = Field(default=5.0, ge=0, le=MAX_REFUSE_SECONDS)
    """Seconds the slave's resources are kept from this framework (0: offer them again at
    the next allocation round; at most a year). A revive_offers call clears every filter."""


class CommandInfo(Wire):
    """A shell command: a command task's, or the command that starts a custom executor."""

    value: str = Field(min_length=1)
    """Run as `sh -c VALUE` in the task's sandbox directory (also in `$MESOS_SANDBOX`),
    in its own process group; its stdout and stderr go to the sandbox's files."""
    environment: dict[str, str] = Field(default_factory=dict)
    """The command's variables, beside the few the slave sets (a default PATH, HOME,
    `MESOS_*`, `DRFMESOS_*`) and those its operator passes on (`--task-env`): nothing else
    of the slave's own environment reaches a task."""


class ExecutorInfo(Wire):
    """A framework's own executor: a process on the slave that runs this framework's tasks
    given to it (see `frameworks.Executor`), rather than one shell command per task."""

    executor_id: Id
    """Names the executor: this framework's tasks with the same executor id on one slave
    share one executor process, started with the first of them."""
    command: CommandInfo
    """What starts the executor (it talks to its slave over a line the slave gives it)."""
    resources: Resources = Field(default_factory=Resources)
    """What the executor itself uses, as the framework declares it. Only the tasks'
    resources are allocated and enforced here; this is informational."""


class ContainerInfo(Wire):
    """What a command task runs in: an image (run with podman on the slave, under the
    task's limits, its sandbox mounted at /mnt/mesos/sandbox)."""

    image: str = Field(min_length=1)
    """An image the slave already holds (nothing is pulled), as `name[:tag]`, e.g.
    `localhost/busybox:1`. Checked as untrusted input (`protocol.wire.ids.image_problem`)."""


class KillPolicy(Wire):
    """How a task is killed (Mesos's KillPolicy): SIGTERM to its whole process group,
    then SIGKILL to what is left after `grace_period` seconds."""

    grace_period: float = Field(ge=0, le=MAX_KILL_GRACE)
    """Seconds between SIGTERM and SIGKILL (0: SIGKILL at once). A slave gives at most
    its `--max-kill-grace` (60 s unless its operator says); without a policy, its
    `--kill-grace` (3 s)."""


class TaskInfo(Wire):
    """A task a framework launches on an offer (`frameworks.build_task` makes one): a
    shell command (`command`) or work for the framework's executor (`executor`), exactly
    one of the two."""

    task_id: Id
    """Chosen by the framework, unique within it. Do not reuse one for a retry: the
    master does not refuse an id again once its first task has ended, but the sandbox,
    reconciliation's answers and the master's record of ended tasks are found by id, so
    the two tasks would be mixed up. A retry is a new task with a new id."""
    name: str = Field(default="", max_length=1024)
    """A label for people: shown in `drfmesos state` and the web UI."""
    slave_id: Id
    """The slave of the offer it is launched on (a task cannot span slaves)."""
    resources: Resources
    """What it may use (cpus, mem in MB, ...); taken out of the offer. A command task
    over its mem is killed and ends FAILED with REASON_CONTAINER_LIMITATION_MEMORY, and
    (where its slave enforces disk quotas) one whose sandbox holds more than its disk
    with REASON_CONTAINER_LIMITATION_DISK.
    A range or set it asks for counts here by its size (filled in from `discrete`)."""
    discrete: Discrete = Field(default=NO_VALUES)
    """The concrete values it takes out of its offer's ranges and sets, e.g.
    `{"ports": "[31000-31001]"}` (`frameworks.take_ports` picks them): each must be in
    the offer and held by no other task. A command task finds its ports in `PORT0`,
    `PORT1`, ... and `PORTS` (comma-separated)."""
    command: CommandInfo | None = None
    """A shell command, run by the slave (a command task)."""
    executor: ExecutorInfo | None = None
    """The framework's executor that runs it (its `launch_task` gets this TaskInfo)."""
    container: ContainerInfo | None = None
    """For a command task: the image its command runs in (else it runs on the slave)."""
    data: bytes = b""
    """Opaque bytes for the executor. (Simulated slaves read `{"duration": seconds}`.)"""
    kill_policy: KillPolicy | None = None
    """How the task is killed, whoever kills it (its framework, a preemption, a
    teardown), unless the kill itself says (`kill_task(..., grace_period=)`): for a
    command task, the slave's grace between SIGTERM and SIGKILL."""
    health_check: HealthCheck | None = None
    """How it is checked to be healthy (`HealthCheck`): a command task's by its slave,
    an executor's task by its executor (the SDK's driver runs the check, and kills the
    task through the executor's `kill_task`)."""
    role: str | None = Field(default=None, min_length=1, max_length=200)
    """The role its resources are allocated to (Mesos's `allocation_info.role`): its
    offer's. Left out, the master fills in the offer's (a multi-role framework's); a
    role other than its offer's is refused."""

    @model_validator(mode="after")
    def _command_or_executor(self) -> TaskInfo:
        if self.discrete:  # (most tasks name no ports: nothing to count, nor to set)
            try:
                self.resources = with_counts(self.resources, self.discrete, f"task {self.task_id}")
            except ResourceError as e:
                raise ValueError(str(e)) from None
        if (self.command is None) == (self.executor is None):
            raise ValueError("a task needs exactly one of command or executor")
        check = self.health_check
        command_check = check is not None and check.type == HealthCheckType.COMMAND
        if command_check and self.container is not None:
            raise ValueError("a COMMAND health check is not run in a container image")
        return self


class TaskGroup(Wire):
    """Tasks launched together (Mesos's LAUNCH_GROUP with the default executor): all of
    them or none, on one slave, under one executor that the slave itself plays (Mesos's
    default executor), each task in its own container as a command task is. A task of
    the group that fails or is killed has the others of its group killed; one that
    finishes does not. The executor ends when its last task has ended, and gives its
    resources back; later groups may launch on it while it runs."""

    executor_id: Id
    """Names the group's executor: groups of this framework naming the same id on one
    slave share it (and its resources), as long as it runs."""
    executor_resources: Resources = Field(default_factory=Resources)
    """What the executor itself holds (Mesos's ExecutorInfo.resources), taken out of the
    offer with the first group that starts it and given back when it ends."""
    tasks: list[TaskInfo] = Field(min_length=1, max_length=MAX_TASKS_PER_ACCEPT)
    """The group's tasks: each a command task (`command`, no `executor` of its own) on
    the offer's slave, with its own resources, isolation, sandbox and health check."""


def wire_maps(data: Any, field: str) -> list[dict[str, Any]] | None:
    """A list field's items as a message's map holds them, if it came as maps (from the
    wire): kept beside the models validated from them, each of which it validates as
    again (see `protocol.wire.slave.RunTasks.task_maps`). None otherwise."""
    items = data.get(field) if isinstance(data, dict) else None
    if isinstance(items, list) and all(type(t) is dict for t in items):
        return items
    return None


class TaskStatus(Wire):
    """A task's state, as a status update (`Scheduler.status_update`) or a reconciliation
    answer tells it."""

    task_id: Id
    """The task it is about."""
    state: TaskState
    """The state it reached."""
    slave_id: str | None = None
    """The slave it runs or ran on (None when the master does not know one)."""
    executor_id: str | None = None
    """Its executor's id, for a task run by a custom executor."""
    reason: Reason | None = None
    """Why it reached this state, when there is more to say than the state."""
    source: Source | None = None
    """Who decided this state: the master, the slave or the task's executor."""
    message: StatusMessage = ""
    """A sentence for people: `exited with code 3`, `killed by the master: ...`; at most
    4,096 characters (a longer one is cut)."""
    timestamp: float = Field(default_factory=time.time)
    """When its sender made it (seconds since the epoch, the sender's clock)."""
    uuid: str | None = None  # set when the update needs an acknowledgement
    """Set when the update needs an acknowledgement: the driver sends it when
    `status_update` returns (or you do, with implicit_acknowledgements=False), and the
    slave re-sends the update until then. None on answers that need none
    (reconciliation's, the master's own)."""
    data: bytes = Field(default=b"", max_length=MAX_STATUS_DATA)
    """Opaque bytes from the task's executor, at most 64 KiB."""
    healthy: bool | None = None
    """What its health check last said (None: it has none, or it has not said yet); set
    on every update once it has, and false on the TASK_KILLED of a task its failures
    killed."""
    exit_code: int | None = None  # a command task's exit status, once it exited by itself
    """A command task's exit status, once it exited by itself (None when it was killed
    by a signal, run by an executor, or its status was lost with its slave)."""


class Offer(Wire):
    """Resources of one slave, offered to one framework until it launches tasks on them,
    declines them, or the master rescinds them (`Scheduler.offer_rescinded`). An offer
    neither used nor declined stays the framework's (until the master's --offer-timeout,
    if it has one): nobody else is offered them."""

    offer_id: Id
    """Names the offer in `launch_tasks` and `decline_offer`; used once."""
    framework_id: Id
    """The framework it is for."""
    slave_id: Id
    """The slave whose resources these are (a task's `slave_id`)."""
    hostname: str
    """That slave's host name."""
    resources: Resources
    """What is free there for this framework now. What its tasks leave unused goes back
    when they are launched. It may hold no cpus (memory alone) when the slave's cpus are
    taken: `SchedulerDriver(min_offer=...)` keeps such offers away. A range or set counts
    here by its size; its values are in `discrete`."""
    discrete: Discrete = Field(default=NO_VALUES)
    """The concrete free values of the slave's ranges and sets offered, e.g.
    `{"ports": "[31000-32000]"}`: a task takes its own out of these."""
    attributes: dict[str, str] = Field(default_factory=dict)
    """The slave's attributes (`--attributes 'rack:a'`), for placement."""
    role: str = "*"
    """The role it is offered in (Mesos's `allocation_info.role`): the framework's role,
    or for a multi-role framework one of its `roles`. What is launched on it is
    allocated to that role, and counts in that role's share and quota."""
    executor_ids: list[Id] = Field(default_factory=list)
    """The framework's custom executors running on that slave (as Mesos's): a task for one
    of them takes only its own resources; a new executor's come out of the offer too."""
