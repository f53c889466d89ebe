"""`drfmesos run`: run one command on the cluster, watch it, exit with its status."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys

import click

from frameworks.cli import default_role, refused
from frameworks.driver import SchedulerDriver
from frameworks.errors import DriverError, SubscribeRefused
from frameworks.health_spec import FORMS, HealthSpecError, parse_health_spec
from frameworks.job import (
    ERROR_EXIT,
    FAILED_EXIT,
    KILLED_EXIT,
    LOST_EXIT,
    JobResult,
    JobScheduler,
    JobSpec,
    Stream,
    exit_code,
    run_job,
)
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import (
    broker_option,
    broker_url,
    cluster_option,
    log_level_default,
    warn_if_insecure,
)
from protocol.wire.ids import id_problem, image_problem
from protocol.wire.messages import HealthCheckType
from protocol.wire.resources import Resources


def parse_env(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    env = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}")
        env[name] = value
    return env


def check_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    problem = id_problem(f"{value}-0", "the name")
    if problem:
        raise click.BadParameter(problem)
    return value


@click.command(
    "run",
    context_settings={"allow_interspersed_args": False},  # COMMAND's own options are its
    epilog="Exit status: the highest of the instances' (as Slurm's srun). An instance "
    "that exited passes its own code on; one that did not: FAILED (killed by a signal of "
    f"its own, over its memory) {FAILED_EXIT}, KILLED {KILLED_EXIT}, LOST {LOST_EXIT}, "
    f"ERROR (it could not run: an image the slave lacks) {ERROR_EXIT}. Stopped by Ctrl-C: "
    "130 (SIGTERM: 143).",
)
@broker_option()
@cluster_option
@click.option(
    "--cpus",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="Each instance's cpus.",
)
@click.option(
    "--mem",
    type=click.FloatRange(0, min_open=True),
    default=128.0,
    show_default=True,
    help="Each instance's memory, in MB.",
)
@click.option(
    "--role",
    default=None,
    help="The role to run in (default: the principal's name, its role unless the operator "
    "gave it others; without credentials, --name).",
)
@click.option(
    "--instances",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Run COMMAND this many times at once (output lines prefixed [0], [1], ...).",
)
@click.option(
    "--ports",
    type=click.IntRange(0, 64),
    default=0,
    show_default=True,
    help="Ports each instance listens on, out of its offer: given to it as PORT0, PORT1, "
    "... and PORTS (comma-separated), and said here as it launches.",
)
@click.option(
    "--env",
    multiple=True,
    metavar="NAME=VALUE",
    callback=parse_env,
    help="A variable for the command (repeatable).",
)
@click.option(
    "--image",
    default=None,
    help="Run COMMAND in this container image (one the slave holds: nothing is pulled).",
)
@click.option(
    "--name",
    default="run",
    show_default=True,
    callback=check_name,
    help="The framework's name; its tasks are NAME-0, NAME-1, ...",
)
@click.option(
    "--health-check",
    "health",
    default=None,
    metavar="CHECK",
    help=f"Check each instance's health as its slave runs it: {FORMS} (e.g. "
    "'http:8080/healthz', 'http:$PORT0/healthz' with --ports 1, 'cmd:test -f ready'). "
    "Changes are said here; an instance unhealthy --health-failures times in a row is killed.",
)
@click.option(
    "--health-delay", type=click.FloatRange(0), default=15.0, show_default=True,
    help="Seconds before the first check.",
)  # fmt: skip
@click.option(
    "--health-interval", type=click.FloatRange(1), default=10.0, show_default=True,
    help="Seconds between checks.",
)  # fmt: skip
@click.option(
    "--health-timeout", type=click.FloatRange(0, min_open=True), default=20.0,
    show_default=True, help="Seconds a check may take.",
)  # fmt: skip
@click.option(
    "--health-grace", type=click.FloatRange(0), default=10.0, show_default=True,
    help="Seconds from the start in which failures do not count.",
)  # fmt: skip
@click.option(
    "--health-failures", type=click.IntRange(1, 1000), default=3, show_default=True,
    help="Failures in a row that kill the instance.",
)  # fmt: skip
@log_level_default("warning")
@click.argument("command", nargs=-1, required=True)
def run(
    broker: str,
    cluster: str,
    cpus: float,
    mem: float,
    role: str | None,
    instances: int,
    ports: int,
    env: dict[str, str],
    image: str | None,
    name: str,
    health: str | None,
    health_delay: float,
    health_interval: float,
    health_timeout: float,
    health_grace: float,
    health_failures: int,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND on the cluster, stream its output here, and exit with its exit status.

    `drfmesos run -- sh -c 'echo hi; exit 3'` prints hi and exits 3. COMMAND is a program
    and its arguments (write `sh -c '...'` for a shell line). It registers as a framework
    of your principal, waits for an offer that holds --cpus and --mem (and says so while
    none comes), launches --instances tasks, and copies their stdout and stderr to yours.
    Ctrl-C kills its tasks and tears the framework down. With --health-check, each
    instance's slave checks it (after --health-delay, every --health-interval) and a
    change of its health is said here.
    """
    if image is not None and (problem := image_problem(image)):
        raise click.BadParameter(problem, param_hint="--image")
    check = None
    if health is not None:
        try:
            check = parse_health_spec(
                health,
                delay_seconds=health_delay,
                interval_seconds=health_interval,
                timeout_seconds=health_timeout,
                grace_period_seconds=health_grace,
                consecutive_failures=health_failures,
            )
        except HealthSpecError as e:
            raise click.BadParameter(str(e), param_hint="--health-check") from None
        if check.ports_needed > ports:
            raise click.BadParameter(
                f"{health!r} names $PORT{check.ports_needed - 1}, but --ports {ports} "
                f"gives each instance {ports} port{'s' if ports != 1 else ''}",
                param_hint="--health-check",
            )
        if check.check.type == HealthCheckType.COMMAND and image is not None:
            raise click.BadParameter(
                "a cmd: check is not run in a container image", param_hint="--health-check"
            )
    spec = JobSpec(
        name=name,
        command=shlex.join(command),
        resources=Resources(cpus=cpus, mem=mem),
        instances=instances,
        env=env,
        image=image,
        health_check=check,
        ports=ports,
    )
    url = broker_url(broker)
    signalled: list[int] = []
    try:
        result = asyncio.run(submit(spec, url, cluster, role, signalled))
    except SubscribeRefused as e:
        raise refused(e, role) from None
    except DriverError as e:  # the broker's refusal, no broker or no master
        raise click.ClickException(str(e)) from None
    if signalled:
        raise SystemExit(128 + signalled[0])
    if result is not None:
        raise SystemExit(exit_code(result.statuses))


async def submit(
    spec: JobSpec, url: BrokerURL, cluster: str, role: str | None, signalled: list[int]
) -> JobResult | None:
    """Register, run the job and tear down; SIGINT or SIGTERM (kept in `signalled`) stops
    it at any point. None: stopped before the framework was registered."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        signalled.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)

    def echo(line: str) -> None:
        click.echo(f"drfmesos run: {line}", err=True)

    def write(stream: Stream, data: bytes) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        try:
            out.buffer.write(data)
            out.flush()
        except BrokenPipeError:  # (`drfmesos run ... | head`: its reader has gone)
            stop.set()

    scheduler = JobScheduler(spec, echo)
    driver = SchedulerDriver(
        scheduler,
        name=spec.name,
        broker=url,
        cluster=cluster,
        role=default_role(role, url, spec.name),
        min_offer=[spec.resources],
    )
    warn_if_insecure(url, "framework")
    starting = asyncio.create_task(driver.start())
    signal_first = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, signal_first}, return_when=asyncio.FIRST_COMPLETED)
    signal_first.cancel()
    if not starting.done():  # stopped while it connected or subscribed
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        driver.stop()
        await driver.join()
        return None
    starting.result()  # (the refusal, if it was one)
    result = await run_job(driver, scheduler, stop, write)
    if driver.removed is not None:
        raise click.ClickException(driver.removed)
    return result
