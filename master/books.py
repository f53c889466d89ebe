"""The master's records: frameworks, slaves, offers, tasks, and updates owed to frameworks.

Plain typed structures and nothing else: the master's handlers read and change them, the
allocator keeps the resource arithmetic, and the read side (`master.http.snapshot`)
turns them into the views and the `State` message that tools read.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from master.dying import Dying
from master.kept_by_principal import KeptByPrincipal
from master.orphans import Orphans
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.health import CommandCheck
from protocol.wire.messages import (
    TERMINAL_STATES,
    CommandInfo,
    ExecutorUsage,
    FrameworkCapability,
    KillTask,
    Reason,
    SlaveView,
    Source,
    TaskInfo,
    TaskRequest,
    TaskState,
    TaskStatus,
    TaskUsage,
    TaskView,
    Update,
)
from protocol.wire.resources import Resources

RELAYED_KEPT = 8  # a task's last forwarded updates remembered, to know a re-send
# removed frameworks' ids remembered, the last of each principal (the registry keeps as
# many): one tenant's churn of its own pushes out nobody else's
REMOVED_KEPT = 2_000
COMPLETED = 50  # removed frameworks kept a principal, for the API (Mesos: 50 in all)
RECENT_ACCEPTED = 1024  # offer ids a framework's Accepts used, kept to know one sent again


@dataclass(frozen=True, slots=True)
class Roles:
    """A framework's role, or a multi-role framework's roles (`role` its first)."""

    role: str
    roles: tuple[str, ...] | None = None

    def of(self, info: TaskInfo) -> str:
        """The role a task's resources are allocated to (`Framework.task_role`)."""
        return self.role if self.roles is None else allocated_role(self.roles, info)


def allocated_role(roles: Sequence[str], info: TaskInfo) -> str:
    """The role of a multi-role framework's `roles` that a task's resources are allocated
    to: the one it names, else (one that names none of them, as a slave may report it)
    the first."""
    role = info.role
    return role if role is not None and role in roles else roles[0]


@dataclass(slots=True)
class Task:
    info: TaskInfo
    framework_id: str
    slave_id: str
    state: TaskState = TaskState.STAGING
    status: TaskStatus | None = None
    launched_at: float = 0.0  # the loop's clock (monotonic), for durations
    launched_wall: float = field(default_factory=time.time)  # the wall clock, for people
    usage: TaskUsage | None = None  # the slave's last report (isolation accounting)
    used: Resources | None = None  # cpus (CPU-s/s) and mem (MB) it used lately (task_usage)
    # its resources went back to the pool: it ended, or its slave's latest state says it
    # did while its terminal update waits behind ones its framework has not acknowledged
    freed: bool = False
    # its slave's last updates' uuids, forwarded: a slave re-sends only its stream's head
    # (and, after a crash, the one acknowledged just before), so a few are enough. A
    # tuple: a deque took 760 bytes of a task's 4.4 KB (100,000 tasks: 76 MB)
    relayed: tuple[str, ...] = ()
    # its framework's kill, sent again when its slave re-registers while it runs (Mesos's
    # `killedTasks`): one sent while the slave was away is lost. One a task: the latest
    kill: KillTask | None = None

    def __post_init__(self) -> None:
        self.info = kept_info(self.info)  # (what a view reads of it, not what ran)

    def relay(self, uuid: str) -> None:
        """Remember a forwarded update's uuid (the last RELAYED_KEPT of them)."""
        self.relayed = (*self.relayed[1 - RELAYED_KEPT :], uuid)

    def health_said(self, healthy: bool | None) -> bool:
        """Its slave's latest health verdict, as a re-registration names it (a new leader
        learns it there: the slave says a verdict again only when it changes); whether
        the task's status changed with it."""
        status = self.status
        if healthy is None or (status is not None and status.healthy == healthy):
            return False
        if status is None:  # (a new leader's: its state as its slave says it)
            self.status = TaskStatus(
                task_id=self.task_id,
                state=self.state,
                slave_id=self.slave_id,
                source=Source.SLAVE,
                healthy=healthy,
            )
        else:
            self.status = status.model_copy(update={"healthy": healthy})
        return True

    @property
    def task_id(self) -> str:
        return self.info.task_id

    @property
    def resources(self) -> Resources:
        return self.info.resources

    @property
    def terminal(self) -> bool:
        """Ended, or ended on its slave (its resources freed) with its framework still to
        hear the last of its updates."""
        return self.freed or self.state in TERMINAL_STATES

    def view(self) -> TaskView:
        status = self.status
        return TaskView(
            task_id=self.task_id,
            framework_id=self.framework_id,
            slave_id=self.slave_id,
            state=self.state,
            resources=self.resources,
            discrete=self.info.discrete,
            name=self.info.name,
            reason=status.reason if status is not None and status.state.terminal else None,
            message=status.message if status is not None else "",
            healthy=status.healthy if status is not None else None,
            launched_at=self.launched_wall,
            ended_at=status.timestamp if status is not None and status.state.terminal else None,
            usage=self.usage,
            used=self.used,
        )


@dataclass(slots=True)
class PendingUpdate:
    """A status update sent to a framework and not yet acknowledged."""

    update: Update
    slave_id: str
    next_attempt: float
    backoff: float
    relayed: bool = False  # from a slave, which keeps it until the framework acknowledges


@dataclass(slots=True)
class Framework:
    framework_id: str
    principal: str  # who registered it: only this principal may act on it
    name: str
    role: str  # its weight is its role's (the allocator's); a multi-role one's first
    inbox: str
    incarnation: str
    failover_timeout: float
    registered_at: float
    connected: bool = True  # (whether it suppressed its offers: the allocator's)
    disconnected_at: float | None = None
    tasks: dict[str, Task] = field(default_factory=dict)
    offers: set[str] = field(default_factory=set)
    slaves_used: set[str] = field(default_factory=set)  # where it ever ran tasks (executors)
    # its custom executors' own resources, by (slave, executor id): held until they exit
    executors: dict[tuple[str, str], Resources] = field(default_factory=dict)
    # their ids by slave (a slave back is asked after its own alone: ExecutorsBack)
    executors_on: dict[str, set[str]] = field(default_factory=dict)
    # those of them that are task groups' executors (Mesos's default executor, which the
    # slave plays): a group may not name a custom one, nor a task of its own a group's
    group_executors: set[tuple[str, str]] = field(default_factory=set)
    # those of them a slave back (a restart: its ExecutorExited may be lost) named
    # nowhere, asked after (CheckExecutors) and not answered yet, nor launched on since:
    # the number of the ask waited on (an answer to an earlier one is of before a launch)
    executor_checks: dict[tuple[str, str], int] = field(default_factory=dict)
    pending: dict[str, PendingUpdate] = field(default_factory=dict)  # by status uuid
    # recent terminal, bounded: the oldest dropped as one more comes (an OrderedDict: a
    # dict's first key is found past the slots its dropped ones left, 1.2 us a drop at
    # 1,000 kept, where popitem is 0.4)
    completed: OrderedDict[str, TaskStatus] = field(default_factory=OrderedDict)
    ended: OrderedDict[str, Task] = field(default_factory=OrderedDict)  # the same, for the API
    finished_tasks: int = 0
    demand: list[TaskRequest] | None = None  # what it declared it still wants (Request)
    last_shape: Resources | None = None  # its latest task's resources
    partition_aware: bool = False  # hears Mesos 1.1's finer states, not TASK_LOST
    task_killing: bool = False  # hears TASK_KILLING as a kill begins (TASK_KILLING_STATE)
    shared_resources: bool = False  # offered shared volumes, and makes them (SHARED_RESOURCES)
    # partition-aware only: its tasks on unreachable slaves (they may still run; a slave
    # that comes back brings them back)
    unreachable: dict[str, Task] = field(default_factory=dict)
    kills_owed: set[str] = field(default_factory=set)  # unreachable tasks it asked to kill
    removed_at: float | None = None  # wall clock, once removed (a completed framework)
    removed_why: str = ""
    roles: list[str] | None = None  # a multi-role framework's (MULTI_ROLE), each offered
    # the roles its custom executors' resources are allocated to (a multi-role one's)
    executor_roles: dict[tuple[str, str], str] = field(default_factory=dict)
    # the offers its latest Accepts used, oldest first (RECENT_ACCEPTED), each with the
    # ids of the Accept's tasks: an Accept that names only these offers and tasks was
    # delivered again (MQTT's at-least-once), not made anew
    # (a tuple each, shared by an Accept's offers: under a quarter of a frozenset's, and
    # 1,024 of them are kept for every framework)
    accepted: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def used(self, offer_id: str, task_ids: tuple[str, ...]) -> None:
        """An Accept of its, of these tasks, used this offer (remembered, boundedly)."""
        self.accepted[offer_id] = task_ids
        if len(self.accepted) > RECENT_ACCEPTED:
            del self.accepted[next(iter(self.accepted))]

    def accepted_before(self, offer_ids: list[str], task_ids: set[str]) -> bool:
        """Whether an Accept of these offers and tasks was carried out already."""
        if not offer_ids or not all(o in self.accepted for o in offer_ids):
            return False
        return task_ids <= set().union(*(self.accepted[o] for o in offer_ids))

    def keeps_executor(self, key: tuple[str, str], resources: Resources, role: str | None) -> bool:
        """Its custom executor `key` (slave, executor id) holds `resources`, allocated to
        `role` (a multi-role framework's; None: its one role), counted once: False, and
        nothing changed, if it was counted already."""
        if key in self.executors:
            return False
        self.executors[key] = resources
        self.executors_on.setdefault(key[0], set()).add(key[1])
        if role is not None:
            self.executor_roles[key] = role
        return True

    def forget_executor(self, key: tuple[str, str]) -> tuple[Resources | None, str | None]:
        """Its executor `key` is gone (exited, never started, its slave removed): out of
        every book of it. What it held (None: not booked) and the role it was held in."""
        self.group_executors.discard(key)
        self.executor_checks.pop(key, None)
        here = self.executors_on.get(key[0])
        if here is not None:
            here.discard(key[1])
            if not here:
                del self.executors_on[key[0]]
        return self.executors.pop(key, None), self.executor_roles.pop(key, None)

    def all_roles(self) -> list[str]:
        """The roles it is offered in: a multi-role framework's roles, or its one role."""
        return list(self.roles) if self.roles is not None else [self.role]

    def role_of(self, info: TaskInfo) -> str | None:
        """The role a task's resources are allocated to, as the allocator is told it: a
        multi-role framework's task's (one that names none of its roles, as a slave may
        report it, its first role's); None for a framework of one role."""
        return None if self.roles is None else allocated_role(self.roles, info)

    def task_role(self, info: TaskInfo) -> str:
        """The role a task's resources are allocated to (as the state shows it)."""
        return self.role_of(info) or self.role

    def capabilities(self) -> list[FrameworkCapability]:
        """What it declared it understands (as the Mesos APIs show it)."""
        declared = {
            FrameworkCapability.PARTITION_AWARE: self.partition_aware,
            FrameworkCapability.TASK_KILLING_STATE: self.task_killing,
            FrameworkCapability.SHARED_RESOURCES: self.shared_resources,
            FrameworkCapability.MULTI_ROLE: self.roles is not None,
        }
        return [c for c, on in declared.items() if on]

    def launched(self, resources: Resources) -> None:
        """A task started: one fewer of that size is still wanted."""
        self.last_shape = resources
        for request in self.demand or []:
            if request.resources == resources:
                request.count -= 1
                if request.count <= 0:
                    assert self.demand is not None
                    self.demand.remove(request)
                return

    def slave_of(self, task_id: str) -> str | None:
        """The slave the books place a task on: running, or recently ended (None: not
        known to them)."""
        known = self.tasks.get(task_id)
        if known is not None:
            return known.slave_id
        ended = self.completed.get(task_id)
        return ended.slave_id if ended is not None else None

    def live(self, task_id: str) -> bool:
        """Whether a task of this id is live in the books (running, or out of touch)."""
        return task_id in self.tasks or task_id in self.unreachable

    def declare_ended(self, status: TaskStatus, keep: int = 1000) -> None:
        """Remember (boundedly) how a task ended, for reconciliation and for a slave that
        brings it back later: it is then killed, not revived. Also for tasks the master
        says are gone without having known them (on a removed slave, or never heard of)."""
        self.completed[status.task_id] = kept_status(status)
        if len(self.completed) > keep:
            self.completed.popitem(last=False)

    def complete(self, task: Task, status: TaskStatus, keep: int = 1000) -> None:
        """Move a task that reached a terminal state out of the live set."""
        self.tasks.pop(task.task_id, None)
        self.declare_ended(status, keep)
        task.state, task.status = status.state, self.completed[status.task_id]
        self.ended[task.task_id] = task
        if len(self.ended) > keep:
            self.ended.popitem(last=False)
        if status.state == TaskState.FINISHED:
            self.finished_tasks += 1

    def running_tasks(self) -> int:
        return sum(1 for t in self.tasks.values() if not t.terminal)


NOT_KEPT = CommandInfo(value="(not kept by the master)")
CHECK_NOT_KEPT = CommandCheck(value="(not kept by the master)")


def kept_info(info: TaskInfo) -> TaskInfo:
    """What the books keep of a task's TaskInfo, live or ended: its ids, name, resources,
    kill policy, health check's kind and timings, and executor's id and resources; not
    its command, environment, image or data, nor a command check's command (a tenant's,
    up to a megabyte a task, which the master never reads once the launch is sent: the
    slave runs the checks; Mesos's master keeps a `Task`, with none of them). Else a
    tenant's tasks of 0.001 CPUs held a gigabyte of the master for a CPU of its share
    (reviews 72, 73)."""
    executor = info.executor
    if executor is not None and executor.command is not NOT_KEPT:
        executor = executor.model_copy(update={"command": NOT_KEPT})
    command = None if info.command is None else NOT_KEPT
    check = info.health_check
    if check is not None and check.command is not None and check.command is not CHECK_NOT_KEPT:
        check = check.model_copy(update={"command": CHECK_NOT_KEPT})
    unchanged = command is info.command and executor is info.executor
    if unchanged and check is info.health_check and not info.data and info.container is None:
        return info  # (nothing to leave out: kept as it is)
    return info.model_copy(
        update={
            "command": command,
            "executor": executor,
            "container": None,
            "data": b"",
            "health_check": check,
        }
    )


def kept_status(status: TaskStatus) -> TaskStatus:
    """A status as the books keep it once its task ended: without its executor's data
    (as Mesos's master keeps it), which its framework had with the update."""
    return status.model_copy(update={"data": b""}) if status.data else status


@dataclass(slots=True)
class Slave:
    slave_id: str
    principal: str  # the slave principal whose connection it speaks on
    hostname: str
    total: Resources
    attributes: dict[str, str]
    incarnation: str
    last_seen: float
    tasks: set[tuple[str, str]] = field(default_factory=set)  # (framework_id, task_id)
    # of its tasks, those that hold some of its ranges and sets (ports), added with them
    # (`add_task`): what an offer's values are kept clear of, read without walking every
    # task of the slave (`master.slave_values`: most hold none). A key may outlive its
    # task's place in `tasks` here (it is pruned as it is read), never the other way round
    valued: set[tuple[str, str]] = field(default_factory=set)
    connected: bool = True  # False from its Last Will until it is back (or removed)
    offers: set[str] = field(default_factory=set)
    used: Resources | None = None  # what its tasks and executors used at its last report
    # its custom executors' last reported usage, by (framework, executor id): each report
    # names every live one, and replaces these
    executor_usage: dict[tuple[str, str], ExecutorUsage] = field(default_factory=dict)
    discrete: Discrete = EMPTY  # its ranges and sets (ports): `master.slave_values`
    isolation_warning: str = ""  # what it says it does not enforce between tenants

    def add_task(self, framework_id: str, info: TaskInfo) -> None:
        """A task of the framework's is on this slave (in `tasks`, and `valued` if it
        holds ranges or sets)."""
        key = (framework_id, info.task_id)
        self.tasks.add(key)
        if info.discrete:
            self.valued.add(key)

    def view(
        self,
        free: Resources,
        last_heartbeat: float | None = None,
        maintenance: Maintenance | None = None,
        free_discrete: Discrete = EMPTY,
    ) -> SlaveView:
        """`last_heartbeat`: `last_seen` on the wall clock (the books keep the loop's);
        `maintenance`: if an operator took it out of the offers."""
        return SlaveView(
            slave_id=self.slave_id,
            principal=self.principal,
            hostname=self.hostname,
            total=self.total,
            free=free,
            tasks=len(self.tasks),
            connected=self.connected,
            last_heartbeat=last_heartbeat,
            attributes=self.attributes,
            used=self.used if self.tasks or self.executor_usage else None,
            maintenance=maintenance.status if maintenance is not None else None,
            drain_acks_owed=maintenance.acks_owed if maintenance is not None else 0,
            discrete=self.discrete,
            free_discrete=free_discrete,
            isolation_warning=self.isolation_warning,
        )


DRAINING, DRAINED = "DRAINING", "DRAINED"  # Mesos's DrainState


@dataclass(slots=True)
class Maintenance:
    """An operator took a slave out of the offers (Mesos's deactivated agent), and may be
    draining it: `drain` is DRAINING until its tasks have ended and their frameworks
    acknowledged that, then DRAINED (None: only deactivated, its tasks left running)."""

    drain: str | None = None
    max_grace_period: float | None = None  # seconds: a draining task's grace at most
    mark_gone: bool = False  # once DRAINED, marked gone
    # tasks a kill was sent for since the drain began or its slave came back (not kept)
    killed: set[tuple[str, str]] = field(default_factory=set)
    # since when nothing has run there, only updates owed to frameworks (not kept)
    quiet_since: float | None = None
    # the frameworks whose acknowledgements its drain waits for meanwhile (not kept)
    acks_owed: int = 0

    @property
    def status(self) -> str:
        """What the state, the web UI and the metrics say: draining, drained, deactivated."""
        return (self.drain or "DEACTIVATED").lower()


@dataclass(slots=True)
class OfferRecord:
    offer_id: str
    framework_id: str
    slave_id: str
    resources: Resources
    created_at: float
    discrete: Discrete = EMPTY  # the slave's values it offers (taken from no task's)
    role: str | None = None  # a multi-role framework's offer's role (None: its one role)


@dataclass
class Books:
    frameworks: dict[str, Framework] = field(default_factory=dict)
    slaves: dict[str, Slave] = field(default_factory=dict)
    offers: dict[str, OfferRecord] = field(default_factory=dict)
    orphans: Orphans = field(default_factory=Orphans)  # by framework and by slave
    dying: Dying = field(default_factory=Dying)  # a removed framework's tasks, ending
    inboxes: dict[tuple[str, str], str] = field(default_factory=dict)  # (principal, inbox) -> id
    # how many of `frameworks` each principal registered (kept by add/forget_framework)
    principal_frameworks: Counter[str] = field(default_factory=Counter)
    # who a slave id belongs to, kept after the slave is removed: no principal takes it over
    slave_owners: dict[str, str] = field(default_factory=dict)
    removed: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (principal, why)
    # the roles of those removed (a multi-role one's roles), where known: a slave back
    # after a failover may name their tasks, dying in them (`Removals.hold_dying_again`)
    removed_roles: dict[str, Roles] = field(default_factory=dict)
    _removed_order: KeptByPrincipal = field(default_factory=KeptByPrincipal, repr=False)
    _completed_order: KeptByPrincipal = field(default_factory=KeptByPrincipal, repr=False)
    # after a failover: slaves of the registry not back yet, with their deadlines
    recovering: dict[str, float] = field(default_factory=dict)
    # slaves removed while their tasks may still run (unreachable): those tasks were
    # reported TASK_UNREACHABLE (TASK_LOST to frameworks not partition-aware)
    removed_slaves: set[str] = field(default_factory=set)
    # slaves an operator marked gone: they may not come back
    gone_slaves: set[str] = field(default_factory=set)
    # slaves an operator deactivated or is draining (registered or not): offered to no one
    maintenance: dict[str, Maintenance] = field(default_factory=dict)
    # tasks a re-registering slave says ended, their last update still on its way
    ending: dict[tuple[str, str], str] = field(default_factory=dict)  # -> slave id
    ending_of: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # by slave
    # the last frameworks removed, with their tasks, for the API and the web UI (Mesos's
    # completed frameworks): what happened to a framework stays visible after it is gone
    completed_frameworks: dict[str, Framework] = field(default_factory=dict)

    def slave_ending(self, slave_id: str, keys: set[tuple[str, str]]) -> None:
        """What a slave re-registering says ended there, in place of what it said before
        (a slave re-registering over and over, naming other tasks each time, grew the
        books by 10,000 a time, kept until it was removed)."""
        for key in self.ending_of.pop(slave_id, ()):
            if self.ending.get(key) == slave_id:
                del self.ending[key]
        if keys:
            self.ending_of[slave_id] = keys
            for key in keys:
                self.ending[key] = slave_id

    def ended(self, key: tuple[str, str]) -> None:
        """The task's last update came: it is ending no more."""
        slave_id = self.ending.pop(key, None)
        if slave_id is not None:
            self.ending_of.get(slave_id, set()).discard(key)

    def add_framework(self, fw: Framework) -> None:
        self.frameworks[fw.framework_id] = fw
        self.principal_frameworks[fw.principal] += 1

    def forget_framework(
        self, fw: Framework, why: str, keep: int = REMOVED_KEPT, keep_completed: int = COMPLETED
    ) -> None:
        """Drop a removed framework, remembering (boundedly) that it was removed and why,
        and (more boundedly) the framework itself, its tasks ended as killed."""
        del self.frameworks[fw.framework_id]
        self.principal_frameworks[fw.principal] -= 1
        if not self.principal_frameworks[fw.principal]:
            del self.principal_frameworks[fw.principal]
        self.inboxes.pop((fw.principal, fw.inbox), None)
        roles = Roles(fw.role, tuple(fw.roles) if fw.roles is not None else None)
        self.remember_removed(fw.framework_id, fw.principal, why, keep, roles)
        for task in list(fw.tasks.values()):  # killed with it
            status = TaskStatus(
                task_id=task.task_id,
                state=TaskState.KILLED,
                slave_id=task.slave_id,
                reason=Reason.FRAMEWORK_REMOVED,
                message=f"its framework was removed: {why}",
            )
            fw.complete(task, status)
        fw.connected = False
        fw.removed_at, fw.removed_why = time.time(), why
        self.completed_frameworks[fw.framework_id] = fw
        # (a bound a principal, as removed ids': one tenant's churn pushes out its own)
        for old in self._completed_order.add(fw.principal, fw.framework_id, keep_completed):
            self.completed_frameworks.pop(old, None)

    def remember_removed(
        self,
        framework_id: str,
        principal: str,
        why: str,
        keep: int = REMOVED_KEPT,
        roles: Roles | None = None,
    ) -> None:
        """A framework id removed, and why, and its roles if known (the principal's
        oldest forgotten past `keep`)."""
        self.removed[framework_id] = (principal, why)
        if roles is not None:
            self.removed_roles[framework_id] = roles
        for old in self._removed_order.add(principal, framework_id, keep):
            del self.removed[old]
            self.removed_roles.pop(old, None)

    def task(self, framework_id: str, task_id: str) -> Task | None:
        fw = self.frameworks.get(framework_id)
        return fw.tasks.get(task_id) if fw else None

    def resource_in_use(self, slave_id: str, key: str) -> bool:
        """Whether a live task on the slave holds that resource (a volume, say)."""
        slave = self.slaves.get(slave_id)
        for framework_id, task_id in slave.tasks if slave is not None else ():
            task = self.task(framework_id, task_id)
            if task is None or task.terminal:
                continue
            executor = task.info.executor  # (a custom executor may hold a volume too)
            if key in task.info.resources or (executor is not None and key in executor.resources):
                return True
        return False
