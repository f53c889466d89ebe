"""What a slave is told at start, and what it keeps of each task it runs."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.health_checker import CheckState
from protocol.wire.discrete import EMPTY, Discrete, Ranges, with_counts
from protocol.wire.messages import KillPolicy, Reason, TaskInfo, TaskState
from protocol.wire.resources import PORTS, Resources
from slave.task_users import DEFAULT_MAP, DEFAULT_UIDS, TaskUser

if TYPE_CHECKING:  # (runners import what the slave's config shares)
    from slave.runners import Limit, Runner


@dataclass
class SlaveConfig:
    slave_id: str
    hostname: str
    resources: Resources  # (its ranges and sets counted by size: filled in from `discrete`)
    work_dir: Path
    discrete: Discrete = EMPTY  # the values of its ranges and sets (ports: 31000-32000)
    attributes: dict[str, str] = field(default_factory=dict)
    simulated_tasks: bool = False
    time_scale: float = 1.0  # for simulated task durations
    kill_grace: float = 3.0  # between SIGTERM and SIGKILL, unless a kill policy says
    max_kill_grace: float = 60.0  # the most a kill policy (the task's or the kill's) gets
    memory_check_interval: float = 0.5
    resend_after: float = 1.0  # first re-send of an unacknowledged update
    cluster: str = "default"
    # How long a launch id is remembered, to drop the broker's second delivery of its
    # RunTasks: that comes when the broker restarts from its last save (every second:
    # protocol/brokers.py, docker/mosquitto.conf), well within this.
    launch_memory: float = 600.0
    # How tasks are held to their resources (slave.isolator): cgroups, posix, or auto.
    isolation: str = "posix"
    cgroups_root: Path = Path("/sys/fs/cgroup")
    cgroups_enable_cfs: bool = False  # a hard CPU cap, not only a weight
    max_task_pids: int | None = None  # each task's (0: none); None: its share (pid_shares)
    usage_interval: float = 5.0  # seconds between usage reports to the master
    # seconds: the random delay before (re-)registering is at most this (slave.backoff)
    registration_backoff_factor: float = 0.0
    # one of a process's logical slaves (slave.fleet): its inbox comes through the
    # process's one subscription, and the process sends its heartbeats with the others'
    in_fleet: bool = False
    podman: str = "podman"  # runs tasks' container images (slave.images), if installed
    # How tenants' tasks are kept apart (slave.tenancy), where the host allows it (root):
    # each runs as its principal's user (slave.task_users), in a PID namespace of its
    # own. Off here; `drfmesos slave` turns both on by default.
    switch_user: bool = False
    pid_namespace: bool = False
    # where tasks switch users, setuid programs (and file capabilities) still raise
    # their privileges: off, a task runs under no_new_privs (slave.confine)
    setuid_programs: bool = False
    # A task listening on a port of the slave's range it was not given is killed
    # (slave.ports_isolator), every `ports_check_interval` seconds; None: where tasks
    # are isolated (switch_user or pid_namespace)
    ports_isolation: bool | None = None
    ports_check_interval: float = 5.0
    # Each command task's sandbox measured every `container_disk_watch_interval` seconds (0: never),
    # and, where `enforce_disk_quota`, a task over its disk killed (slave.disk_isolator)
    container_disk_watch_interval: float = 15.0
    enforce_disk_quota: bool = True
    # the ports it holds tasks to: its own range, or (several slaves of one host, each
    # offering a range of its own) the host's, so that none of them leaves the others'
    # ranges to whoever binds them first
    ports_held: Ranges | None = None
    task_uids: range = DEFAULT_UIDS  # the uids principals get
    task_uid_map: Path = DEFAULT_MAP  # the machine's principal -> uid map
    task_users: dict[str, TaskUser] = field(default_factory=dict)  # the operator's
    task_env: dict[str, str] = field(default_factory=dict)  # passed on to every task
    # seconds a custom executor has to register before it is killed (0: no bound)
    executor_registration_timeout: float = 60.0
    # signs executors' tokens (slave.executor_tokens); None: a key of its own, made once
    executor_secret_key: Path | None = None
    # ended tasks' and executors' sandboxes go this many seconds after their end, less
    # as the disk fills, looked at every `disk_watch_interval` (slave.sandbox_gc)
    gc_delay: float = 7 * 24 * 3600.0
    disk_watch_interval: float = 60.0
    gc_disk_headroom: float = 0.1

    def __post_init__(self) -> None:
        self.resources = with_counts(self.resources, self.discrete, "--resources")

    @property
    def held_ports(self) -> Discrete:
        """The ports it holds its tasks to (`ports_held`, else its own)."""
        if self.ports_held is None:
            return self.discrete
        return Discrete({PORTS: self.ports_held})

    @property
    def holds_ports(self) -> bool:
        """Whether its tasks are held to the ports they were given (ports_isolation)."""
        if self.ports_isolation is not None:
            return self.ports_isolation
        return self.switch_user or self.pid_namespace


@dataclass(frozen=True)
class KillBegun:
    """A kill in its grace, as its task's checkpoint keeps it: a slave restarted in the
    grace finishes it (slave.recovery), as Mesos's command executor, which outlives its
    agent, does. `until`: when its SIGKILL is due, by the wall clock (the slave's own
    clock ends with it); then how the task ends if not as its framework's kill does
    (KILLED): a health check's kill's state, reason and words (a runner's `Limit`)."""

    until: float
    state: TaskState | None = None
    reason: Reason | None = None
    message: str = ""
    hard: bool = False

    @classmethod
    def of(cls, until: float, limit: Limit | None) -> KillBegun:
        if limit is None:
            return cls(until)
        return cls(until, limit.state, limit.reason, limit.message, limit.hard)

    def dump(self) -> dict[str, Any]:
        return {
            "until": self.until,
            "state": self.state.value if self.state is not None else None,
            "reason": self.reason.value if self.reason is not None else None,
            "message": self.message,
            "hard": self.hard,
        }

    @classmethod
    def load(cls, raw: Any) -> KillBegun | None:
        """As `dump` wrote it (None: no kill, as a slave before kills were kept wrote)."""
        if raw is None:
            return None
        state, reason = raw.get("state"), raw.get("reason")
        return cls(
            float(raw["until"]),
            TaskState(state) if state is not None else None,
            Reason(reason) if reason is not None else None,
            str(raw.get("message") or ""),
            bool(raw.get("hard")),
        )


@dataclass
class TaskRecord:
    framework_id: str
    info: TaskInfo
    state: TaskState
    runner: Runner | None = None  # (None: a custom executor's task)
    executor_key: tuple[str, str] | None = None  # (framework id, executor id)
    kill_reason: Reason | None = None  # the master killed it (preemption): say why
    info_dump: dict[str, Any] | None = None  # `info` as the journal holds it (made once)
    principal: str = ""  # its framework's, as the master named it in the launch
    proof: str = ""  # the master's proof it launched it here (RunTask.proof)
    healthy: bool | None = None  # its health check's last verdict (None: none yet)
    killing: bool = False  # its framework hears TASK_KILLING (RunTask.killing)
    kill_gone: bool = False  # a drain marking its slave gone: it ends TASK_GONE_BY_OPERATOR
    kill: KillBegun | None = None  # its kill in its grace (checkpointed: a restart resumes it)
    health: CheckState | None = None  # where the slave's checks of it are (checkpointed too)

    def grace(self, config: SlaveConfig, policy: KillPolicy | None = None) -> float:
        """Its grace between SIGTERM and SIGKILL: the kill's policy, else its own, else
        the slave's default; never over the slave's most."""
        policy = policy or self.info.kill_policy
        if policy is None:
            return config.kill_grace
        return min(policy.grace_period, config.max_kill_grace)


WHY_THE_MASTER_KILLS = {
    Reason.TASK_PREEMPTED: "preempted, to give a framework below its fair share room",
    Reason.SLAVE_DRAINING: "its slave is draining for maintenance",
}


def killed_by_master(reason: Reason, detail: str) -> str:
    """What a task the master killed says: why, whatever its runner or executor said."""
    why = WHY_THE_MASTER_KILLS.get(reason, reason.value)
    extra = f" ({detail})" if detail and detail != "killed" else ""
    return f"killed by the master: {why}{extra}"


def journal_executor_id(task: Any) -> str | None:
    """The executor id of a task as the journal held it, if it can be read at all."""
    with contextlib.suppress(Exception):
        executor_id = task["executor"]["executor_id"]
        if isinstance(executor_id, str):
            return executor_id
    return None
