"""`drfmesos slave`: one slave, or many logical slaves in one process (`--count`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import click

from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import broker_option, cluster_option, log_level_option, warn_if_insecure
from protocol.wire.discrete import Ranges
from protocol.wire.resources import ResourceError
from slave.task_users import DEFAULT_MAP, DEFAULT_UIDS


class SlaveGone(click.ClickException):
    """An operator marked this process's slaves gone: they may not come back, and the
    process ends (status 1) saying so."""


def slave_id_for(work_dir: Path) -> str:
    """The id kept in the work dir, made on first start: a restart is the same slave."""
    path = work_dir / "slave_id"
    if path.exists():
        return path.read_text().strip()
    work_dir.mkdir(parents=True, exist_ok=True)
    slave_id = f"slave-{uuid.uuid4().hex[:12]}"
    path.write_text(slave_id + "\n")
    return slave_id


SHUT_DOWN = threading.Event()  # SIGUSR1 came: stop, and end the tasks (a Mesos agent's)


def shut_down_on_sigusr1() -> None:
    """SIGUSR1, as a Mesos agent takes it: stop as on SIGTERM, and end the tasks too (on
    SIGTERM they run on, for the slave's next start to recover). Set before the party
    runs, so that one sent while it starts is not the signal's default (death)."""

    def handle(_signum: int, _frame: object) -> None:
        SHUT_DOWN.set()
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGUSR1, handle)


async def run_slaves(url: BrokerURL, cluster: str, configs: list[object]) -> None:
    """Run logical slaves side by side on one connection (one principal, one Last Will:
    if the process vanishes, the master removes every slave it ran)."""
    from protocol.transport.bus import Bus
    from protocol.wire.topics import Topics
    from slave.config import SlaveConfig
    from slave.fleet import Fleet

    topics = Topics(cluster)
    principal = url.username or "slave"
    first = configs[0]
    assert isinstance(first, SlaveConfig)
    bus = Bus(
        url,
        name=first.slave_id if len(configs) == 1 else f"{len(configs)}-slaves",
        client_id=f"drfmesos-{cluster}-{first.slave_id}",
        inbox=topics.outbox("slave", principal),  # where the master's refusals come
        persistent=True,
        will=(topics.gone("slave", principal), "slave", principal),
    )
    try:
        await bus.start(timeout=None)  # a slave started before its broker waits for it (and
        # says so: see protocol.transport.reconnects)
        warn_if_insecure(url, "slave")
        await bus.subscribe(topics.outbox("slave", principal), log_refusals)
        fleet = Fleet(bus, topics, principal)
        fleet.kill_tasks_on_stop = SHUT_DOWN.is_set
        slaves = [c for c in configs if isinstance(c, SlaveConfig)]
        running = asyncio.ensure_future(fleet.run(slaves))
        given_up = asyncio.ensure_future(bus.gave_up.wait())
        try:  # until stopped, or until the bus gives up (another process took its principal)
            await asyncio.wait({running, given_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            given_up.cancel()
            running.cancel()  # (the fleet stops its slaves)
            with contextlib.suppress(asyncio.CancelledError):
                await running
        if bus.refused is not None:
            raise bus.refused
        if running.done() and not running.cancelled() and fleet.gone:
            raise SlaveGone("; ".join(fleet.gone) + ": this slave shuts down")
    finally:
        await bus.close()


async def log_refusals(message: object, _reply_to: str | None) -> None:
    from protocol import logs
    from protocol.wire.messages import Error

    if isinstance(message, Error):
        logs.get("slave").warning(
            "slave.refused", message=message.message, code=message.code, about=message.about
        )


FDS_PER_SLAVE = 4  # a logical slave's two journals, a journal's sync at a time, a sandbox


def raise_fd_limit(slaves: int) -> None:
    """Many slaves hold many journals (each keeps its file open): lift the limit on open
    files to what they need. Root lifts the hard limit too (up to the kernel's
    fs.nr_open): 10,000 slaves in a process ran out of 20,000 (journal writes failed with
    EMFILE)."""
    import resource

    from protocol import logs

    need = slaves * FDS_PER_SLAVE + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return
        except (ValueError, OSError):  # not root, or past fs.nr_open
            logs.get("slave").warning(
                "slave.fd_limit",
                slaves=slaves,
                need=need,
                hard_limit=hard,
                detail=f"open files for at most {(hard - 1024) // FDS_PER_SLAVE} slaves in "
                "a process: journal writes past that fail; run more processes, or lift "
                "the hard limit (ulimit -Hn, LimitNOFILE)",
            )
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@contextlib.contextmanager
def bad_parameter(option: str) -> Iterator[None]:
    """A value of `option` that does not parse: click's usage error, naming the option."""
    try:
        yield
    except (ResourceError, ValueError) as e:
        raise click.BadParameter(str(e), param_hint=option) from None


@click.command()
@broker_option()
@cluster_option
@click.option(
    "--resources",
    default=None,
    help="What this slave offers, in Mesos's form: scalars, [ranges] and {sets}, e.g. "
    "'cpus:2;mem:2200;disk:1000;ports:[8000-8999]'. Default: the machine's cores and "
    "memory less a reserve; ports:[31000-32000] unless this names ports (ports:[] for none).",
)
@click.option(
    "--custom-resources",
    default="",
    help="Resource names besides cpus, mem, disk and gpus that --resources may offer, "
    "e.g. 'fpgas,licences' (as Mesos allows custom resources); any other is refused.",
)
@click.option("--attributes", default="", help="e.g. 'rack:a;zone:1'.")
@click.option(
    "--work-dir",
    type=click.Path(path_type=Path),
    default=Path("./drfmesos-slave"),
    show_default=True,
    help="Keeps the slave id, sandboxes and owed updates.",
)
@click.option("--hostname", default=None, help="Default: this machine's hostname.")
@click.option(
    "--count",
    type=click.IntRange(1, 100_000),
    default=1,
    show_default=True,
    help="Run this many logical slaves (each its own id and resources).",
)
@click.option(
    "--simulated-tasks",
    is_flag=True,
    help="Run tasks as in-process sleeps (data {'duration': s} or 'sleep N').",
)
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply simulated task durations by this.",
)
@click.option(
    "--kill-grace",
    type=float,
    default=3.0,
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when a task is killed (a task's kill "
    "policy, or the kill's, says otherwise).",
)
@click.option(
    "--max-kill-grace",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="The longest grace a task's or a kill's kill policy gets here: a tenant's task "
    "holds its resources no longer after a kill (a preemption's included).",
)
@click.option(
    "--isolation",
    type=click.Choice(["auto", "cgroups", "posix"]),
    default="auto",
    show_default=True,
    help="How tasks are held to their resources: cgroups (kernel limits and accounting) "
    "or posix (RSS polling only). auto: cgroups where the hierarchy is writable.",
)
@click.option(
    "--cgroups-root",
    type=click.Path(path_type=Path),
    default=Path("/sys/fs/cgroup"),
    show_default=True,
    help="Where the cgroup hierarchies (v1) or the unified hierarchy (v2) are mounted.",
)
@click.option(
    "--cgroups-enable-cfs",
    is_flag=True,
    help="Cap each task's CPU at its cpus (CFS quota), not only weight it.",
)
@click.option(
    "--max-task-pids",
    type=click.IntRange(0),
    default=None,
    help="At most this many processes and threads per task (cgroups pids controller), "
    "and no bound on a principal's tasks together; 0: no bound. By default each task's "
    "bound is its dominant share of the slave, of 3/8 of the host's pid_max, and each "
    "principal's tasks together are held to their shares summed (so that no tenant's "
    "tasks can take every pid, however many and small).",
)
@click.option(
    "--usage-interval",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between reports of the tasks' usage to the master.",
)
@click.option(
    "--registration-backoff-factor",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds: wait a random time up to this before (re-)registering, and back off on "
    "retries (Mesos's --registration_backoff_factor). Raise it with the slave count: N "
    "slaves reach a master at about N / factor a second after its start or a failover.",
)
@click.option(
    "--podman",
    default="podman",
    show_default=True,
    help="The podman that runs container images (without it such tasks are refused).",
)
@click.option(
    "--switch-user/--no-switch-user",
    default=True,
    show_default=True,
    help="Run each task and executor as its principal's user (needs root; Mesos's "
    "--switch_user): a uid of its own from --task-uids, or the one --task-users names.",
)
@click.option(
    "--pid-namespace/--no-pid-namespace",
    default=True,
    show_default=True,
    help="Run each task and executor in a PID namespace of its own, with its own /proc "
    "(needs root): it sees and signals only its own processes.",
)
@click.option(
    "--setuid-programs/--no-setuid-programs",
    default=False,
    show_default=True,
    help="Let tasks that run as their principal's user gain privileges through setuid "
    "programs and file capabilities (sudo, su, ping). Off: each task runs with the "
    "kernel's no_new_privs, so a setuid program runs with the task's own privileges.",
)
@click.option(
    "--ports-isolation/--no-ports-isolation",
    default=None,
    help="Kill a task that listens on a port of this slave's ports range it was not "
    "given (Mesos's network/ports isolator), looking every 5 s. Default: on where tasks "
    "are isolated (--switch-user or --pid-namespace).",
)
@click.option(
    "--ports-held",
    default=None,
    metavar="RANGES",
    help="The ports its tasks are held to, e.g. '[31000-31899]': where several slaves on "
    "one host offer ranges of their own, the host's, so that a task of one may not bind "
    "another's. Default: this slave's own ports.",
)
@click.option(
    "--container-disk-watch-interval",
    type=click.FloatRange(min=0),
    default=15.0,
    show_default=True,
    help="Seconds between looks at what each command task's sandbox holds on disk, its "
    "/tmp included (Mesos's disk/du isolator's --container_disk_watch_interval); 0: "
    "never look.",
)
@click.option(
    "--enforce-container-disk-quota/--no-enforce-container-disk-quota",
    default=True,
    show_default=True,
    help="Kill a task whose sandbox holds more than its disk (TASK_FAILED, "
    "REASON_CONTAINER_LIMITATION_DISK), as Mesos's --enforce_container_disk_quota, which "
    "is off there: on here, so that no tenant's task fills the slave's disk for the others. "
    "A task with no disk is not held.",
)
@click.option(
    "--task-uids",
    default=f"{DEFAULT_UIDS.start}-{DEFAULT_UIDS.stop - 1}",
    show_default=True,
    help="The uids principals' tasks get, one each (no account may use them).",
)
@click.option(
    "--task-uid-map",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_MAP,
    show_default=True,
    help="The machine's map of principals to uids, shared (under a lock) by every slave "
    "on this host: keep it one file for them all.",
)
@click.option(
    "--task-users",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="YAML: 'users: {PRINCIPAL: ACCOUNT | UID | UID:GID}', the user a principal's "
    "tasks run as instead of a uid of --task-uids.",
)
@click.option(
    "--task-env",
    multiple=True,
    metavar="NAME[=VALUE]",
    help="Pass this variable to every task and executor (NAME: the slave's own value). "
    "Nothing else of the slave's environment reaches them (Mesos's "
    "--executor_environment_variables).",
)
@click.option(
    "--executor-secret-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file with the key (32 bytes at least) that signs executors' tokens "
    "(MESOS_EXECUTOR_AUTHENTICATION_TOKEN; Mesos's --executor_secret_key). Default: a key "
    "the slave makes once in its work dir, readable by it alone.",
)
@click.option(
    "--executor-registration-timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds a custom executor has to register before it is killed and its tasks "
    "fail (REASON_EXECUTOR_REGISTRATION_TIMEOUT; Mesos's --executor_registration_timeout); "
    "0: no bound.",
)
@click.option(
    "--gc-delay",
    type=click.FloatRange(min=0),
    default=7 * 24 * 3600.0,
    show_default=True,
    help="Seconds an ended task's or executor's sandbox is kept, the disk empty (a week; "
    "Mesos's --gc_delay): less as the disk fills (--gc-disk-headroom). A live task's or "
    "executor's is never removed, nor are persistent volumes.",
)
@click.option(
    "--disk-watch-interval",
    type=click.FloatRange(min=0.01),
    default=60.0,
    show_default=True,
    help="Seconds between looks at the work dir's disk and its sandboxes (Mesos's "
    "--disk_watch_interval).",
)
@click.option(
    "--gc-disk-headroom",
    type=click.FloatRange(0, 1),
    default=0.1,
    show_default=True,
    help="An ended sandbox is kept --gc-delay x max(0, 1 - this - the disk's used "
    "fraction): at a disk (1 - this) full, every ended sandbox goes (Mesos's "
    "--gc_disk_headroom).",
)
@log_level_option
def slave(
    broker: str,
    cluster: str,
    resources: str | None,
    custom_resources: str,
    attributes: str,
    work_dir: Path,
    hostname: str | None,
    count: int,
    simulated_tasks: bool,
    time_scale: float,
    kill_grace: float,
    max_kill_grace: float,
    isolation: str,
    cgroups_root: Path,
    cgroups_enable_cfs: bool,
    max_task_pids: int | None,
    usage_interval: float,
    registration_backoff_factor: float,
    podman: str,
    switch_user: bool,
    pid_namespace: bool,
    setuid_programs: bool,
    ports_isolation: bool | None,
    ports_held: str | None,
    container_disk_watch_interval: float,
    enforce_container_disk_quota: bool,
    task_uids: str,
    task_uid_map: Path,
    task_users: Path | None,
    task_env: tuple[str, ...],
    executor_secret_key: Path | None,
    executor_registration_timeout: float,
    gc_delay: float,
    disk_watch_interval: float,
    gc_disk_headroom: float,
) -> None:
    """Run a slave: register with the master, run tasks, report their status."""
    from protocol.tooling.cli import run_party
    from slave.config import SlaveConfig
    from slave.probe import parse_attributes, slave_resources
    from slave.task_env import parse_task_env
    from slave.task_users import load_operator_users, parse_uid_range

    with bad_parameter("--resources"):
        offered, values = slave_resources(resources)
    with bad_parameter("--attributes"):
        attrs = parse_attributes(attributes)
    with bad_parameter("--task-uids"):
        uids = parse_uid_range(task_uids)
    with bad_parameter("--task-users"):
        users = load_operator_users(task_users, uids) if task_users else {}
    with bad_parameter("--task-env"):
        env = parse_task_env(task_env)
    try:
        offered.check_names(n.strip() for n in custom_resources.split(",") if n.strip())
    except ResourceError as e:
        raise click.BadParameter(
            f"{e} (a custom resource: --custom-resources)", param_hint="--resources"
        ) from None
    host = hostname or socket.gethostname()
    if count > 1:
        raise_fd_limit(count)
    if isolation == "cgroups" and not simulated_tasks:
        from slave.cgroups import detect

        if isinstance(why := detect(cgroups_root), str):
            raise click.BadParameter(
                f"cgroups are not usable here: {why}", param_hint="--isolation"
            )

    async def party(url: BrokerURL) -> None:
        configs: list[object] = []
        for i in range(count):
            wd = work_dir if count == 1 else work_dir / f"slave-{i:05d}"
            configs.append(
                SlaveConfig(
                    slave_id=slave_id_for(wd),
                    hostname=host if count == 1 else f"{host}-{i}",
                    resources=offered,
                    discrete=values,
                    work_dir=wd,
                    attributes=attrs,
                    simulated_tasks=simulated_tasks,
                    time_scale=time_scale,
                    kill_grace=kill_grace,
                    max_kill_grace=max_kill_grace,
                    cluster=cluster,
                    isolation=isolation,
                    cgroups_root=cgroups_root,
                    cgroups_enable_cfs=cgroups_enable_cfs,
                    max_task_pids=max_task_pids,
                    usage_interval=usage_interval,
                    registration_backoff_factor=registration_backoff_factor,
                    in_fleet=True,
                    podman=podman,
                    switch_user=switch_user,
                    pid_namespace=pid_namespace,
                    setuid_programs=setuid_programs,
                    ports_isolation=ports_isolation,
                    ports_held=_ranges(ports_held),
                    container_disk_watch_interval=container_disk_watch_interval,
                    enforce_disk_quota=enforce_container_disk_quota,
                    task_uids=uids,
                    task_uid_map=task_uid_map,
                    task_users=users,
                    task_env=env,
                    executor_secret_key=executor_secret_key,
                    executor_registration_timeout=executor_registration_timeout,
                    gc_delay=gc_delay,
                    disk_watch_interval=disk_watch_interval,
                    gc_disk_headroom=gc_disk_headroom,
                )
            )
        await run_slaves(url, cluster, configs)

    shut_down_on_sigusr1()
    run_party(broker, party)


def _ranges(text: str | None) -> Ranges | None:
    """--ports-held's ranges (a usage error if they do not parse)."""
    if text is None:
        return None
    try:
        return Ranges.parse(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--ports-held") from None
