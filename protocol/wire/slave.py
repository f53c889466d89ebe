"""Slave <-> master, and slave <-> custom executor: registration, tasks to run and kill,
status updates and their acknowledgements, usage, and a sandbox's files."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    model_validator,
)

from protocol.wire.discrete import EMPTY as NO_VALUES
from protocol.wire.discrete import Discrete, with_counts
from protocol.wire.resources import ResourceError, Resources
from protocol.wire.values import (
    MAX_KILL_GRACE,
    ExecutorInfo,
    Id,
    Incarnation,
    KillPolicy,
    Reason,
    TaskInfo,
    TaskState,
    TaskStatus,
    Wire,
    wire_maps,
)

# --- slave <-> master ----------------------------------------------------------------------

MAX_HEARTBEATS = 4096  # slaves in one Heartbeats (some 100 KB)

PROOF_MOST = 64  # characters of a task's launch proof (an HMAC's hex digits)
Proof = Annotated[str, Field(max_length=PROOF_MOST)]


class Heartbeats(Wire):
    """Slave process -> master: the heartbeats of its logical slaves (slave.fleet), read
    as one message (a Heartbeat each cost the master's loop some 50 us of call path). The
    master takes each only for a slave registered under the sending principal."""

    slave_ids: list[Id] = Field(min_length=1, max_length=MAX_HEARTBEATS)
    incarnation: Incarnation = ""  # the connection's, shared by the process's slaves


class RunningTask(Wire):
    framework_id: Id
    task: TaskInfo
    state: TaskState
    proof: Proof = ""  # the launch's (RunTask.proof)
    # its health check's latest verdict (None: none yet, or no check), as a Mesos agent
    # re-registers with each task's latest status: a new leader knows it, though the
    # slave says a verdict again only when it changes
    healthy: bool | None = None


class EndingTask(Wire):
    """A task that ended on the slave whose last update is not acknowledged yet: the
    master learns it exists, so that it does not call it lost before the update lands."""

    framework_id: Id
    task_id: Id


class RunningExecutor(Wire):
    """A custom executor the slave runs, tasks or none (Mesos's `executor_infos` of a
    re-registration): one whose tasks all ended runs on, its resources still used."""

    framework_id: Id
    executor: ExecutorInfo


class RunningGroupExecutor(Wire):
    """A task group's executor the slave plays (Mesos's default executor, which an agent
    re-registers with in `executor_infos` as any other): its own resources are used
    until its last task ends (ExecutorExited), though none of its tasks names it."""

    framework_id: Id
    executor_id: Id
    resources: Resources = Field(default_factory=Resources)


def counted(resources: Resources, discrete: Discrete) -> Resources:
    """A slave's resources with its ranges and sets counted by size (as the allocator
    counts them): a count that disagrees with its values is refused."""
    try:
        return with_counts(resources, discrete, "slave resources")
    except ResourceError as e:
        raise ValueError(str(e)) from None


# what a slave does not enforce between tenants' tasks, in its own words ("" all of it:
# each task runs as its principal's user, in namespaces of its own); the master shows it
# in its state so an operator sees it, not only in the slave's log
IsolationWarning = Annotated[str, Field(max_length=2048)]

# What a slave says of itself is kept (its hostname in the registry, with its bucket's
# others: docs/reference/bounds.md) and shown to everyone: bounded here, so that a slave
# over a bound is refused with the rule, not by the registry's store
MAX_HOSTNAME = 255  # characters, as a DNS name (253 and its dots' framing)
MAX_ATTRIBUTES = 64  # a slave's attributes (Mesos's `--attributes`: rack, zone, os, ...)
MAX_ATTRIBUTE_NAME = 128  # characters
MAX_ATTRIBUTE_VALUE = 1024  # characters
Hostname = Annotated[str, Field(max_length=MAX_HOSTNAME)]
AttributeName = Annotated[str, Field(min_length=1, max_length=MAX_ATTRIBUTE_NAME)]
AttributeValue = Annotated[str, Field(max_length=MAX_ATTRIBUTE_VALUE)]
Attributes = Annotated[dict[AttributeName, AttributeValue], Field(max_length=MAX_ATTRIBUTES)]
# the version of the last CheckpointResources a slave applied, which a master numbers its
# next past (bounded: a master adds one to it)
ResourceVersion = Annotated[int, Field(ge=0, le=2**62)]


class Register(Wire):
    slave_id: Id
    hostname: Hostname
    resources: Resources  # (its ranges and sets counted by size)
    discrete: Discrete = Field(default=NO_VALUES)  # their values: ports, ...
    attributes: Attributes = Field(default_factory=dict)
    incarnation: Incarnation = ""
    isolation_warning: IsolationWarning = ""
    resource_version: ResourceVersion = 0  # of the last CheckpointResources it applied

    @model_validator(mode="after")
    def _counted(self) -> Register:
        self.resources = counted(self.resources, self.discrete)
        return self


class Reregister(Wire):
    slave_id: Id
    hostname: Hostname
    resources: Resources  # (its ranges and sets counted by size)
    discrete: Discrete = Field(default=NO_VALUES)  # their values: ports, ...
    attributes: Attributes = Field(default_factory=dict)
    incarnation: Incarnation = ""
    isolation_warning: IsolationWarning = ""
    resource_version: ResourceVersion = 0  # of the last CheckpointResources it applied
    tasks: list[RunningTask] = Field(default_factory=list)
    ending: list[EndingTask] = Field(default_factory=list)
    executors: list[RunningExecutor] = Field(default_factory=list)  # (idle ones too)
    group_executors: list[RunningGroupExecutor] = Field(default_factory=list)
    # each framework's principal, as the master named it in the launch (checkpointed with
    # its tasks): a master that did not know the framework (restarted without its registry)
    # lets only that principal claim its id and its orphaned tasks, as Mesos learns an
    # orphan's FrameworkInfo from the agent; empty from a slave that predates it
    owners: dict[Id, Id] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counted(self) -> Reregister:
        self.resources = counted(self.resources, self.discrete)
        return self


class CheckpointResources(Wire):
    """Master -> slave: what of its total it keeps across restarts, whole (Mesos's
    CheckpointResourcesMessage): its dynamic reservations and volumes. Sent after every
    operation that changed them; the slave's total is its --resources with these made
    of them, and it re-registers with that.

    Each is versioned, as Mesos's operations carry the agent's `resource_version_uuid`:
    (`epoch`, `version`) grows with every one a master sends the slave (the sending
    master's leadership epoch, then its number, past the one the slave said it holds
    when it registered), and the slave applies only one newer than the last it applied
    and kept: the broker's second delivery of an older one (after it restarts from its
    last save), or a deposed master's, is dropped. `destroyed`: the volumes a DESTROY
    took, whose data the slave removes (no other volume's: one the master no longer
    names for another reason keeps its data)."""

    slave_id: Id
    resources: Resources
    epoch: int = Field(default=0, ge=0)
    version: int = Field(default=0, ge=0)
    destroyed: Resources = Field(default_factory=Resources)


class ContainerUsage(Wire):
    """What a container used, from its cgroup's accounting (from /proc under posix
    isolation: no throttling there, and no peak but the last look)."""

    cpu_user_seconds: float = Field(default=0.0, ge=0)
    cpu_system_seconds: float = Field(default=0.0, ge=0)
    cpu_throttled_seconds: float = Field(default=0.0, ge=0)
    memory_bytes: int = Field(default=0, ge=0)
    memory_peak_bytes: int = Field(default=0, ge=0)
    timestamp: float = 0.0  # when the slave read it


class TaskUsage(ContainerUsage):
    """What a command task used."""

    framework_id: Id
    task_id: Id
    # what its sandbox held on disk at the slave's last look (Mesos's `disk_used_bytes`;
    # at least that, where the look could not walk all of it); None: not looked at yet
    disk_used_bytes: int | None = Field(default=None, ge=0)


class ExecutorUsage(ContainerUsage):
    """What a custom executor used, with the tasks it runs (one container for them all,
    as Mesos's /monitor/statistics has it: an executor's, not a task's)."""

    framework_id: Id
    executor_id: Id


class UsageReport(Wire):
    """Slave -> master every few seconds: its running command tasks' and custom
    executors' usage, all in one message."""

    slave_id: Id
    tasks: list[TaskUsage] = Field(default_factory=list, max_length=100_000)
    executors: list[ExecutorUsage] = Field(default_factory=list, max_length=100_000)


class Registered(Wire):
    slave_id: Id
    heartbeat_interval_seconds: float
    master_id: str = ""
    epoch: int = Field(default=0, ge=0)  # the leading master's epoch (see Leader)


# --- master -> slave, and slave <-> executor --------------------------------------------


class RunTask(Wire):
    """Slave -> executor: run this task. (A slave also takes it from a master, one task a
    message, as masters before RunTasks sent it.)"""

    framework_id: Id
    framework_name: str = ""
    task: TaskInfo
    principal: str = Field(default="", max_length=200)  # the framework's (set by the master)
    # the directory the slave made for this task's own stdout and stderr (a custom
    # executor writes the task's lines there, `ExecutorDriver.output`); set by the slave
    # for its executor, ignored when it comes from a master
    sandbox: str = ""
    killing: bool = False  # its framework hears TASK_KILLING (as RunTasks.killing)
    # set by the slave for its executor: the grace of this task's kills (its kill
    # policy's, held to the slave's most, else the slave's default), which a kill its
    # executor makes itself (its health check's) gives it; ignored from a master
    kill_grace: float | None = Field(default=None, ge=0, le=MAX_KILL_GRACE)
    # the master's proof that it launched this task on this slave, kept with the task and
    # shown when the slave registers again (a new leader books a task it did not launch
    # only with it); "" on an insecure cluster
    proof: Proof = ""


class GroupLaunch(Wire):
    """A task group's executor, as the master sends the group (RunTasks.group): the slave
    plays it (Mesos's default executor) for the group's tasks."""

    executor_id: Id
    resources: Resources = Field(default_factory=Resources)
    # the master took the executor's resources with this group (it starts the executor);
    # False: it joins the executor running there, and is dropped if that one has ended
    starts: bool = True


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
    # the framework's principal: the slave runs its tasks as that principal's user and
    # reports it when it re-registers (Reregister.owners); "" on an insecure cluster
    principal: str = Field(default="", max_length=200)
    # the framework hears TASK_KILLING as a kill of these tasks begins, whoever kills
    # them (its TASK_KILLING_STATE capability): a health check's kill too
    killing: bool = False
    proofs: list[Proof] = Field(default_factory=list)  # each task's (RunTask.proof), or none
    # a task group's (Mesos's LAUNCH_GROUP): `tasks` are its tasks, run all or none
    group: GroupLaunch | None = None
    # each task's map as it came on the wire, once it validated as `tasks` (None: made
    # here, not read): what a slave journals for the task, which validates as it did
    # here, instead of a dump of the model made again (see `task_maps`)
    _wire_tasks: list[dict[str, Any]] | None = PrivateAttr(default=None)
    # on the master: its tasks (the list), and the maps of them it is sent with (the
    # Accept's, `with_wire_tasks`): a copy with other tasks is dumped
    _sent_as: tuple[list[TaskInfo], list[dict[str, Any]]] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_proof_a_task(self) -> RunTasks:
        if self.proofs and len(self.proofs) != len(self.tasks):
            raise ValueError(f"{len(self.proofs)} proofs for {len(self.tasks)} tasks")
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _keep_wire_tasks(cls, data: Any, handler: ModelWrapValidatorHandler[RunTasks]) -> RunTasks:
        message = handler(data)
        message._wire_tasks = wire_maps(data, "tasks")
        return message

    def wire_dump(self) -> dict[str, Any]:
        """Its map for the wire, with its tasks as the maps it was given for them
        (`with_wire_tasks`), while it holds those tasks: each validates as its task did,
        and a dump of a task's model was 3.6 us (the master sends a launch's tasks as its
        framework's Accept carried them). Its other fields are plain values
        (PLAIN_RUN_TASKS_FIELDS, and `proofs`)."""
        sent_as = self._sent_as
        if sent_as is None or sent_as[0] is not self.tasks or len(self.tasks) != len(sent_as[1]):
            return super().wire_dump()
        body: dict[str, Any] = {name: getattr(self, name) for name in PLAIN_RUN_TASKS_FIELDS}
        body["tasks"], body["proofs"] = list(sent_as[1]), list(self.proofs)
        return body

    def with_wire_tasks(self, maps: list[dict[str, Any] | None]) -> RunTasks:
        """Sent with its tasks as these maps (each validates as its task: an Accept's
        `task_maps`), if it has one for every task."""
        kept = [m for m in maps if m is not None]
        if len(kept) == len(maps) == len(self.tasks) and self.group is None:
            self._sent_as = (self.tasks, kept)
        return self

    def __eq__(self, other: object) -> bool:
        """Equal as messages: their fields (the maps kept from the wire are not theirs)."""
        if not isinstance(other, RunTasks):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def task_maps(self) -> list[dict[str, Any] | None]:
        """Each task as a map that validates as it (`TaskInfo.model_validate`): the map it
        came in on the wire, else None (the model is dumped when one is needed): a dump
        of a command task's TaskInfo is 4.5 us, two Python serializers of its own."""
        if self._wire_tasks is None:
            return [None] * len(self.tasks)
        return list(self._wire_tasks)

    def each(self) -> list[RunTask]:
        """One RunTask a task. (Built by validating: its task passes through as it is, and
        pydantic-core's validation is quicker than `model_construct`'s Python loop.)"""
        return [
            RunTask(
                framework_id=self.framework_id,
                framework_name=self.framework_name,
                task=task,
                principal=self.principal,
                killing=self.killing,
                proof=proof,
            )
            for task, proof in zip(self.tasks, self.proofs or [""] * len(self.tasks), strict=True)
        ]


PLAIN_RUN_TASKS_FIELDS = ("framework_id", "framework_name", "launch_id", "principal", "killing")
"""RunTasks's fields that are plain values (str, bool): dumped as they are."""


class KillTask(Wire):
    framework_id: Id
    task_id: Id
    reason: Reason | None = None  # set when the master, not the framework, kills it
    kill_policy: KillPolicy | None = None  # the kill's own (else the task's, else the slave's)
    # the framework hears TASK_KILLING as the kill begins (its TASK_KILLING_STATE capability)
    killing: bool = False
    # a drain's: the grace at most, whatever the kill policy says (None: no cap)
    grace_cap: float | None = Field(default=None, ge=0, le=MAX_KILL_GRACE)
    # a drain that marks its slave gone: the task ends TASK_GONE_BY_OPERATOR, not KILLED
    gone: bool = False


# the master's Error code to a slave an operator marked gone: it may not come back, and
# shuts down (as a Mesos agent the master sends ShutdownMessage)
SLAVE_GONE = "slave-gone"


class ShutdownFramework(Wire):
    framework_id: Id
    # a drain's bound over its tasks' kill graces, those in their grace already too
    grace_cap: float | None = Field(default=None, ge=0, le=MAX_KILL_GRACE)


class FrameworkShutDown(Wire):
    """Slave -> master: the tasks and executors of a framework it was told to shut down
    have all ended there (each after its kill grace): what they used is free."""

    framework_id: Id
    slave_id: Id


class StatusUpdate(Wire):
    """A task's new state, from the slave; kept and re-sent until acknowledged."""

    LEAN = True  # (as every message that travels in lists: protocol.wire.messages.LISTS)

    framework_id: Id
    slave_id: Id
    status: TaskStatus
    # the task's latest state on its slave, which may be ahead of `status`: a slave sends a
    # task's updates one at a time, each once the one before it is acknowledged, and the
    # master frees a task's resources when this is terminal (Mesos's `latest_state`);
    # None from a slave that predates it
    latest_state: TaskState | None = None


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
    LEAN = True  # (as every message that travels in lists: protocol.wire.messages.LISTS)

    slave_id: Id
    framework_id: Id
    task_id: Id
    uuid: Id


# --- slave <-> custom executor --------------------------------------------------------------


MAX_TOKEN = 4096  # characters of an executor token (a JWT of some 200)


class RegisterExecutor(Wire):
    """A custom executor process announces itself to its slave, with the token the slave
    gave it (`MESOS_EXECUTOR_AUTHENTICATION_TOKEN`)."""

    slave_id: Id
    framework_id: Id
    executor_id: Id
    incarnation: Incarnation = ""
    token: str = Field(default="", max_length=MAX_TOKEN)


class ExecutorRegistered(Wire):
    slave_id: Id
    framework_id: Id
    executor_id: Id
    framework_name: str = ""


class CheckExecutorToken(Wire):
    """An executor asks its slave whose token this is: the Mesos executor adapter, for a
    caller of its HTTP API that presents a token other than its own (only the slave holds
    the key that signs them)."""

    request_id: Id
    token: str = Field(max_length=MAX_TOKEN)


class ExecutorTokenChecked(Wire):
    """The answer: the executor the token was issued to; empty if it is none of the
    slave's."""

    request_id: Id
    framework_id: str = Field(default="", max_length=200)
    executor_id: str = Field(default="", max_length=200)


class ShutdownExecutor(Wire):
    framework_id: Id
    executor_id: Id


class ExecutorExited(Wire):
    """Slave -> master: a custom executor's process ended (status: its exit code), or a
    task group's executor ended with its last task; `checked`: the answer to the
    master's CheckExecutors, for an executor the slave does not run (`ask`: that
    CheckExecutors')."""

    framework_id: Id
    slave_id: Id
    executor_id: Id
    status: int
    checked: bool = False
    ask: int = Field(default=0, ge=0)


MAX_EXECUTORS_CHECKED = 1_000  # in one CheckExecutors


class CheckExecutors(Wire):
    """Master -> slave: executors (custom ones, task groups') the master books there and
    the slave's re-registration named nowhere (their ExecutorExited lost with a crash).
    Behind any launch on the slave's topic that starts one, so the slave answers only for
    those it does not run once it read those: ExecutorExited, `checked`, with its `ask`
    (the master's number for this ask: an answer to one a launch withdrew, read after
    the executor was asked after again, is told apart by it)."""

    framework_id: Id
    executor_ids: list[Id] = Field(max_length=MAX_EXECUTORS_CHECKED)
    ask: int = Field(default=0, ge=0)
