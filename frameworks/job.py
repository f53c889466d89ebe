"""One command run on the cluster and watched to its end: what `drfmesos run` does, as
Mesos's `mesos-execute`, Nomad's `job run` and Slurm's `srun` do.

A `JobScheduler` launches a job's N instances where offers allow and keeps their latest
states; `follow` copies a task's stdout or stderr from its sandbox (through the master's
files API) as it grows; `exit_code` turns the instances' ends into one status for the
shell; `run_job` ties them to a driver, says what it waits for, and on a stop kills the
tasks before tearing the framework down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from frameworks.driver import SchedulerDriver
from frameworks.errors import DriverError
from frameworks.health_spec import HealthSpec
from frameworks.ports import OfferPorts, ports_of
from frameworks.scheduler import Driver, Scheduler
from protocol.transport.aio import first_of
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    Offer,
    Reason,
    TaskFileData,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources

# What the command exits with when an instance did not exit by itself (a task that did
# passes its own code on): chosen apart from the codes commands commonly use.
FAILED_EXIT = 1  # FAILED with no exit code (killed by a signal of its own, a memory limit)
KILLED_EXIT = 137  # KILLED (by the master, a preemption, a kill): 128 + SIGKILL, as a shell
LOST_EXIT = 75  # LOST, or a finer partition state: sysexits' EX_TEMPFAIL (try again)
# ERROR, or FAILED with REASON_CONTAINER_LAUNCH_FAILED (an image the slave lacks, as Mesos
# says of a container it could not provision): it could never run, as `docker run` says
ERROR_EXIT = 125
INTERRUPTED_EXIT = 130  # the user's Ctrl-C (SIGINT): 128 + 2, as a shell; SIGTERM: 143

WAIT_NOTICE = 3.0  # seconds without all instances placed before it says it waits
WAIT_REPEAT = 10.0  # and then again this often
POLL = 0.5  # seconds between reads of a running task's output, at the least
READS = 8.0  # reads a second, about, all instances' together: each is a call to the
# master, counted against the principal's rate limit, and a kill must not queue behind them
FINAL_TRIES = 5  # failed reads after a task's end before its output is given up
CHUNK = 65536  # bytes a read asks for (the files API gives at most 1 MB)
KILL_WAIT = 15.0  # seconds a stop waits for the killed tasks' ends (a slave's grace is 3)

Stream = Literal["stdout", "stderr"]
Echo = Callable[[str], None]


@dataclass(frozen=True)
class JobSpec:
    """What to run: `command` in a shell (in `image`, if given), `instances` times."""

    name: str
    command: str
    resources: Resources
    instances: int = 1
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    health_check: HealthSpec | None = None  # each instance's (its slave runs it)
    ports: int = 0  # each instance's, out of its offer: PORT0, ... and PORTS in its env

    def task_id(self, instance: int) -> str:
        return f"{self.name}-{instance}"

    def task(self, offer: Offer, instance: int, ports: Discrete = EMPTY) -> TaskInfo:
        """Instance `instance`'s task, with `ports` of its offer; it finds its index and
        the count in its environment (as Slurm's SLURM_PROCID and Nomad's
        NOMAD_ALLOC_INDEX), and its ports (the slave's PORT0, ..., PORTS)."""
        env = {
            **self.env,
            "DRFMESOS_INSTANCE": str(instance),
            "DRFMESOS_INSTANCES": str(self.instances),
        }
        return TaskInfo(
            task_id=self.task_id(instance),
            name=self.name,
            slave_id=offer.slave_id,
            resources=self.resources,
            command=CommandInfo(value=self.command, environment=env),
            container=ContainerInfo(image=self.image) if self.image is not None else None,
            health_check=self.health_check.resolve(ports_of(ports)) if self.health_check else None,
            discrete=ports,
        )


def exit_code(statuses: Iterable[TaskStatus]) -> int:
    """The job's exit status: the highest of its instances' (as Slurm's `srun`). An
    instance that exited passes its code on; one that did not, the code of its state."""
    return max((instance_code(s) for s in statuses), default=0)


def instance_code(status: TaskStatus) -> int:
    if status.exit_code is not None:
        return status.exit_code
    if status.state == TaskState.FINISHED:
        return 0
    if status.state == TaskState.KILLED:
        return KILLED_EXIT
    if status.state == TaskState.ERROR or status.reason == Reason.CONTAINER_LAUNCH_FAILED:
        return ERROR_EXIT
    if status.state == TaskState.FAILED:
        return FAILED_EXIT
    return LOST_EXIT  # LOST, DROPPED, UNREACHABLE, GONE...: it did not end by itself


class JobScheduler(Scheduler):
    """Launches the job's instances on offers that hold one or more, then asks for no more
    offers; keeps each launched task's latest status, and an event set when it ends."""

    def __init__(self, spec: JobSpec, echo: Echo) -> None:
        self.spec = spec
        self.echo = echo
        self.waiting = list(range(spec.instances))  # instances not yet launched
        self.statuses: dict[str, TaskStatus] = {}  # launched tasks' latest
        self.ended: dict[str, asyncio.Event] = {}
        self.ran: set[str] = set()  # tasks that have had a process (output to read)
        # the end of such a task, said once its output is all read (so after its last line)
        self.ends_unsaid: dict[str, str] = {}
        self.changed = asyncio.Event()  # set on every launch, update and removal
        self.stopping = False  # no more launches
        self.subscribed = False  # (a refused subscription the driver raises: said once)

    @property
    def done(self) -> bool:
        """Every instance launched has ended, and none is left to launch."""
        return (self.stopping or not self.waiting) and all(e.is_set() for e in self.ended.values())

    def running(self) -> list[TaskStatus]:
        return [s for s in self.statuses.values() if not s.state.terminal]

    async def registered(self, driver: Driver, framework_id: str, master_id: str) -> None:
        self.subscribed = True
        driver.request_resources([(self.spec.resources, len(self.waiting))])

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            tasks, free, ports = [], offer.resources, OfferPorts(offer)
            while (
                self.waiting
                and not self.stopping
                and free.contains(self.spec.resources)
                and ports.free >= self.spec.ports
            ):
                mine = ports.take(self.spec.ports) if self.spec.ports else EMPTY
                tasks.append(self.spec.task(offer, self.waiting.pop(0), mine))
                free = free - self.spec.resources
            if not tasks:
                driver.decline_offer(offer.offer_id)
                continue
            driver.launch_tasks([offer.offer_id], tasks)
            for task in tasks:
                self.statuses[task.task_id] = TaskStatus(
                    task_id=task.task_id, state=TaskState.STAGING, slave_id=offer.slave_id
                )
                self.ended[task.task_id] = asyncio.Event()
                on = f" (ports {task.discrete.whoever('ports')})" if task.discrete else ""
                self.echo(f"launched {task.task_id} on slave {offer.slave_id}{on}")
            self.changed.set()
        if not self.waiting or self.stopping:
            driver.suppress_offers()

    async def status_update(self, driver: Driver, status: TaskStatus) -> None:
        before = self.statuses.get(status.task_id)
        if before is None or before.state.terminal:
            return  # not ours, or its end was heard already
        self.statuses[status.task_id] = status
        if status.healthy is not None and status.healthy != before.healthy:
            said = "healthy" if status.healthy else "unhealthy"
            self.echo(
                f"{status.task_id} {said}" + (f": {status.message}" if status.message else "")
            )
        if status.state in HAD_A_PROCESS:
            self.ran.add(status.task_id)
        if status.state.terminal:
            said = f": {status.message}" if status.message else ""
            line = f"{status.task_id} {status.state.value}{said}"
            if status.task_id in self.ran:
                self.ends_unsaid[status.task_id] = line
            else:
                self.echo(line)
            self.ended[status.task_id].set()
        self.changed.set()

    async def error(self, driver: Driver, message: str) -> None:
        if self.subscribed:
            self.echo(f"the master: {message}")
        self.changed.set()  # (a removal: `driver.removed` says so)

    def say_end(self, task_id: str) -> None:
        """Say a task's end, held until its output was read (once)."""
        if (line := self.ends_unsaid.pop(task_id, None)) is not None:
            self.echo(line)

    def kill_all(self, driver: SchedulerDriver) -> None:
        """Launch nothing more, and kill what runs."""
        self.stopping = True
        for status in self.running():
            driver.kill_task(status.task_id, status.slave_id)
        self.changed.set()


# states after which a task's sandbox has output to read (ERROR, LOST...: maybe none)
HAD_A_PROCESS = {TaskState.RUNNING, TaskState.FINISHED, TaskState.FAILED, TaskState.KILLED}


class Lines:
    """Writes a stream's bytes a whole line at a time, each after `prefix` (without one,
    as they come)."""

    def __init__(self, prefix: bytes, write: Callable[[bytes], None]) -> None:
        self.prefix, self.write = prefix, write
        self.partial = b""

    def feed(self, data: bytes) -> None:
        if not self.prefix:
            self.write(data)
            return
        *whole, self.partial = (self.partial + data).split(b"\n")
        if whole:
            self.write(b"".join(self.prefix + line + b"\n" for line in whole))

    def close(self) -> None:
        if self.partial:
            self.write(self.prefix + self.partial + b"\n")
            self.partial = b""


ReadFile = Callable[[str, Stream, int, int], Awaitable[TaskFileData]]


async def follow(
    read: ReadFile, task_id: str, stream: Stream, out: Lines, ended: asyncio.Event,
    echo: Echo, every: float = POLL,
) -> None:  # fmt: skip
    """Copy a task's `stream` to `out` as it grows, until the task has `ended` and all it
    wrote is read. Reads are polled, `every` seconds (the files API has no push), and
    one follows the task's end at once, so its last lines come as soon as it has ended."""
    offset, failures = 0, 0
    try:
        while True:
            final = ended.is_set()  # (asked before the read: what it reads then is all)
            try:
                got = await read(task_id, stream, offset, CHUNK)
            except DriverError as e:
                failures += 1
                if final and failures >= FINAL_TRIES:
                    echo(f"cannot read {task_id}'s {stream}: {e}")
                    return
                if final:  # (the end is heard: a pause, not at once, before trying again)
                    await asyncio.sleep(every)
                    continue
            else:
                failures = 0
                if got.data:
                    out.feed(got.data)
                    offset += len(got.data)
                if offset < got.size:
                    continue  # more is there now
                if final:
                    return
            await first_of(ended, timeout=every)
    finally:
        out.close()


@dataclass
class JobResult:
    statuses: list[TaskStatus]
    stopped: bool  # the stop came before the job ended


async def why_it_waits(driver: SchedulerDriver) -> str:
    """The master's first reason it offers nothing ("; the master says: ..."), or "" if it
    cannot say."""
    try:
        top = (await driver.why(timeout=5.0)).top
    except DriverError:
        return ""
    return f"; the master says: {top.code}: {top.message}" if top is not None else ""


async def run_job(
    driver: SchedulerDriver,
    scheduler: JobScheduler,
    stop: asyncio.Event,
    write: Callable[[Stream, bytes], None],
) -> JobResult:
    """Run the job on a started `driver` until its instances have ended or `stop` is set
    (then its tasks are killed, and their ends waited for at most KILL_WAIT seconds),
    copying their output to `write` meanwhile, and saying what it waits for while offers
    do not come. The driver is stopped after (not a failover: the framework is torn down,
    and the master kills whatever of it still runs)."""
    spec, echo = scheduler.spec, scheduler.echo
    followers: set[asyncio.Task[None]] = set()
    followed: set[str] = set()
    stopped_at: float | None = None

    async def read(task_id: str, stream: Stream, offset: int, length: int) -> TaskFileData:
        return await driver.read_file(task_id, stream, offset=offset, length=length)

    async def follow_stream(task_id: str, stream: Stream) -> None:
        instance = task_id.removeprefix(f"{spec.name}-")
        prefix = f"[{instance}] ".encode() if spec.instances > 1 else b""
        out = Lines(prefix, lambda data: write(stream, data))
        ended = scheduler.ended[task_id]
        every = max(POLL, 2 * spec.instances / READS)  # (two streams an instance)
        await follow(read, task_id, stream, out, ended, echo, every)

    async def follow_both(task_id: str) -> None:
        """Its stdout and stderr, and then its end, after its last line."""
        await asyncio.gather(follow_stream(task_id, "stdout"), follow_stream(task_id, "stderr"))
        scheduler.say_end(task_id)

    def start_following(task_id: str) -> None:
        followers.add(asyncio.create_task(follow_both(task_id), name=f"follow-{task_id}"))

    async def say_what_it_waits_for() -> None:
        began = time.monotonic()
        await asyncio.sleep(WAIT_NOTICE)
        while scheduler.waiting and not scheduler.stopping:
            n, of = len(scheduler.waiting), spec.instances
            echo(
                f"waiting for offers ({time.monotonic() - began:.0f}s): {n} of {of} "
                f"instance{'s' * (of > 1)} of {spec.resources} in role {driver.role!r}"
                f"{await why_it_waits(driver)}"
            )
            await asyncio.sleep(WAIT_REPEAT)

    notice = asyncio.create_task(say_what_it_waits_for(), name="job-waiting")
    try:
        while not scheduler.done and driver.removed is None:
            for task_id in scheduler.ran - followed:
                followed.add(task_id)
                start_following(task_id)
            if stop.is_set() and stopped_at is None:
                stopped_at = time.monotonic()
                running = len(scheduler.running())
                echo(f"stopping: killing {running} task(s)" if running else "stopping")
                scheduler.kill_all(driver)
            if stopped_at is not None and time.monotonic() - stopped_at > KILL_WAIT:
                echo("the killed tasks' ends did not come in time: tearing the framework down")
                break
            scheduler.changed.clear()
            # (once stopping, the stop is heard: only the tasks' ends are waited for)
            await first_of(scheduler.changed, *([stop] if stopped_at is None else []), timeout=POLL)
        for task_id in scheduler.ran - followed:
            start_following(task_id)
        if followers:  # (each ends once its task has, and all it wrote is read)
            await asyncio.wait(followers, timeout=None if scheduler.done else POLL * 4)
    finally:
        notice.cancel()
        for f in followers:
            f.cancel()
        await asyncio.gather(notice, *followers, return_exceptions=True)
        for task_id in list(scheduler.ends_unsaid):  # (its output not all read in time)
            scheduler.say_end(task_id)
        driver.stop()
        await driver.join()
    return JobResult(list(scheduler.statuses.values()), stopped_at is not None)
