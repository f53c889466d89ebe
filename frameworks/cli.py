"""`drfmesos framework NAME ...`: the sample frameworks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from frameworks.errors import DriverError, RoleRefused, SubscribeRefused
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import broker_option, cluster_option, log_level_option, warn_if_insecure
from protocol.wire.resources import Resources


@click.group()
def framework() -> None:
    """Run a sample framework."""


executor_option = click.option(
    "--executor",
    type=click.Choice(["custom", "command"]),
    default="custom",
    show_default=True,
    help="The blog's custom executor that sleeps, or plain `sleep N` command tasks.",
)


def parse_range(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition("-")
    try:
        a, b = float(lo), float(hi) if sep else float(lo)
    except ValueError:
        raise click.BadParameter(f"expected seconds or lo-hi, got {text!r}") from None
    if a < 0 or b < a:
        raise click.BadParameter(f"expected 0 <= lo <= hi, got {text!r}")
    return a, b


F = TypeVar("F", bound=Callable[..., Any])


def default_role(role: str | None, url: BrokerURL, name: str) -> str:
    """--role, else the role named as the principal (what `drfmesos auth add` allows by default),
    else, without authentication, the framework's name."""
    return role or url.username or name


def refused(e: SubscribeRefused, role: str | None) -> click.ClickException:
    """The master's refusal of the framework, as the command's error. A role the caller
    did not name (`role` None: `default_role`'s) says to name one: an operator who gave
    the principal roles of its own (`drfmesos auth add --roles`) did not give it its name."""
    said = f"the master refused the framework: {e}"
    if isinstance(e, RoleRefused) and role is None:
        said += "; no --role was given, and the default is not one of them: give one with --role"
    return click.ClickException(said)


async def run_driver(driver: Any, role: str | None) -> None:
    """Run a driver; the master's refusal or removal ends the command with its reason.
    `role`: the --role given (None: the default one)."""
    warn_if_insecure(driver.broker, "framework")
    try:
        await driver.run()
    except SubscribeRefused as e:
        raise refused(e, role) from None
    except DriverError as e:  # the broker's refusal, no broker or no master
        raise click.ClickException(str(e)) from None
    if driver.removed:
        raise click.ClickException(driver.removed)


def common_framework_options(func: F) -> F:
    for option in reversed(
        [
            broker_option(),
            cluster_option,
            click.option("--name", required=True, help="The framework's name."),
            click.option(
                "--role",
                default=None,
                help="Its role (default: the principal's name, its role unless the "
                "operator gave it others; without credentials, the framework's name).",
            ),
            click.option(
                "--failover-timeout",
                type=float,
                default=0.0,
                show_default=True,
                help="Seconds the master keeps its tasks if it disconnects.",
            ),
            log_level_option,
        ]
    ):
        func = option(func)
    return func


@framework.command("drf-demo")
@common_framework_options
@click.option("--task-cpus", type=float, default=0.5, show_default=True, help="Each task's cpus.")
@click.option("--task-mem", type=float, default=512, show_default=True, help="MB.")
@click.option(
    "--task-duration",
    default="20-40",
    show_default=True,
    help="Seconds each task sleeps: N, or lo-hi for uniform.",
)
@click.option(
    "--tasks-per-offer",
    type=click.Choice(["1", "fill"]),
    default="1",
    show_default=True,
    help="One task per offer (the blog's text) or fill it.",
)
@click.option(
    "--max-tasks", type=click.IntRange(1), default=None, help="Stop after this many tasks have run."
)
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="Multiply task durations and decline filters by this.",
)
@executor_option
@click.option("--seed", type=int, default=None, help="Task durations drawn from this seed.")
@click.option(
    "--min-offer",
    is_flag=True,
    help="Ask to be offered only slaves with room for a task (offer_filters); the blog's "
    "framework did not, and declined what it could not use.",
)
def drf_demo(
    broker: str,
    cluster: str,
    name: str,
    role: str | None,
    failover_timeout: float,
    task_cpus: float,
    task_mem: float,
    task_duration: str,
    tasks_per_offer: str,
    max_tasks: int | None,
    time_scale: float,
    executor: str,
    seed: int | None,
    min_offer: bool,
) -> None:
    """The blog's framework: fixed-size tasks that sleep, one per offer."""
    from frameworks.driver import SchedulerDriver
    from frameworks.samples.drf_demo import DemoConfig, DRFDemoScheduler
    from protocol.tooling.cli import run_party

    config = DemoConfig(
        name=name,
        task_cpus=task_cpus,
        task_mem=task_mem,
        duration=parse_range(task_duration),
        tasks_per_offer=tasks_per_offer,
        max_tasks=max_tasks,
        time_scale=time_scale,
        executor=executor,
        seed=seed,
    )

    async def party(url: BrokerURL) -> None:
        driver = SchedulerDriver(
            DRFDemoScheduler(config),
            name=name,
            broker=url,
            cluster=cluster,
            role=default_role(role, url, name),
            failover_timeout=failover_timeout,
            min_offer=[config.task] if min_offer else [],
        )
        await run_driver(driver, role)

    run_party(broker, party)


@framework.command("command")
@common_framework_options
@click.option("--cmd", "command", required=True, help="The shell command each task runs.")
@click.option("--count", type=click.IntRange(1), default=1, show_default=True, help="Tasks to run.")
@click.option(
    "--resources", default="cpus:0.1;mem:32", show_default=True, help="Each task's resources."
)
def command_framework(
    broker: str,
    cluster: str,
    name: str,
    role: str | None,
    failover_timeout: float,
    command: str,
    count: int,
    resources: str,
) -> None:
    """Run a shell command COUNT times and print each task's result."""
    from frameworks.driver import SchedulerDriver
    from frameworks.samples.command import CommandScheduler
    from protocol.tooling.cli import run_party

    scheduler = CommandScheduler(name, command, count, Resources.parse(resources), echo=click.echo)

    async def party(url: BrokerURL) -> None:
        driver = SchedulerDriver(
            scheduler,
            name=name,
            broker=url,
            cluster=cluster,
            role=default_role(role, url, name),
            failover_timeout=failover_timeout,
            min_offer=[scheduler.resources],
        )
        await run_driver(driver, role)

    run_party(broker, party)
    if not scheduler.ok:
        raise SystemExit(1)


@framework.command("journaled")
@common_framework_options
@click.option(
    "--journal",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The file it journals its launches and updates to, and recovers from.",
)
@click.option(
    "--witness-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Where each task marks that it ran (a task that runs twice says so here).",
)
@click.option(
    "--size", type=click.IntRange(1), default=4, show_default=True, help="Tasks kept running."
)
@click.option(
    "--resources", default="cpus:0.5;mem:64", show_default=True, help="Each task's resources."
)
@click.option("--task-duration", default="1-3", show_default=True, help="Seconds: N or lo-hi.")
@click.option("--seed", type=int, default=None, help="Task durations drawn from this seed.")
@click.option(
    "--stop-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Once this file exists, launch no more tasks (let the running ones drain).",
)
@click.option(
    "--work",
    type=click.IntRange(1),
    default=None,
    help="A fixed list of this many work items, each retried until it is FINISHED "
    "(default: endless tasks).",
)
@click.option(
    "--partition-aware/--no-partition-aware",
    default=False,
    show_default=True,
    help="Hear TASK_DROPPED, TASK_UNREACHABLE, TASK_GONE, ... in place of TASK_LOST.",
)
def journaled_framework(
    broker: str,
    cluster: str,
    name: str,
    role: str | None,
    failover_timeout: float,
    journal: Path,
    witness_dir: Path,
    size: int,
    resources: str,
    task_duration: str,
    seed: int | None,
    stop_file: Path | None,
    work: int | None,
    partition_aware: bool,
) -> None:
    """Keep SIZE short tasks running, journaling every launch and update: a restarted
    process comes back as the same framework and reconciles (see
    frameworks/samples/journaled.py)."""
    from frameworks.driver import SchedulerDriver
    from frameworks.samples.journaled import JournaledConfig, JournaledScheduler
    from protocol.tooling.cli import run_party

    witness_dir.mkdir(parents=True, exist_ok=True)
    config = JournaledConfig(
        name=name,
        journal=journal,
        witness_dir=witness_dir,
        size=size,
        task=Resources.parse(resources),
        duration=parse_range(task_duration),
        stop_file=stop_file,
        work=work,
        partition_aware=partition_aware,
    )
    scheduler = JournaledScheduler(config, seed)

    async def party(url: BrokerURL) -> None:
        driver = SchedulerDriver(
            scheduler,
            name=name,
            broker=url,
            cluster=cluster,
            role=default_role(role, url, name),
            failover_timeout=failover_timeout,
            framework_id=scheduler.framework_id,
            implicit_acknowledgements=False,
            min_offer=[config.task],
            partition_aware=config.partition_aware,
        )
        await run_driver(driver, role)

    try:
        run_party(broker, party)
    finally:
        scheduler.close()
