"""`drfmesos simulate` and `drfmesos experiment run|schema`."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from protocol.extras import MissingExtra, needs
from protocol.tooling.cli import log_level_default

if TYPE_CHECKING:
    from cluster.experiments.results import Results


def _load(spec_path: Path):  # type: ignore[no-untyped-def]
    from cluster.experiments.spec import SpecError, load_spec

    try:
        return load_spec(spec_path)
    except SpecError as e:
        raise click.ClickException(str(e)) from None


def _write(results: Results, out: Path, plots: bool) -> dict[str, Any]:
    """The results' files into `out`, and their plots unless told not to: drawn from what
    was written, as `drfmesos experiment plot` draws them, so the two draw the same."""
    from cluster.experiments.results import Results

    summary = results.write(out)
    if plots:
        try:
            plot_all = _plotter()
        except MissingExtra as e:
            raise MissingExtra(
                f"{e}; or --no-plots (timeline.csv and summary.json are in {out})"
            ) from e
        plot_all(Results.read(out), out)
    return summary


def _plotter() -> Callable[[Results, Path], list[Path]]:
    """`cluster.experiments.plots.plot_all`, or MissingExtra naming the plots extra."""
    with needs("plots"):
        from cluster.experiments.plots import plot_all
    return plot_all


def _report(summary: dict[str, object], out: Path, plots: bool = True) -> None:
    frameworks = summary["frameworks"]
    assert isinstance(frameworks, dict)
    click.echo(
        f"{'framework':<12}{'mean share':>12}{'mean running':>14}{'completed':>11}"
        f"{'mean wait s':>13}{'jobs':>7}{'job time s':>12}"
    )
    for name, f in frameworks.items():
        jobs = f["jobs_completed"]  # (none: endless demand, or none done -- no time to say)
        job_time = f"{f['mean_job_response_time']:>12.1f}" if jobs else f"{'-':>12}"
        click.echo(
            f"{name:<12}{f['mean_share']:>12.1%}{f['mean_running_tasks']:>14.2f}"
            f"{f['tasks_completed']:>11}{f['mean_task_wait']:>13.1f}"
            f"{jobs if jobs else '-':>7}{job_time}"
        )
    util = summary["utilisation"]
    assert isinstance(util, dict)
    click.echo("utilisation: " + ", ".join(f"{r} {u:.1%}" for r, u in util.items()))
    distance = summary.get("distance_from_ideal")
    if isinstance(distance, dict) and distance:  # (None: nothing was measured)
        within = distance["within_one_task"]
        verdict = {None: "not measured", True: "within one task"}.get(within, "NOT within one task")
        gaps = ", ".join(f"{n} {f['mean_tasks']:.2f}" for n, f in distance["frameworks"].items())
        click.echo(
            f"distance from the {distance['policy']} ideal, tasks: {gaps or '-'} ({verdict})"
        )
    preemption = summary.get("preemption")
    if isinstance(preemption, dict):
        p = preemption.get
        click.echo(
            f"preemption ({p('victims', '')} first): {p('tasks_preempted', 0)} tasks "
            f"preempted, {p('work_lost_seconds', 0):,.0f} task-seconds of work thrown away"
        )
    cpu = summary.get("cpu_use")
    if isinstance(cpu, dict):  # real slaves: did the CPU used follow the cpus allocated?
        for name, f in cpu["frameworks"].items():
            click.echo(
                f"{name}: cpus allocated {f['mean_cpus_allocated']:.2f} "
                f"({f['allocated_share']:.1%} of the frameworks'), CPU-s/s used "
                f"{f['mean_cpus_used']:.2f} ({f['used_share']:.1%})"
            )
        verdict = "within" if cpu["follows_allocation"] else "NOT within"
        click.echo(
            f"largest gap between shares used and allocated: {cpu['largest_gap']:.1%} "
            f"({verdict} {cpu['within']:.0%})"
        )
    pngs = ", running_tasks.png, dominant_share.png, utilisation.png" if plots else ""
    if plots and cpu is not None:
        pngs += ", cpu_used.png"
    why = ", why.json" if (out / "why.json").exists() else ""  # (when some framework waited)
    click.echo(f"written to {out}: timeline.csv, utilisation.csv, summary.json{why}{pngs}")


def _preemption(spec, choice: str | None) -> None:  # type: ignore[no-untyped-def]
    """--preemption off|youngest|oldest: override the spec's preemption (its timeouts kept)."""
    if choice is None:
        return
    if choice == "off":
        spec.master.preemption = None
    elif spec.master.preemption is None:
        raise click.BadParameter("the spec sets no preemption", param_hint="--preemption")
    else:
        spec.master.preemption.victims = choice


preemption_option = click.option(
    "--preemption",
    type=click.Choice(["off", "youngest", "oldest"]),
    default=None,
    help="Override the spec's preemption: off, or which tasks of a victim go first.",
)

no_plots_option = click.option(
    "--no-plots",
    is_flag=True,
    help="Write no PNG plots (they need the plots extra): drfmesos experiment plot DIR "
    "draws them later.",
)


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option("--seed", type=int, default=None, help="Override the spec's seed.")
@click.option(
    "--policy",
    type=click.Choice(
        ["hdrf", "naive-hdrf", "flat", "drf", "wdrf", "asset", "fifo", "cpu", "slots", "ceei"]
    ),
    default=None,
    help="Override the spec's policy.",
)
@click.option(
    "--slots-per-node",
    type=click.IntRange(1),
    default=None,
    help="With --policy slots: how many slots each node is cut into.",
)
@preemption_option
@no_plots_option
@click.option("--profile", is_flag=True, help="Print where the simulator's time went.")
@log_level_default("warning")
def simulate(
    spec_path: Path,
    out: Path,
    seed: int | None,
    policy: str | None,
    slots_per_node: int | None,
    preemption: str | None,
    no_plots: bool,
    profile: bool,
) -> None:
    """Run SPEC as a discrete-event simulation with the master's own offer cycle.

    On a terminal it shows how far it is; Ctrl-C stops it there, keeping what it has
    (summary.json's stopped_at says how far it got)."""
    from cluster.experiments.simulator import simulate as run
    from cluster.experiments.spec import Master

    spec = _load(spec_path)
    if seed is not None:
        spec.run.seed = seed
    if policy is not None or slots_per_node is not None:
        try:
            spec.master = Master.model_validate(
                {
                    **spec.master.model_dump(),
                    **({"policy": policy} if policy else {}),
                    **({"slots_per_node": slots_per_node} if slots_per_node else {}),
                }
            )
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
    _preemption(spec, preemption)
    results, speed = _run_simulation(run, spec, profile)
    summary = _write(results, out, plots=not no_plots)
    _report(summary, out, plots=not no_plots)
    reached = spec.run.duration if results.stopped_at is None else results.stopped_at
    click.echo(
        f"simulated {reached:g}s in {speed['wall_seconds']:.2f}s "
        f"({speed['task_events']} task events, {speed['events_per_second']:,.0f}/s)"
    )
    if results.stopped_at is not None:  # (as a live run stopped early says it)
        click.echo(
            f"stopped at {reached:.0f} s of {spec.run.duration:g}: the results cover the part "
            "that ran (summary.json's stopped_at)",
            err=True,
        )


def _run_simulation(run, spec, profile: bool):  # type: ignore[no-untyped-def]
    """With a progress bar on a terminal (rich: the simulated seconds done and to go, the
    time taken and about how much is left); with cProfile if asked. Ctrl-C ends the run
    where it is and keeps what it has (a second Ctrl-C stops at once)."""
    import cProfile
    import pstats

    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} s simulated, {task.remaining:,.0f} s to go"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    profiler = cProfile.Profile() if profile else None
    console = Console(stderr=True)
    with (
        _stopped_by_ctrl_c() as stopping,
        Progress(*columns, console=console, transient=True, disable=not _terminal()) as bar,
    ):
        task = bar.add_task(f"simulating {spec.name}", total=spec.run.duration)
        if profiler is not None:
            profiler.enable()
        try:
            out = run(spec, lambda t: bar.update(task, completed=t), stopping)
        finally:
            if profiler is not None:
                profiler.disable()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return out


@contextlib.contextmanager
def _stopped_by_ctrl_c() -> Iterator[Callable[[], bool]]:
    """Yields whether Ctrl-C was pressed since: the first SIGINT is only noted (the run
    stops at its next look and keeps its results); the next one interrupts as usual."""
    pressed = False

    def note(signum: int, frame: object) -> None:
        nonlocal pressed
        pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: False  # (signals reach the main thread only; or Ctrl-C is not ours)
        return
    before = signal.signal(signal.SIGINT, note)
    try:
        yield lambda: pressed
    finally:
        signal.signal(signal.SIGINT, before)


def _terminal() -> bool:
    import sys

    return sys.stderr.isatty()


@click.group()
def experiment() -> None:
    """Replay experiments on a live local cluster, and draw a run's plots again."""


@experiment.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output folder.")
@click.option(
    "--time-scale",
    type=float,
    default=None,
    help="Override the spec's time scale (0.05: twenty times faster).",
)
@click.option(
    "--broker",
    default="embedded",
    show_default=True,
    help="'embedded', 'mosquitto', or mqtt://host:port of a running broker.",
)
@preemption_option
@no_plots_option
@log_level_default("warning")
def run_experiment(
    spec_path: Path,
    out: Path,
    time_scale: float | None,
    broker: str,
    preemption: str | None,
    no_plots: bool,
) -> None:
    """Run SPEC on a real local cluster (broker, master, slaves, frameworks as processes)."""
    import asyncio

    from cluster.experiments.live import run_live

    spec = _load(spec_path)
    if time_scale is not None:
        if time_scale <= 0:
            raise click.BadParameter("--time-scale must be positive")
        spec.run.time_scale = time_scale
    _preemption(spec, preemption)
    if spec.master.policy in ("slots", "ceei"):
        raise click.ClickException(
            f"{spec.master.policy} exists only in the simulator (drfmesos simulate)"
        )
    try:
        results = asyncio.run(run_live(spec, spec_path.resolve(), out, broker))
    except RuntimeError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:  # (once it runs, Ctrl-C ends it with the results so far)
        raise click.ClickException("stopped before the experiment began: nothing to keep") from None
    summary = _write(results, out, plots=not no_plots)
    _report(summary, out, plots=not no_plots)


@experiment.command("plot")
@click.argument(
    "folder", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Draw into this folder, not DIR."
)
def plot(folder: Path, out: Path | None) -> None:
    """Draw a run's plots again from its folder, DIR.

    DIR is the --out of simulate or experiment run; the plots go into it, or into --out.
    For a run made with --no-plots, once the plots extra is installed, or a folder copied
    to another machine: the figures the run drew, from its timeline.csv, utilisation.csv
    and summary.json alone."""
    from cluster.experiments.results import NotResults, Results

    try:
        results = Results.read(folder)
    except NotResults as e:
        raise click.ClickException(str(e)) from None
    plot_all = _plotter()
    target = folder if out is None else out
    target.mkdir(parents=True, exist_ok=True)
    drawn = plot_all(results, target)
    click.echo(f"drawn into {target}: {', '.join(p.name for p in drawn)}")
    if not results.utilisation:
        click.echo(
            f"{folder} has no utilisation.csv (an older drfmesos wrote it): utilisation.png "
            "is not drawn; run the experiment again for it"
        )


@experiment.command("schema")
def schema() -> None:
    """Print the JSON schema of experiment specs."""
    from cluster.experiments.spec import Spec

    click.echo(json.dumps(Spec.model_json_schema(), indent=2))
