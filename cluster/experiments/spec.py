"""Experiment specs: a cluster, a master policy, frameworks and a run, in YAML.

    cluster:
      slaves: [{count: 3, resources: {cpus: 2, mem: 2200}}]
    master: {policy: drf, allocation_interval: 1}
    frameworks:
      - {name: A, task: {cpus: 0.5, mem: 512}, duration: {uniform: [20, 40]}}
      - {name: B, task: {cpus: 0.5, mem: 512}, duration: {uniform: [20, 40]}, start: 60}
    run: {duration: 300, seed: 1}

The pydantic model is the documentation: `drfmesos experiment schema` prints its JSON
schema. A bad spec is refused before anything starts, with the field named.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cluster.experiments.swim import SwimSpec
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.allocation.role_tree import check_role
from master.roles_file import QuotaSpec
from protocol.wire.codec import describe_validation
from protocol.wire.resources import Resources


class SpecError(ValueError):
    """A spec that cannot be run; the message names the field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SlaveGroup(Strict):
    count: int = Field(default=1, ge=1, le=100_000)
    resources: Resources
    name: str = "slave"


class Cluster(Strict):
    slaves: list[SlaveGroup] = Field(min_length=1)
    # how a live run's slaves run tasks: simulated (sleeps, many slaves a process), or
    # real command tasks held by cgroups or not (posix), as `drfmesos slave --isolation`
    isolation: Literal["simulated", "cgroups", "posix"] = "simulated"
    cgroups_enable_cfs: bool = False  # with cgroups: a hard cap of each task's cpus

    def nodes(self) -> list[tuple[str, Resources]]:
        out = []
        for g, group in enumerate(self.slaves):
            for i in range(group.count):
                out.append((f"{group.name}-{g}-{i:04d}", group.resources))
        return out


class PreemptionSpec(Strict):
    """Preemption in the master (see `drfmesos master --help`), seconds of spec time."""

    timeout: float | None = Field(default=None, ge=0)
    threshold: float = Field(default=0.5, ge=0, le=1)
    notice: float = Field(default=2.0, ge=0)
    victims: Literal["youngest", "oldest"] = "youngest"
    guarantee_timeout: float | None = Field(default=None, ge=0)

    def config(self) -> PreemptionConfig:
        return PreemptionConfig(
            self.timeout, self.threshold, self.notice, self.victims, self.guarantee_timeout
        )


class Master(Strict):
    policy: Literal[
        "hdrf", "naive-hdrf", "flat", "drf", "wdrf", "asset", "fifo", "cpu", "slots", "ceei"
    ] = "drf"
    allocation_interval: float = Field(default=1.0, gt=0)
    # a round soon after a task ends (the master's --allocate-on-free); false: what it
    # freed waits for the next round, as in Mesos, and what ends between rounds goes together
    allocate_on_free: bool = True
    refuse_seconds: float = Field(default=5.0, ge=0)
    slots_per_node: int | None = Field(default=None, ge=1, le=1000)
    # weights of roles and pools (any node of the role tree: eng, eng/backend, ...)
    weights: dict[str, float] = Field(default_factory=dict)
    # quota of roles and pools: {eng: {guarantee: {cpus: 4}, limit: {cpus: 10}}}
    quota: dict[str, QuotaSpec] = Field(default_factory=dict)
    # whose unmet guarantees are kept free: every quota role's (Mesos) or only those of
    # roles that want offers (the master's --quota-headroom)
    quota_headroom: Literal["all", "demand"] = "all"
    preemption: PreemptionSpec | None = None

    @model_validator(mode="after")
    def _weights(self) -> Master:
        for role in self.quota:
            check_role(role)
        for role, weight in self.weights.items():
            check_role(role)
            if not weight > 0:
                raise ValueError(f"weights.{role}: must be positive, got {weight}")
        return self

    @model_validator(mode="after")
    def _slots(self) -> Master:
        if self.policy == "slots" and self.slots_per_node is None:
            raise ValueError("policy 'slots' needs slots_per_node")
        return self


class Duration(Strict):
    """Fixed seconds, a uniform range, or seconds read from a trace file (cycled)."""

    fixed: float | None = Field(default=None, ge=0)
    uniform: tuple[float, float] | None = None
    trace: Path | None = None

    @model_validator(mode="after")
    def _one(self) -> Duration:
        given = [x is not None for x in (self.fixed, self.uniform, self.trace)]
        if sum(given) != 1:
            raise ValueError("give exactly one of fixed, uniform, trace")
        if self.uniform is not None:
            lo, hi = self.uniform
            if not 0 <= lo <= hi:
                raise ValueError("uniform needs 0 <= low <= high")
        return self


class TaskChange(Strict):
    """From `at` seconds on, the framework's tasks have this size."""

    at: float = Field(ge=0)
    task: Resources


class Jobs(Strict):
    """Work comes in jobs of `tasks` tasks; a new job is submitted when one finishes."""

    tasks: int = Field(ge=1)
    concurrent: int = Field(default=1, ge=1)


class TraceJob(Strict):
    submit: float = Field(ge=0)
    tasks: int = Field(ge=1)
    task: Resources
    duration: float = Field(ge=0)


class Framework(Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    task: Resources | None = None
    duration: Duration | None = None
    tasks_per_offer: Literal["1", "fill"] = "1"
    weight: float = Field(default=1.0, gt=0)
    role: str | None = None
    start: float = Field(default=0.0, ge=0)
    stop: float | None = Field(default=None, gt=0)
    changes: list[TaskChange] = Field(default_factory=list)
    jobs: Jobs | None = None
    trace: Path | None = None  # CSV: submit,tasks,cpus,mem,duration (jobs of a user)
    swim: SwimSpec | None = None  # a SWIM workload (Facebook's), with its task model
    max_running: int | None = Field(default=None, ge=1)
    # offered only slaves with room for one of its tasks (Mesos 1.10's offer_filters), so it
    # never declines; off by default, as the blog's and the paper's frameworks had no such
    min_offer: bool = False
    # on real slaves (cluster.isolation not simulated): each task spins this many
    # CPU-bound processes for its duration (0: it sleeps)
    spin: int = Field(default=0, ge=0, le=64)

    @model_validator(mode="after")
    def _work(self) -> Framework:
        traced = self.trace is not None or self.swim is not None
        if not traced and (self.task is None or self.duration is None):
            raise ValueError("a framework needs task and duration, a trace, or swim")
        if self.trace is not None and self.swim is not None:
            raise ValueError("a framework replays a trace or a SWIM workload, not both")
        if self.swim is not None and self.swim.user >= self.swim.users:
            raise ValueError(f"swim.user must be below swim.users ({self.swim.users})")
        if self.task is not None and self.task.is_empty():
            raise ValueError("task asks for no resources")
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must come after start")
        return self

    def task_at(self, t: float) -> Resources:
        task = self.task or Resources()
        for change in sorted(self.changes, key=lambda c: c.at):
            if change.at <= t:
                task = change.task
        return task

    def sizes(self) -> list[Resources]:
        return [s for s in [self.task, *(c.task for c in self.changes)] if s is not None]


class Run(Strict):
    duration: float = Field(gt=0)
    time_scale: float = Field(default=1.0, gt=0)
    seed: int = 1
    sample_interval: float = Field(default=1.0, gt=0)


class Spec(Strict):
    name: str = "experiment"
    description: str = ""
    cluster: Cluster
    master: Master = Field(default_factory=Master)
    frameworks: list[Framework] = Field(min_length=1)
    run: Run

    @model_validator(mode="after")
    def _fits(self) -> Spec:
        names = [f.name for f in self.frameworks]
        if len(set(names)) != len(names):
            raise ValueError("framework names must be unique")
        nodes = [g.resources for g in self.cluster.slaves]
        for i, fw in enumerate(self.frameworks):
            for size in fw.sizes():
                if not any(node.contains(size) for node in nodes):
                    raise ValueError(
                        f"frameworks.{i}.task: a task of {size} fits on no slave "
                        f"(largest: {', '.join(str(n) for n in nodes)})"
                    )
        return self

    def role_weights(self) -> dict[str, float]:
        """Every role's weight, as the operator who wrote the spec configured it:
        `master.weights`, and where that says nothing of a framework's role (its `role`,
        else its name), the framework's `weight` (the first such framework's). The
        simulator, the ideal and a live master all read weights from here."""
        weights = dict(self.master.weights)
        for fw in self.frameworks:
            role = fw.role or fw.name
            if fw.weight != 1.0 and role not in weights:
                weights[role] = fw.weight
        return weights

    def setting(self) -> Setting:
        """What the spec sets up, read from it once for the stages that set it up (the
        simulator's allocator and offer cycle, the ideal's totals and pools)."""
        nodes = dict(self.cluster.nodes())
        p = self.master.preemption
        return Setting(
            nodes,
            sum(nodes.values(), Resources()),
            self.role_weights(),
            {role: q.quota() for role, q in self.master.quota.items()},
            p.config() if p is not None else PreemptionConfig(),
        )


@dataclass(frozen=True)
class Setting:
    """A spec's cluster, roles and preemption as plain values (`Spec.setting`)."""

    nodes: dict[str, Resources]  # every slave, by id, in the spec's order
    total: Resources  # theirs together
    role_weights: dict[str, float]  # `Spec.role_weights`
    quotas: dict[str, Quota]  # by role
    preemption: PreemptionConfig  # (off unless the spec turns it on)


def load_spec(path: Path) -> Spec:
    """Read and check a spec; every problem becomes a SpecError naming the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpecError(f"{path}: cannot read the spec: {e}") from None
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as e:
        raise SpecError(f"{path}: {describe_validation(e, Spec)}") from None
    # trace paths are relative to the spec's folder
    for fw in spec.frameworks:
        if fw.trace is not None and not fw.trace.is_absolute():
            fw.trace = path.parent / fw.trace
        if fw.swim is not None and not fw.swim.file.is_absolute():
            fw.swim.file = (path.parent / fw.swim.file).resolve()
            if not fw.swim.file.exists():
                raise SpecError(f"{path}: framework {fw.name}: {fw.swim.file} does not exist")
        if fw.duration and fw.duration.trace is not None and not fw.duration.trace.is_absolute():
            fw.duration.trace = path.parent / fw.duration.trace
        for p in filter(None, [fw.trace, fw.duration.trace if fw.duration else None]):
            if not p.exists():
                raise SpecError(f"{path}: framework {fw.name}: trace file {p} does not exist")
    return spec


def read_jobs(path: Path) -> list[TraceJob]:
    """A user's jobs from CSV (header: submit,tasks,cpus,mem,duration)."""
    with path.open() as f:
        return [
            TraceJob(
                submit=float(row["submit"]),
                tasks=int(row["tasks"]),
                task=Resources(cpus=float(row["cpus"]), mem=float(row["mem"])),
                duration=float(row["duration"]),
            )
            for row in csv.DictReader(f)
        ]


def read_durations(path: Path) -> list[float]:
    with path.open() as f:
        return [float(line.split(",")[0]) for line in f if line.strip() and line[0].isdigit()]
