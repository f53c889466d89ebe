"""What every party hears of the cluster: the leader's announcement, Last Wills, the
state snapshot and its views, and the event stream."""

from __future__ import annotations

import time

from pydantic import Field

from protocol.wire.discrete import EMPTY as NO_VALUES
from protocol.wire.discrete import Discrete
from protocol.wire.framework import TaskRequest
from protocol.wire.resources import Limit, Resources
from protocol.wire.slave import TaskUsage
from protocol.wire.values import Id, Offer, Reason, StatusMessage, TaskState, Wire

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
    roles: list[str] | None = None  # a multi-role framework's (`role` is its first)


class SlaveView(Wire):
    slave_id: str
    principal: str = ""
    hostname: str
    total: Resources
    free: Resources
    tasks: int
    discrete: Discrete = Field(default=NO_VALUES)  # its ranges and sets (ports, ...)
    free_discrete: Discrete = Field(default=NO_VALUES)  # of those, held by no task
    connected: bool = True  # False from its connection's loss until it is back (or removed)
    last_heartbeat: float | None = None  # wall clock, when the master last heard from it
    attributes: dict[str, str] = Field(default_factory=dict)  # its `--attributes`
    used: Resources | None = None  # its tasks' and executors' use at its last report
    # an operator took it out of the offers: "deactivated", "draining" or "drained"
    maintenance: str | None = None
    # draining, its tasks ended: the frameworks yet to acknowledge their updates from it,
    # which the drain waits for (at most the master's --drain-ack-wait)
    drain_acks_owed: int = 0
    # what it does not enforce between tenants (protocol.wire.slave.IsolationWarning)
    isolation_warning: str = ""


class TaskView(Wire):
    task_id: str
    framework_id: str
    slave_id: str
    state: TaskState
    resources: Resources
    discrete: Discrete = Field(default=NO_VALUES)  # its ports (and other values)
    name: str = ""
    reason: Reason | None = None  # for ended tasks: why
    message: str = ""
    healthy: bool | None = None  # what its health check last said (None: nothing yet)
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
    slave_count: int = 0  # slaves registered: `slaves` lists them only on small clusters

    @property
    def slaves_registered(self) -> int:
        """How many slaves the master has, listed in `slaves` or only counted."""
        return max(self.slave_count, len(self.slaves))


class ClusterEvent(Wire):
    """One step in the master's life: allocation, launch, release, ... (for tools and plots)."""

    LEAN = True  # (as every message that travels in lists: see protocol.wire.messages.LISTS)

    kind: str
    timestamp: float = Field(default_factory=time.time)
    framework_id: str | None = None
    slave_id: str | None = None
    task_id: str | None = None
    offer_id: str | None = None
    resources: Resources = Field(default_factory=Resources)
    state: TaskState | None = None
    detail: StatusMessage = ""  # (a refusal's words may be a tenant's: cut at 4,096)
    # the master's count of the events it emitted, from 1 (0: a change told to its own
    # listeners only): a follower that sees numbers skipped knows it missed events (the
    # broker dropped what it held for it past its bounds, or its lease lapsed)
    seq: int = Field(default=0, ge=0)
