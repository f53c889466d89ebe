"""Facebook's MapReduce workloads from SWIM (`examples/experiments/traces/swim/`) to replay.

A SWIM line is a job: its submit time and its map input, shuffle and reduce output in
bytes -- no tasks, no durations, no CPU or memory. The task model (every figure a field
of `SwimSpec`, stated in the spec and the experiments' README):

- one map task per input block (`block_mb`, 128 MB: Hadoop's default), each reading its
  share of the input at `map_mb_per_s`; a job with no input still runs one map;
- one reduce task per `shuffle_mb_per_reduce` of shuffle (1 GB), none without shuffle,
  each pulling its share at `reduce_mb_per_s`; reduces start when the job's maps are done;
- maps are CPU-heavy and reduces memory-heavy (`map_task`, `reduce_task`);
- no task shorter than `min_seconds`.

Jobs go to `users` frameworks by job number (job k to user k mod users), as the paper's
trace has users and SWIM does not.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from protocol.wire.resources import Resources

MB = 1024 * 1024


class SwimSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: Path
    users: int = Field(default=1, ge=1)
    user: int = Field(default=0, ge=0)
    start: float = Field(default=0.0, ge=0)  # seconds into the workload where the replay begins
    hours: float | None = Field(default=None, gt=0)  # how much of it (None: to the end)
    block_mb: float = Field(default=128.0, gt=0)
    map_mb_per_s: float = Field(default=8.0, gt=0)
    shuffle_mb_per_reduce: float = Field(default=1024.0, gt=0)
    reduce_mb_per_s: float = Field(default=4.0, gt=0)
    min_seconds: float = Field(default=1.0, ge=0)
    map_task: Resources = Field(default_factory=lambda: Resources(cpus=1.5, mem=1024))
    reduce_task: Resources = Field(default_factory=lambda: Resources(cpus=1, mem=4096))


class Stage(BaseModel):
    tasks: int
    task: Resources
    duration: float


class SwimJob(BaseModel):
    submit: float  # seconds from the replay's start
    maps: Stage
    reduces: Stage | None

    @property
    def tasks(self) -> int:
        return self.maps.tasks + (self.reduces.tasks if self.reduces else 0)


def read_swim(spec: SwimSpec) -> list[SwimJob]:
    """This user's jobs in the chosen window, with tasks as the model says."""
    end = spec.start + spec.hours * 3600 if spec.hours is not None else math.inf
    jobs = []
    with spec.file.open() as f:
        for k, line in enumerate(f):
            parts = line.split("\t")
            if len(parts) < 6 or k % spec.users != spec.user:
                continue
            submit = float(parts[1])
            if not spec.start <= submit < end:
                continue
            jobs.append(job_of(spec, submit - spec.start, float(parts[3]), float(parts[4])))
    return jobs


def job_of(spec: SwimSpec, submit: float, input_bytes: float, shuffle_bytes: float) -> SwimJob:
    maps = max(1, math.ceil(input_bytes / (spec.block_mb * MB)))
    map_seconds = max(spec.min_seconds, input_bytes / maps / MB / spec.map_mb_per_s)
    reduces = None
    if shuffle_bytes > 0:
        n = max(1, math.ceil(shuffle_bytes / (spec.shuffle_mb_per_reduce * MB)))
        seconds = max(spec.min_seconds, shuffle_bytes / n / MB / spec.reduce_mb_per_s)
        reduces = Stage(tasks=n, task=spec.reduce_task, duration=seconds)
    return SwimJob(
        submit=submit,
        maps=Stage(tasks=maps, task=spec.map_task, duration=map_seconds),
        reduces=reduces,
    )
