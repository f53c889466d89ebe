"""Run an experiment spec on a real local cluster and sample it into `Results`.

Broker, master, slaves (simulated tasks, so durations are exact and many slaves fit in a
process) and one process per framework (`drfmesos framework experiment`), started at
their spec times; the master's state snapshots are sampled every `sample_interval` of
spec time. Everything runs `time_scale` times as fast as the spec says.

It says what it is doing as it goes (on stderr): the cluster starting, then a progress
bar of spec time with the time left (a line every tenth of the run when stderr is not a
terminal). Ctrl-C stops it and keeps what was sampled: the results cover the part that
ran (`Results.stopped_at`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from cluster.experiments.ideal_timeline import ideal_of
from cluster.experiments.results import Results, Sample
from cluster.experiments.spec import Spec
from cluster.local.launcher import Launcher
from cluster.local.view import wait_state
from protocol.tooling.brokers import open_broker
from protocol.transport.bus import Bus
from protocol.wire.messages import State, Wire
from protocol.wire.resources import KNOWN_NAMES, Resources
from protocol.wire.topics import Topics


async def run_live(spec: Spec, spec_path: Path, out: Path, broker: str) -> Results:
    scale = spec.run.time_scale
    run_dir = out / "run"
    total = sum((r for _, r in spec.cluster.nodes()), Resources())
    ideal = ideal_of(spec, total, spec.role_weights())
    results = Results(spec.name, "live", spec.master.policy, total).with_ideal(ideal)
    cluster = f"exp{os.getpid()}"
    latest: list[State] = []
    say = Console(stderr=True, highlight=False).print
    nodes = len(spec.cluster.nodes())
    say(f"{spec.name}: starting a broker, a master and {nodes} slaves ...")
    began = time.monotonic()
    async with open_broker(broker) as url:
        launcher = Launcher(url, cluster, run_dir, "warning")
        try:
            interval = max(0.02, spec.master.allocation_interval * scale)
            policy = "drf" if spec.master.policy == "wdrf" else spec.master.policy
            await launcher.start(
                "master",
                "master",
                "--policy",
                policy,
                "--http",  # (nothing here reads it; 5050 may be another cluster's)
                "off",
                "--allocation-interval",
                f"{interval:g}",
                "--allocate-on-free" if spec.master.allocate_on_free else "--no-allocate-on-free",
                *weights_args(spec.role_weights()),
                *await quota_args(spec, run_dir),
                *preemption_args(spec, scale),
            )
            for g, group in enumerate(spec.cluster.slaves):
                resources = ";".join(f"{k}:{v:g}" for k, v in group.resources.items())
                custom = ",".join(n for n in group.resources if n not in KNOWN_NAMES)
                await launcher.start(
                    "slave",
                    f"slaves-{g}",
                    "--count",
                    str(group.count),
                    *slave_args(spec, scale),
                    "--resources",
                    resources,
                    *(["--custom-resources", custom] if custom else []),
                    "--work-dir",
                    str(run_dir / f"slaves-{g}"),
                )
            await launcher.watch(
                wait_state(url, cluster, lambda s: s.slaves_registered == nodes, timeout=120)
            )
            say(
                f"cluster up in {time.monotonic() - began:.1f} s; running {spec.run.duration:g} s "
                f"of the spec at x{1 / scale:g} speed (about {spec.run.duration * scale:.0f} s); "
                "Ctrl-C stops it and keeps what it has"
            )
            async with Bus(url, name="experiment-sampler") as bus:

                async def on_state(message: Wire, _r: str | None) -> None:
                    if isinstance(message, State):
                        latest[:] = [message]

                await bus.subscribe(Topics(cluster).state, on_state)
                await _play(spec, spec_path, launcher, results, latest, out, scale)
        finally:
            await launcher.stop_all()
    final = latest[0].preemption if latest else None
    if final is not None:  # in spec time, as the simulator reports it
        results.preemption = {
            "events": (results.preemption or {}).get("events", []),
            "tasks_preempted": final.tasks_preempted,
            "work_lost_seconds": round(final.work_lost_seconds / scale, 3),
            "rounds": final.rounds,
            "victims": spec.master.preemption.victims if spec.master.preemption else "",
        }
    for fw in spec.frameworks:
        path = out / f"stats-{fw.name}.json"
        with contextlib.suppress(OSError, ValueError):
            results.framework_stats[fw.name] = json.loads(await asyncio.to_thread(path.read_text))
    return results


async def _play(
    spec: Spec,
    spec_path: Path,
    launcher: Launcher,
    results: Results,
    latest: list[State],
    out: Path,
    scale: float,
) -> None:
    t0 = time.time()
    with spec_progress(spec.name, spec.run.duration) as show:
        try:
            starts = sorted(spec.frameworks, key=lambda f: f.start)
            started: set[str] = set()
            next_sample = 0.0
            preempted: list[dict[str, object]] = []  # when the state's preempted count went up
            while (t := (time.time() - t0) / scale) < spec.run.duration:
                for fw in starts:
                    if fw.name not in started and fw.start <= t:
                        started.add(fw.name)
                        await launcher.start(
                            "framework",
                            f"framework-{fw.name}",
                            "experiment",
                            "--spec",
                            str(spec_path),
                            "--name",
                            fw.name,
                            "--t0",
                            repr(t0),
                            "--time-scale",
                            repr(scale),
                            "--stats",
                            str(out / f"stats-{fw.name}.json"),
                        )
                if t >= next_sample:
                    _sample(results, latest[0] if latest else None, next_sample, preempted)
                    next_sample += spec.run.sample_interval
                show(t)
                await asyncio.sleep(min(0.05, spec.run.sample_interval * scale / 4))
            show(spec.run.duration)
        except asyncio.CancelledError:  # Ctrl-C: stop here, keeping what was sampled
            task = asyncio.current_task()
            if task is None or task.uncancel() > 0:
                raise  # (cancelled for another reason too)
            results.stopped_at = (time.time() - t0) / scale
            Console(stderr=True).print(
                f"stopped at {results.stopped_at:.0f} s of {spec.run.duration:g}: "
                "the results cover the part that ran"
            )


@contextlib.contextmanager
def spec_progress(name: str, duration: float) -> Iterator[Callable[[float], None]]:
    """A progress bar of spec time on a terminal (elapsed, and the time left); elsewhere
    a line at each tenth of the run, so a log shows it moving too."""
    console = Console(stderr=True)
    if not console.is_terminal:
        tenths = [0]

        def line(t: float) -> None:
            if t >= duration * (tenths[0] + 1) / 10:
                tenths[0] = int(10 * t / duration)
                console.print(f"{name}: {t:.0f} of {duration:g} s ({tenths[0] * 10}%)")

        yield line
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s of the spec"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(name, total=duration)
        yield lambda t: progress.update(bar, completed=min(t, duration))


def _sample(
    results: Results, state: State | None, t: float, preempted: list[dict[str, object]]
) -> None:
    if state is None:
        return
    if state.preemption is not None:
        for _ in range(state.preemption.tasks_preempted - len(preempted)):
            preempted.append({"time": t, "victim": "", "work_lost": None})
        results.preemption = {"events": preempted}
    total = results.total
    used = used_cpus(state)
    for fw in state.frameworks:
        share = fw.allocated.dominant_share(total)
        sample = Sample(t, fw.name, fw.running_tasks, fw.allocated, share)
        if used is not None:
            sample.used_cpus = used.get(fw.framework_id, 0.0)
        results.samples.append(sample)
    results.utilisation.append(
        (t, {r: min(1.0, s) for r, s in state.allocated.shares(total).items()})
    )


def used_cpus(state: State) -> dict[str, float] | None:
    """CPU-s/s each framework's tasks used lately (their slaves' usage reports), or None
    when no task has reported (simulated slaves never do)."""
    reported = [t for t in state.tasks if t.used is not None and not t.state.terminal]
    if not reported:
        return None
    out: dict[str, float] = {}
    for t in reported:
        assert t.used is not None
        out[t.framework_id] = out.get(t.framework_id, 0.0) + (t.used.get("cpus") or 0.0)
    return out


def slave_args(spec: Spec, scale: float) -> list[str]:
    """Simulated tasks, or real ones under the spec's isolation (their usage reported
    every sample interval, so each sample has a fresh rate)."""
    c = spec.cluster
    if c.isolation == "simulated":
        return ["--simulated-tasks"]
    out = ["--isolation", c.isolation, "--cgroups-enable-cfs"] if c.cgroups_enable_cfs else []
    out = out or ["--isolation", c.isolation]
    interval = max(0.5, spec.run.sample_interval * scale)
    return [*out, "--usage-interval", f"{interval:g}"]


def preemption_args(spec: Spec, scale: float) -> list[str]:
    """The spec's preemption, for the live master (its times scaled like everything else)."""
    p = spec.master.preemption
    if p is None:
        return []
    out = ["--preemption-threshold", f"{p.threshold:g}", "--preemption-victims", p.victims]
    out += ["--preemption-notice", f"{p.notice * scale:g}"]
    if p.timeout is not None:
        out += ["--preemption-timeout", f"{p.timeout * scale:g}"]
    if p.guarantee_timeout is not None:
        out += ["--guarantee-timeout", f"{p.guarantee_timeout * scale:g}"]
    return out


def weights_args(weights: dict[str, float]) -> list[str]:
    return ["--weights", ",".join(f"{r}={w:g}" for r, w in weights.items())] if weights else []


async def quota_args(spec: Spec, run_dir: Path) -> list[str]:
    """The spec's quota, handed to the live master as a roles file."""
    if not spec.master.quota:
        return []
    from master.roles_file import RolesFile, RoleSpec, save_roles

    roles = RolesFile(
        roles={
            role: RoleSpec(weight=spec.role_weights().get(role, 1.0), quota=quota)
            for role, quota in spec.master.quota.items()
        }
    )
    path = run_dir / "roles.yaml"
    await asyncio.to_thread(save_roles, path, roles)
    return ["--roles", str(path), "--quota-headroom", spec.master.quota_headroom]
