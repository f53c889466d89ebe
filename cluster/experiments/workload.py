"""What one framework of an experiment wants to run, and when.

The same object drives a framework in the simulator and in a live experiment, so both
follow the spec in exactly the same way. Time is spec time, in seconds from the start
of the run.

Demand comes in one of three shapes:
- endless: there is always one more task of the current size (the blog's frameworks);
- jobs: `concurrent` jobs of `tasks` tasks; a finished job is replaced by a new one
  (the paper's §7.2 users);
- a trace: jobs submitted at given times, each with its own task size and duration.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cluster.experiments.spec import Framework, read_durations, read_jobs
from cluster.experiments.swim import Stage, SwimJob, read_swim
from protocol.wire.resources import Resources, holds


@dataclass(slots=True, frozen=True)
class Pending:  # (frozen: the tasks of a stage share one)
    submit: float
    resources: Resources
    duration: float
    job: int | None = None


@dataclass(slots=True)
class Waiting:
    """`count` tasks like `task`, waiting their turn (a stage's tasks are one entry)."""

    task: Pending
    count: int


@dataclass
class Job:
    job_id: int
    submit: float
    left: int  # tasks of the current stage not finished yet
    after: Stage | None = None  # the stage that starts when this one is done (reduces)
    size: int = 0  # tasks in all stages


@dataclass
class WorkloadStats:
    tasks_launched: int = 0
    tasks_completed: int = 0
    waits: list[float] = field(default_factory=list)
    job_times: list[float] = field(default_factory=list)
    job_sizes: list[int] = field(default_factory=list)  # tasks, beside each job time


class Workload:
    def __init__(self, spec: Framework, seed: int) -> None:
        self.spec = spec
        # (read from the spec once: asked once per offer and per task ending)
        self._start = spec.start
        self._stop = spec.stop if spec.stop is not None else math.inf
        self._max_running = spec.max_running
        self.rng = random.Random(f"{seed}/{spec.name}")
        # what waits to run, in order: tasks of one stage are one entry with a count (a
        # trace job of thousands of maps is one entry, not thousands)
        self.queue: deque[Waiting] = deque()
        self.queued = 0  # tasks waiting, over all entries
        self.jobs: dict[int, Job] = {}
        self.job_ids = itertools.count()
        self.running = 0
        self.stats = WorkloadStats()
        self._durations = (
            itertools.cycle(read_durations(spec.duration.trace))
            if spec.duration is not None and spec.duration.trace is not None
            else None
        )
        jobs: list[SwimJob] = []
        if spec.trace is not None:
            jobs = [
                SwimJob(submit=j.submit, maps=Stage(tasks=j.tasks, task=j.task,
                                                    duration=j.duration), reduces=None)
                for j in read_jobs(spec.trace)
            ]  # fmt: skip
        elif spec.swim is not None:
            jobs = read_swim(spec.swim)
        self._trace: deque[SwimJob] = deque(sorted(jobs, key=lambda j: j.submit))
        self._endless_since: float | None = None
        self._head: Pending | None = None  # the next endless task, once looked at
        self._started = False

    # -- time --------------------------------------------------------------------------------
    def active(self, t: float) -> bool:
        return self._start <= t < self._stop

    def next_arrival(self) -> float | None:
        """When the next trace job comes (so a simulator can wake up for it)."""
        return self._trace[0].submit if self._trace else None

    def advance(self, t: float) -> None:
        """Bring the demand up to time t (submit what has arrived)."""
        if not self.active(t):
            return
        if not self._started:
            self._started = True
            if self.spec.jobs is not None:
                for _ in range(self.spec.jobs.concurrent):
                    self._submit_job(max(t, self.spec.start))
            elif self.spec.trace is None and self.spec.swim is None:
                self._endless_since = max(t, self.spec.start)
        while self._trace and self._trace[0].submit <= t:
            job = self._trace.popleft()
            if job.submit >= self.spec.start:
                self._submit_trace_job(job)

    def wants(self, t: float) -> bool:
        if not self.active(t):
            return False
        if not self._started or (self._trace and self._trace[0].submit <= t):
            self.advance(t)  # (only when something is due: this is asked once per offer)
        most = self._max_running
        if most is not None and self.running >= most:
            return False
        return bool(self.queue) or self._endless_since is not None

    def demand(self, t: float, endless: int = 1_000_000) -> list[tuple[Resources, int]]:
        """What it still wants at t, as task sizes with counts (what a framework declares
        with `request_resources`); endless demand counts as `endless` tasks."""
        if not self.wants(t):
            return []
        room = None
        if self.spec.max_running is not None:
            room = self.spec.max_running - self.running
        counts: dict[Resources, int] = {}
        size, n = None, 0  # (a run of one size counted, then summed: the usual queue is
        for waiting in self.queue:  # a few runs, and a size hashes each time it is summed)
            if waiting.task.resources is not size:
                if size is not None:
                    counts[size] = counts.get(size, 0) + n
                size, n = waiting.task.resources, 0
            n += waiting.count
        if size is not None:
            counts[size] = counts.get(size, 0) + n
        if not self.queue and self._endless_since is not None:
            counts[self.spec.task_at(t)] = endless
        out = []
        for resources, n in counts.items():
            n = n if room is None else min(n, room)
            if n > 0:
                out.append((resources, n))
        return out

    # -- taking tasks for an offer --------------------------------------------------------------
    def take(
        self,
        t: float,
        offered: Resources,
        booked: Callable[[Resources], Resources] | None = None,
    ) -> list[Pending]:
        """The tasks to launch on an offer: one, or as many as fit (`tasks_per_offer`),
        in the order they were submitted (the first that does not fit ends the offer).

        `booked` says what the scheduler accounts for a task (it differs from the task's
        real resources under slot-based or CPU-only sharing); by default its resources.
        """
        return self.take_from(t, dict(offered.millis), booked)

    def take_from(
        self,
        t: float,
        left: dict[str, int],
        booked: Callable[[Resources], Resources] | None = None,
    ) -> list[Pending]:
        """`take`, on an offer's fixed-point amounts, which are left holding what the
        tasks did not use (the simulator's hot path: it declines that remainder)."""
        taken: list[Pending] = []
        if not self.wants(t):
            return taken
        most = self.spec.max_running
        one = self.spec.tasks_per_offer == "1"
        while True:
            task = self.next_task(t)
            need = (booked(task.resources) if booked is not None else task.resources).millis
            if not holds(left, need):
                break
            for k, v in need.items():
                left[k] -= v
            taken.append(self._pop(t))
            self.running += 1
            self.stats.tasks_launched += 1
            self.stats.waits.append(t - task.submit)
            # (what wants(t) would say now: t has not moved)
            if one or (most is not None and self.running >= most):
                break
            if not self.queue and self._endless_since is None:
                break
        return taken

    def need(
        self, t: float, booked: Callable[[Resources], Resources] | None = None
    ) -> Mapping[str, int] | None:
        """What an offer must hold for `take_from` to launch anything on it now: its next
        task (as `booked` accounts it); None if it wants nothing. The same calls on the
        workload as `take_from`'s, which would make them next; until it launches, the
        answer stands at `t` (a simulated round asks it once a framework)."""
        if not self.wants(t):
            return None
        task = self.next_task(t)
        return (booked(task.resources) if booked is not None else task.resources).millis

    def next_task(self, t: float) -> Pending:
        """The next task an offer would launch (ask only while it `wants(t)`); under
        endless demand, made once and kept until it is taken (so the task looked at is
        the one launched, its duration drawn once)."""
        if self.queue:
            return self.queue[0].task
        assert self._endless_since is not None
        size = self.spec.task_at(t)
        if self._head is None or self._head.resources != size:  # new, or the size changed
            self._head = Pending(self._endless_since, size, self._duration(t))
        return self._head

    def _pop(self, t: float) -> Pending:
        if self.queue:
            head = self.queue[0]
            head.count -= 1
            if not head.count:
                self.queue.popleft()
            self.queued -= 1
            return head.task
        task = self.next_task(t)
        self._head = None
        self._endless_since = t
        return task

    def finished(
        self, t: float, task: Pending, *, completed: bool = True, retry: bool = False
    ) -> None:
        """A task ended. One that did not complete is run again if `retry` (a preempted
        task of a job: the job still needs it); endless demand needs no retry."""
        self.running -= 1
        if not completed:
            job = self.jobs.get(task.job) if task.job is not None else None
            if retry and job is not None and self.active(t):
                self.queue.appendleft(Waiting(task, 1))
                self.queued += 1
            return
        self.stats.tasks_completed += 1
        if task.job is not None and (job := self.jobs.get(task.job)) is not None:
            job.left -= 1
            if job.left == 0 and job.after is not None:  # the next stage (reduces) begins
                stage, job.after = job.after, None
                job.left = stage.tasks
                self._enqueue(Pending(t, stage.task, stage.duration, job.job_id), stage.tasks)
            elif job.left == 0:
                del self.jobs[task.job]
                self.stats.job_times.append(t - job.submit)
                self.stats.job_sizes.append(job.size)
                if self.spec.jobs is not None and self.active(t):
                    self._submit_job(t)

    # -- submitting ---------------------------------------------------------------------------
    def _duration(self, t: float) -> float:
        d = self.spec.duration
        assert d is not None
        if d.fixed is not None:
            return d.fixed
        if d.uniform is not None:
            return self.rng.uniform(*d.uniform)
        assert self._durations is not None
        return next(self._durations)

    def _submit_job(self, t: float) -> None:
        assert self.spec.jobs is not None
        job = Job(next(self.job_ids), t, self.spec.jobs.tasks, size=self.spec.jobs.tasks)
        self.jobs[job.job_id] = job
        for _ in range(job.left):  # (each its own duration)
            self._enqueue(Pending(t, self.spec.task_at(t), self._duration(t), job.job_id), 1)

    def _submit_trace_job(self, trace: SwimJob) -> None:
        maps = trace.maps
        job = Job(next(self.job_ids), trace.submit, maps.tasks, trace.reduces, trace.tasks)
        self.jobs[job.job_id] = job
        self._enqueue(Pending(trace.submit, maps.task, maps.duration, job.job_id), maps.tasks)

    def _enqueue(self, task: Pending, n: int) -> None:
        """`n` tasks like `task` wait at the end of the queue (one shared Pending: nothing
        changes a task once submitted)."""
        if n > 0:
            self.queue.append(Waiting(task, n))
            self.queued += n
