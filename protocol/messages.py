"""Every message that crosses the bus, as pydantic models.

Modelled on the Mesos v1 scheduler and executor APIs: frameworks send *calls* to the
master, the master sends *events* to frameworks, and master and slaves speak the
internal slave protocol. Every model forbids unknown fields, so a typo on the wire is an
error rather than a silently ignored value.
"""

from __future__ import annotations

import os
import time
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from protocol.resources import Limit, Resources

Id = Annotated[str, Field(min_length=1, max_length=200)]

# What one call may ask, at most (README: "Bounds on one message"). The codec refuses a
# longer list before validating a single item of it (see protocol.codec).
MAX_TASKS_PER_ACCEPT = 1000
MAX_OFFERS_PER_CALL = 1000
MAX_RECONCILE_TASKS = 4096
MAX_LIST_ITEMS = 256  # items of a list message (StatusUpdates, Acknowledges, ...)


def new_id() -> str:
    """128 random bits as 32 hex digits, unguessable (a uuid4's format without building a
    UUID: a quarter of the time, and ids are made on every task's path)."""
    return os.urandom(16).hex()


class Wire(BaseModel):
    """Base of every message on the bus. `TYPE` is the tag the codec writes."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=False)
    TYPE: ClassVar[str] = ""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.TYPE = cls.__name__


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


class Reason(StrEnum):
    """Why a task reached its state (a subset of Mesos's TaskStatus.Reason)."""

    INVALID_OFFERS = "REASON_INVALID_OFFERS"
    TASK_INVALID = "REASON_TASK_INVALID"
    SLAVE_REMOVED = "REASON_SLAVE_REMOVED"
    SLAVE_REMOVED_BY_OPERATOR = "REASON_SLAVE_REMOVED_BY_OPERATOR"
    SLAVE_REREGISTERED = "REASON_SLAVE_REREGISTERED"
    SLAVE_UNKNOWN = "REASON_SLAVE_UNKNOWN"
    FRAMEWORK_REMOVED = "REASON_FRAMEWORK_REMOVED"
    EXECUTOR_TERMINATED = "REASON_EXECUTOR_TERMINATED"
    COMMAND_EXECUTOR_FAILED = "REASON_COMMAND_EXECUTOR_FAILED"
    MEMORY_LIMIT = "REASON_CONTAINER_LIMITATION_MEMORY"
    KILLED_BY_FRAMEWORK = "REASON_TASK_KILLED_BY_FRAMEWORK"
    RECONCILIATION = "REASON_RECONCILIATION"
    TASK_UNKNOWN = "REASON_TASK_UNKNOWN"
    TASK_PREEMPTED = "REASON_TASK_PREEMPTED"
    # not Mesos's: the master's queue for the framework's principal was full (launch again)
    RATE_LIMITED = "REASON_RATE_LIMITED"
    # the container could not be started (its image unknown, podman failing), as Mesos's
    CONTAINER_LAUNCH_FAILED = "REASON_CONTAINER_LAUNCH_FAILED"


class Filters(Wire):
    """How long a framework does not want to see again what it declined (or left unused
    of an offer it accepted): the master does not offer that slave's resources to it for
    `refuse_seconds` (Mesos's Filters)."""

    refuse_seconds: float = Field(default=5.0, ge=0, le=365 * 24 * 3600)
    """Seconds the slave's resources are kept from this framework (0: offer them again at
    the next allocation round; at most a year). A revive_offers call clears every filter."""


class CommandInfo(Wire):
    """A shell command: a command task's, or the command that starts a custom executor."""

    value: str = Field(min_length=1)
    """Run as `sh -c VALUE` in the task's sandbox directory (also in `$MESOS_SANDBOX`),
    in its own process group; its stdout and stderr go to the sandbox's files."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Variables added to the slave's environment for the command."""


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
    `localhost/busybox:1`. Checked as untrusted input (`protocol.ids.image_problem`)."""


class TaskInfo(Wire):
    """A task a framework launches on an offer (`frameworks.build_task` makes one): a
    shell command (`command`) or work for the framework's executor (`executor`), exactly
    one of the two."""

    task_id: Id
    """Chosen by the framework, unique within it. Do not reuse one for a retry: the
    master does not refuse an id again once its first task has ended, but the sandbox,
    reconciliation's answers and the master's record of ended tasks are found by id, so
    the two tasks would be mixed up. A retry is a new task with a new id."""
    name: str = ""
    """A label for people: shown in `drfmesos state` and the web UI."""
    slave_id: Id
    """The slave of the offer it is launched on (a task cannot span slaves)."""
    resources: Resources
    """What it may use (cpus, mem in MB, ...); taken out of the offer. A command task
    over its mem is killed and ends FAILED with REASON_CONTAINER_LIMITATION_MEMORY."""
    command: CommandInfo | None = None
    """A shell command, run by the slave (a command task)."""
    executor: ExecutorInfo | None = None
    """The framework's executor that runs it (its `launch_task` gets this TaskInfo)."""
    container: ContainerInfo | None = None
    """For a command task: the image its command runs in (else it runs on the slave)."""
    data: bytes = b""
    """Opaque bytes for the executor. (Simulated slaves read `{"duration": seconds}`.)"""

    @model_validator(mode="after")
    def _command_or_executor(self) -> TaskInfo:
        if (self.command is None) == (self.executor is None):
            raise ValueError("a task needs exactly one of command or executor")
        return self


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
    message: str = ""
    """A sentence for people: `exited with code 3`, `killed by the master: ...`."""
    timestamp: float = Field(default_factory=time.time)
    """When its sender made it (seconds since the epoch, the sender's clock)."""
    uuid: str | None = None  # set when the update needs an acknowledgement
    """Set when the update needs an acknowledgement: the driver sends it when
    `status_update` returns (or you do, with implicit_acknowledgements=False), and the
    slave re-sends the update until then. None on answers that need none
    (reconciliation's, the master's own)."""
    data: bytes = b""
    """Opaque bytes from the task's executor."""
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
    taken: `SchedulerDriver(min_offer=...)` keeps such offers away."""
    attributes: dict[str, str] = Field(default_factory=dict)
    """The slave's attributes (`--attributes 'rack:a'`), for placement."""


# --- framework -> master (calls) ---------------------------------------------------------


class OfferFilters(Wire):
    """What a framework can use (Mesos 1.10's offer_filters): it is offered a slave only if
    the slave's free resources hold at least one of `min_allocatable` (none: anything)."""

    min_allocatable: list[Resources] = Field(default_factory=list, max_length=20)


class Subscribe(Wire):
    """Register a framework, or re-register with its framework_id after a failover."""

    name: str = Field(min_length=1, max_length=200)
    role: str = Field(default="*", min_length=1, max_length=200)
    # a role's weight is its operator's: None takes it; anything else must be it
    weight: float | None = Field(default=None, gt=0, le=1e6)
    failover_timeout: float = Field(default=0.0, ge=0)
    framework_id: str | None = None
    inbox: Id  # where the master sends this framework's events
    incarnation: str = ""  # the sender's bus connection, to tell stale Last Wills apart
    offer_filters: OfferFilters | None = None  # (replaced on every subscribe)
    capabilities: list[FrameworkCapability] = Field(default_factory=list, max_length=20)


class Accept(Wire):
    framework_id: Id
    offer_ids: list[Id] = Field(min_length=1, max_length=MAX_OFFERS_PER_CALL)
    tasks: list[TaskInfo] = Field(default_factory=list, max_length=MAX_TASKS_PER_ACCEPT)
    filters: Filters = Field(default_factory=Filters)


class Decline(Wire):
    framework_id: Id
    offer_ids: list[Id] = Field(min_length=1, max_length=MAX_OFFERS_PER_CALL)
    filters: Filters = Field(default_factory=Filters)


class Revive(Wire):
    framework_id: Id


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


class Kill(Wire):
    framework_id: Id
    task_id: Id
    slave_id: str | None = None


class Acknowledge(Wire):
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


class SetWeights(Wire):
    """Operator -> master: roles' weights (Mesos's /weights), any node of the role tree."""

    weights: dict[str, float] = Field(default_factory=dict, max_length=1000)

    @field_validator("weights")
    @classmethod
    def _positive(cls, weights: dict[str, float]) -> dict[str, float]:
        for role, weight in weights.items():
            if not 0 < weight <= 1e6 or not 0 < len(role) <= 200:
                raise ValueError(f"{role!r}: a role (1-200 chars) and a weight in (0, 1e6]")
        return weights


class SetQuota(Wire):
    """Operator -> master: a role's quota (Mesos 1.9): what it is guaranteed and what it
    may hold at most. An empty guarantee and no limit clear it."""

    role: str = Field(min_length=1, max_length=200)
    guarantee: Resources = Field(default_factory=Resources)
    limit: Limit | None = None  # zeros kept: `cpus: 0` allows no cpus at all


class MarkSlaveGone(Wire):
    """Operator -> master: this slave is gone for good (Mesos's MARK_AGENT_GONE). Its
    tasks end TASK_GONE_BY_OPERATOR (TASK_LOST for frameworks not partition-aware), and
    it may not come back under this id."""

    slave_id: Id


# --- master -> framework (events) ----------------------------------------------------------


class Subscribed(Wire):
    framework_id: Id
    heartbeat_interval_seconds: float
    master_id: str = ""
    resubscribed: bool = False
    epoch: int = Field(default=0, ge=0)  # the leading master's epoch (see Leader)


class Offers(Wire):
    offers: list[Offer]


class Rescind(Wire):
    offer_id: Id


class Update(Wire):
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
    """Why, for people: who is starving, and for how long."""


class Heartbeat(Wire):
    """Liveness: master -> framework, and slave -> master."""

    source: str = ""
    incarnation: str = ""


# --- slave <-> master ----------------------------------------------------------------------


class RunningTask(Wire):
    framework_id: Id
    task: TaskInfo
    state: TaskState


class EndingTask(Wire):
    """A task that ended on the slave whose last update is not acknowledged yet: the
    master learns it exists, so that it does not call it lost before the update lands."""

    framework_id: Id
    task_id: Id


class Register(Wire):
    slave_id: Id
    hostname: str
    resources: Resources
    attributes: dict[str, str] = Field(default_factory=dict)
    incarnation: str = ""


class Reregister(Wire):
    slave_id: Id
    hostname: str
    resources: Resources
    attributes: dict[str, str] = Field(default_factory=dict)
    incarnation: str = ""
    tasks: list[RunningTask] = Field(default_factory=list)
    ending: list[EndingTask] = Field(default_factory=list)


class TaskUsage(Wire):
    """What a task used, from its cgroup's accounting (from /proc under posix isolation:
    no throttling there, and no peak but the last look)."""

    framework_id: Id
    task_id: Id
    cpu_user_seconds: float = Field(default=0.0, ge=0)
    cpu_system_seconds: float = Field(default=0.0, ge=0)
    cpu_throttled_seconds: float = Field(default=0.0, ge=0)
    memory_bytes: int = Field(default=0, ge=0)
    memory_peak_bytes: int = Field(default=0, ge=0)
    timestamp: float = 0.0  # when the slave read it


class UsageReport(Wire):
    """Slave -> master every few seconds: its running tasks' usage, all in one message."""

    slave_id: Id
    tasks: list[TaskUsage] = Field(default_factory=list, max_length=100_000)


class Registered(Wire):
    slave_id: Id
    heartbeat_interval_seconds: float
    master_id: str = ""
    epoch: int = Field(default=0, ge=0)  # the leading master's epoch (see Leader)


# --- master -> everyone --------------------------------------------------------------------


class Leader(Wire):
    """The leading master announces itself (retained on `<p>/leader`).

    `epoch` grows with every election (and every restart of a lone master): slaves and
    drivers re-register with a leader whose epoch is newer than the one they know, and
    ignore whatever a master with an older epoch still sends.
    """

    master_id: str = Field(min_length=1, max_length=200)
    epoch: int = Field(ge=1)
    http: str = ""  # its web UI and API, if it serves them
    elected_at: float = 0.0  # wall clock, seconds since the epoch


class RunTask(Wire):
    """Slave -> executor: run this task. (A slave also takes it from a master, one task a
    message, as masters before RunTasks sent it.)"""

    framework_id: Id
    framework_name: str = ""
    task: TaskInfo
    # the directory the slave made for this task's own stdout and stderr (a custom
    # executor writes the task's lines there, `ExecutorDriver.output`); set by the slave
    # for its executor, ignored when it comes from a master
    sandbox: str = ""


class RunTasks(Wire):
    """Master -> slave: the tasks one Accept launched there, in one message (not one a
    task); the slave takes each as it takes a RunTask."""

    framework_id: Id
    framework_name: str = ""
    tasks: list[TaskInfo] = Field(min_length=1)
    # the master's id for this message: MQTT delivers at least once (a broker killed before
    # it stored the slave's PUBACK delivers it again after its restart), and a slave runs
    # what one launch_id carries once, even after the tasks ended (their ids may be reused)
    launch_id: str = Field(default="", max_length=200)

    def each(self) -> list[RunTask]:
        """One RunTask a task (validated already: built without validating again)."""
        return [
            RunTask.model_construct(
                framework_id=self.framework_id, framework_name=self.framework_name, task=task
            )
            for task in self.tasks
        ]


class KillTask(Wire):
    framework_id: Id
    task_id: Id
    reason: Reason | None = None  # set when the master, not the framework, kills it


class ShutdownFramework(Wire):
    framework_id: Id


class StatusUpdate(Wire):
    """A task's new state, from the slave; kept and re-sent until acknowledged."""

    framework_id: Id
    slave_id: Id
    status: TaskStatus


class ReadFile(Wire):
    """Master -> slave: part of a task's sandbox file (stdout or stderr), for an operator."""

    request_id: Id
    framework_id: Id
    task_id: Id
    executor_id: str | None = None  # whose log to read for a task older than its own sandbox
    name: Literal["stdout", "stderr"]
    offset: int = Field(default=0, ge=0)
    length: int = Field(default=65536, ge=0, le=1_048_576)


class FileData(Wire):
    """Slave -> master: the answer to ReadFile (`size`: the whole file's; `error` if none)."""

    request_id: Id
    slave_id: Id
    data: bytes = b""
    offset: int = 0
    size: int = 0
    error: str = ""


class ReadTaskFile(Wire):
    """Framework -> master: part of one of its own tasks' stdout or stderr (the driver's
    `read_file`); answered with a TaskFileData on the framework's inbox."""

    request_id: Id
    framework_id: Id
    task_id: Id
    name: Literal["stdout", "stderr"]
    offset: int = Field(default=0, ge=0)
    length: int = Field(default=65536, ge=0, le=1_048_576)


class TaskFileData(Wire):
    """Master -> framework: the answer to ReadTaskFile (`size`: the whole file's; `error`
    when it could not be read: no such task, its slave gone, ...)."""

    request_id: Id
    task_id: Id
    data: bytes = b""
    offset: int = 0
    size: int = 0
    error: str = ""


class StatusAck(Wire):
    slave_id: Id
    framework_id: Id
    task_id: Id
    uuid: Id


# --- slave <-> custom executor --------------------------------------------------------------


class RegisterExecutor(Wire):
    """A custom executor process announces itself to its slave."""

    slave_id: Id
    framework_id: Id
    executor_id: Id
    incarnation: str = ""


class ExecutorRegistered(Wire):
    slave_id: Id
    framework_id: Id
    executor_id: Id
    framework_name: str = ""


class ShutdownExecutor(Wire):
    framework_id: Id
    executor_id: Id


class ExecutorExited(Wire):
    """Slave -> master: a custom executor's process ended (status: its exit code)."""

    framework_id: Id
    slave_id: Id
    executor_id: Id
    status: int


# --- bus-level and observability --------------------------------------------------------------


class Gone(Wire):
    """A party's Last Will: the broker publishes it when the party vanishes."""

    kind: str  # "slave", "framework", "executor", "master"
    id: Id
    incarnation: str = ""


class FrameworkView(Wire):
    """A framework in the state snapshot; `allocated` is what its tasks use (not offers)."""

    framework_id: str
    principal: str = ""
    name: str
    role: str
    weight: float
    active: bool
    suppressed: bool
    allocated: Resources
    offered: Resources
    dominant_share: float
    running_tasks: int
    finished_tasks: int
    fair_share: float | None = None  # its share of the policy's ideal (as preemption sees it)
    starving_seconds: float | None = None  # how long it has been starving, if it is
    demand: list[TaskRequest] | None = None  # what it declared it still wants
    registered_at: float | None = None  # wall clock, when it first registered
    removed_at: float | None = None  # wall clock, when removed (a completed framework only)
    removed_why: str = ""  # why it was removed (a completed framework only)


class SlaveView(Wire):
    slave_id: str
    principal: str = ""
    hostname: str
    total: Resources
    free: Resources
    tasks: int
    connected: bool = True  # False from its connection's loss until it is back (or removed)
    last_heartbeat: float | None = None  # wall clock, when the master last heard from it
    attributes: dict[str, str] = Field(default_factory=dict)  # its `--attributes`
    used: Resources | None = None  # what its tasks used at its last usage report


class TaskView(Wire):
    task_id: str
    framework_id: str
    slave_id: str
    state: TaskState
    resources: Resources
    name: str = ""
    reason: Reason | None = None  # for ended tasks: why
    message: str = ""
    launched_at: float | None = None  # wall clock, when the master launched it
    ended_at: float | None = None  # wall clock, its terminal update's time
    usage: TaskUsage | None = None  # its slave's last report of what it uses
    used: Resources | None = None  # from its last two reports: cpus (CPU-s/s), mem (MB)


class RoleView(Wire):
    """A role (or pool) in the state snapshot."""

    role: str
    weight: float
    share: float  # dominant share of everything its subtree holds
    promise: float | None = None  # under a tree policy: the fraction of the cluster promised
    guarantee: Resources | None = None
    limit: Limit | None = None
    unsatisfiable: str = ""  # why its guarantee cannot be met, if it cannot
    fair_share: float | None = None  # with preemption on: its subtree's share of the ideal


class PreemptionView(Wire):
    """Preemption's counters in the state snapshot."""

    tasks_preempted: int = 0
    work_lost_seconds: float = 0.0  # running time of the tasks preempted, summed
    in_flight: int = 0  # tasks warned and not ended yet
    rounds: int = 0  # times preemption freed room for a starving framework


class State(Wire):
    """The master's books as a snapshot (retained on the bus for tools)."""

    master_id: str
    timestamp: float
    policy: str
    total: Resources
    allocated: Resources
    frameworks: list[FrameworkView]
    slaves: list[SlaveView]
    offer_count: int  # offers outstanding
    offers: list[Offer] = Field(default_factory=list)  # listed when `tasks` are
    tasks: list[TaskView] = Field(default_factory=list)  # live ones (omitted on big clusters)
    refused: dict[str, int] = Field(default_factory=dict)  # calls refused, by reason code
    roles: list[RoleView] = Field(default_factory=list)
    preemption: PreemptionView | None = None  # None: preemption is off
    web_ui: str = ""  # the master's HTTP address, when it serves one
    epoch: int = 0  # the leading master's epoch (see Leader)
    recovering_slaves: int = 0  # slaves of the registry not yet re-registered after a failover


class ClusterEvent(Wire):
    """One step in the master's life: allocation, launch, release, ... (for tools and plots)."""

    kind: str
    timestamp: float = Field(default_factory=time.time)
    framework_id: str | None = None
    slave_id: str | None = None
    task_id: str | None = None
    offer_id: str | None = None
    resources: Resources = Field(default_factory=Resources)
    state: TaskState | None = None
    detail: str = ""


# --- lists: several messages of one kind to one receiver, as one ------------------------------
# The bus makes these from posts of one kind to one topic in one turn (see Bus.post), and
# the receiving bus hands each item on alone: nothing above the bus sees a list, and each
# item is checked by its receiver exactly as if it had come alone. Validating a list is
# one pass for all its items, not one a message.


class StatusUpdates(Wire):
    items: list[StatusUpdate] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


class Updates(Wire):
    items: list[Update] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


class Acknowledges(Wire):
    items: list[Acknowledge] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


class StatusAcks(Wire):
    items: list[StatusAck] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


class ClusterEvents(Wire):
    items: list[ClusterEvent] = Field(min_length=1, max_length=MAX_LIST_ITEMS)


LISTS: dict[type[Wire], type[Wire]] = {
    StatusUpdate: StatusUpdates,
    Update: Updates,
    Acknowledge: Acknowledges,
    StatusAck: StatusAcks,
    ClusterEvent: ClusterEvents,
}
"""The messages that travel in lists (status updates and their acknowledgements, at every
hop; the master's event stream), and the list each travels in."""

ITEM_OF: dict[type[Wire], type[Wire]] = {many: one for one, many in LISTS.items()}


ALL_MESSAGES: tuple[type[Wire], ...] = tuple(
    cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, Wire) and cls is not Wire
)
"""Every message type, in the order defined here (the codec's registry)."""
