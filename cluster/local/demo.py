"""`drfmesos demo`: the blog's first experiment on a whole cluster on this machine.

A broker (embedded unless `--broker`), a master, three slaves of <2 CPU, 2200 MB> (the
blog's 6 CPU / 6.6 GB cluster), and frameworks A, B and C with <0.5 CPU, 512 MB> tasks
that sleep 20-40 s, arriving one after another. A live table shows each framework's
running tasks, allocation and dominant share, as the Mesos UI did in the blog.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from cluster.local.launcher import Launcher
from cluster.local.secure import as_principal, open_cluster_broker, provision
from cluster.local.view import add_plain, wait_state
from frameworks.cli import executor_option
from protocol import logs
from protocol.extras import need_all
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import log_level_option, until_signalled
from protocol.tooling.credentials import Store
from protocol.transport.aio import within
from protocol.transport.bus import Bus
from protocol.wire.messages import State, Wire
from protocol.wire.topics import Topics

SLAVE = "cpus:2;mem:2200"
SLAVES = 3
# the slaves share one host's network: each offers ports of its own, below the kernel's
# ephemeral ports (32768), where Mesos's default 31000-32000 for each would hand one port
# to two tasks; each holds its tasks to all of them (--ports-held)
FIRST_PORT, PORTS_EACH = 31000, 300
PORTS_HELD = f"{FIRST_PORT}-{FIRST_PORT + SLAVES * PORTS_EACH - 1}"


def demo_ports(i: int) -> str:
    """Slave i's ports."""
    first = FIRST_PORT + i * PORTS_EACH
    return f"{first}-{first + PORTS_EACH - 1}"


FRAMEWORKS = ("A", "B", "C")

DEFAULT_WEB_UI = ("127.0.0.1", 5050)
BAR = 10  # characters of the share bar at 100% (one a tenth: the table fits 80 columns)


def framework_table(state: State | None, elapsed: float) -> Table:
    table = Table(title=f"drfmesos demo  t={elapsed:5.1f}s", title_justify="left")
    for col in ("framework", "running", "finished", "cpus", "mem MB", "dominant share"):
        table.add_column(col, justify="left" if col == "framework" else "right")
    table.add_column("", width=BAR)  # (the share bar: fixed, or the table jumps as it grows)
    if state is None:
        table.caption = "waiting for the master's first state ..."
        return table
    total_cpus = state.total.get("cpus", 0.0)
    for fw in sorted(state.frameworks, key=lambda f: f.name):
        share = fw.dominant_share
        add_plain(
            table,
            fw.name,
            str(fw.running_tasks),
            str(fw.finished_tasks),
            f"{fw.allocated.get('cpus', 0.0):g}",
            f"{fw.allocated.get('mem', 0.0):g}",
            f"{share:.1%}",
            "#" * round(share * BAR),
        )
    if not state.slaves_registered:
        table.caption = "waiting for the slaves to register ..."
        return table
    table.caption = (  # (under 80 columns, the table's width)
        f"{state.slaves_registered} slaves: {total_cpus:g} cpus, "
        f"{state.total.get('mem', 0.0):g} MB; in use or offered: "
        f"{state.allocated.get('cpus', 0.0):g} cpus, {state.allocated.get('mem', 0.0):g} MB"
    )
    return table


async def run_demo(
    broker: str,
    time_scale: float,
    duration: float | None,
    arrival: float,
    executor: str,
    run_dir: Path,
    log_level: str,
    insecure: bool = False,
    http: str | None = None,
) -> State | None:
    console = Console()
    latest: list[State] = []
    started = time.monotonic()
    store = None
    if insecure:
        logs.get("demo").warning("insecure", detail="--insecure: no authentication, no TLS")
    else:
        principals = [("master", "master"), ("operator", "operator")]
        principals += [(f"slave-{i}", "slave") for i in range(SLAVES)]
        principals += [(name, "framework") for name in FRAMEWORKS]
        store = await asyncio.to_thread(provision, run_dir / "auth", principals)
    async with open_cluster_broker(broker, store) as url:
        cluster = "demo"
        launcher = Launcher(url, cluster, run_dir, log_level, store)
        stop = asyncio.Event()
        watcher = asyncio.create_task(until_signalled(stop))
        view_url = as_principal(url, store, "operator") if store else url
        try:
            await _start_cluster(launcher, time_scale, store, http or web_ui_address(console))
            await _say_where_the_ui_is(console, view_url, cluster, store)
            schedule = asyncio.create_task(_arrivals(launcher, time_scale, arrival, executor))
            async with Bus(view_url, name="demo-view") as bus:

                async def on_state(message: Wire, _r: str | None) -> None:
                    if isinstance(message, State):
                        latest[:] = [message]

                await bus.subscribe(Topics(cluster).state, on_state)
                await _show(console, latest, started, duration, stop, launcher)
            schedule.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await schedule
        finally:
            watcher.cancel()
            console.print("stopping the cluster ...", style="dim")
            await launcher.stop_all()
    return latest[0] if latest else None


def demo_extras(broker: str, insecure: bool) -> list[str]:
    """What the demo's own parts need: the master it starts (with its web UI), the broker
    it runs in process, and the certificates of its throwaway credentials store."""
    return [
        "master",
        *(["embedded"] if broker == "embedded" else []),
        *([] if insecure else ["tls"]),
    ]


def web_ui_address(console: Console) -> str:
    """127.0.0.1:5050, or a free port when something else holds it (said; the address the
    master took is printed once it serves)."""
    try:
        with socket.socket() as probe:
            probe.bind(DEFAULT_WEB_UI)
    except OSError:
        console.print(f"{DEFAULT_WEB_UI[0]}:{DEFAULT_WEB_UI[1]} is taken: a free port instead")
        return f"{DEFAULT_WEB_UI[0]}:0"
    return f"{DEFAULT_WEB_UI[0]}:{DEFAULT_WEB_UI[1]}"


async def _say_where_the_ui_is(
    console: Console, url: BrokerURL, cluster: str, store: Store | None
) -> None:
    """The web UI's address, and the throwaway operator credentials it takes."""
    state = await wait_state(url, cluster, lambda s: True, timeout=30)
    if not state.web_ui:
        console.print("web UI: not served (see the master's log)", style="yellow")
        return
    console.print(f"web UI: {state.web_ui}", style="bold")
    if store is not None:
        secret = (await asyncio.to_thread(store.secret_file("operator").read_text)).strip()
        console.print(f"  sign in as operator, secret {secret}")
    _say_how_commands_reach_it(console, url, cluster, store)


def _say_how_commands_reach_it(
    console: Console, url: BrokerURL, cluster: str, store: Store | None
) -> None:
    """The variables every `drfmesos` command reads, for another shell: `drfmesos state`,
    `drfmesos why A` then reach this cluster as its operator."""
    where = f"{url.scheme}://{url.host}:{url.port}"
    found = {"DRFMESOS_CLUSTER": cluster}
    if store is not None:
        where = f"{url.scheme}://operator@{url.host}:{url.port}"
        found |= {
            "DRFMESOS_CA": str(store.ca.resolve()),
            "DRFMESOS_SECRET_FILE": str(store.secret_file("operator").resolve()),
        }
    words = " ".join(
        f"{k}={shlex.quote(v)}" for k, v in {"DRFMESOS_BROKER": where, **found}.items()
    )
    console.print("  commands (drfmesos state, drfmesos why A) from another shell:")
    console.print(f"  export {words}", soft_wrap=True, markup=False, highlight=False)


async def _start_cluster(
    launcher: Launcher, time_scale: float, store: Store | None, http: str
) -> None:
    interval = max(0.05, 1.0 * time_scale)
    acl = ["--principals", str(store.principals_file)] if store else []
    await launcher.start(
        "master",
        "master",
        "--allocation-interval",
        f"{interval:g}",
        "--heartbeat-interval",
        "2",
        "--http",
        http,
        # a framework starved of its fair share for 30 s (scaled) gets it back
        "--preemption-timeout",
        f"{30.0 * time_scale:g}",
        "--preemption-notice",
        f"{2.0 * time_scale:g}",
        # an offer held unanswered goes back to the pool (a framework that holds offers
        # gains nothing), and a framework gone away keeps its tasks an hour at most
        "--offer-timeout",
        f"{max(1.0, 10.0 * time_scale):g}",
        "--max-failover-timeout",
        "3600",
        *acl,
    )
    for i in range(SLAVES):
        await launcher.start(
            "slave",
            f"slave-{i}",
            "--resources",
            f"{SLAVE};ports:[{demo_ports(i)}]",
            "--ports-held",  # (all of them: a task of one may not bind another's)
            f"[{PORTS_HELD}]",
            "--work-dir",
            str(launcher.run_dir / f"slave-{i}"),
            "--hostname",
            f"demo-slave-{i}",
            "--attributes",
            f"rack:r{i}",  # (shown on each slave's page)
            # every party is the one user's who runs the demo, its frameworks all theirs,
            # its Python and run dir often where no other user may reach (a venv in a
            # home): tasks run as that user, each in a PID namespace of its own
            "--no-switch-user",
        )


async def _arrivals(launcher: Launcher, time_scale: float, arrival: float, executor: str) -> None:
    for i, name in enumerate(FRAMEWORKS):
        if i:
            await asyncio.sleep(arrival * time_scale)
        await launcher.start(
            "framework",
            f"framework-{name}",
            "drf-demo",
            "--name",
            name,
            "--task-cpus",
            "0.5",
            "--task-mem",
            "512",
            "--task-duration",
            "20-40",
            "--time-scale",
            f"{time_scale:g}",
            "--executor",
            executor,
            principal=name,
        )


async def _show(
    console: Console,
    latest: list[State],
    started: float,
    duration: float | None,
    stop: asyncio.Event,
    launcher: Launcher,
) -> None:
    def elapsed() -> float:
        return time.monotonic() - started

    def done() -> bool:
        return stop.is_set() or (duration is not None and elapsed() >= duration)

    if console.is_terminal:
        with Live(framework_table(None, 0), console=console, refresh_per_second=4) as live:
            while not done():
                live.update(framework_table(latest[0] if latest else None, elapsed()))
                await _tick(stop, 0.25)
    else:  # a log, not a screen: a table every few seconds
        next_print = 0.0
        while not done():
            if elapsed() >= next_print and latest:
                console.print(framework_table(latest[0], elapsed()))
                next_print = elapsed() + 5
            await _tick(stop, 0.25)
    if latest:
        console.print(framework_table(latest[0], elapsed()))
    for party in launcher.failed():
        console.print(f"{party.name} exited with {party.proc.returncode}: see {party.log_path}")


async def _tick(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await within(stop.wait(), seconds)


@click.command()
@click.option(
    "--broker",
    default="embedded",
    show_default=True,
    help="'embedded' or 'mosquitto' (started here, with the demo's credentials and TLS), "
    "or, with --insecure only, mqtt://host:port of a running broker.",
)
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="0.05 makes 20-40 s tasks and all intervals twenty times shorter.",
)
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option(
    "--arrival",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds (before scaling) between the arrivals of A, B and C.",
)
@executor_option
@click.option(
    "--insecure",
    is_flag=True,
    help="No credentials and no TLS (any local process could act as any party).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where logs, slave work dirs and the throwaway credentials go, kept after it "
    "stops (default: a temp dir, removed when it stops).",
)
@click.option(
    "--http",
    default=None,
    help="Where the master serves the web UI (HOST:PORT; PORT 0 picks a free one). "
    "Default: 127.0.0.1:5050, or a free port if that one is taken.",
)
@log_level_option
def demo(
    broker: str,
    time_scale: float,
    duration: float | None,
    arrival: float,
    executor: str,
    insecure: bool,
    run_dir: Path | None,
    http: str | None,
) -> None:
    """Run the blog's demo cluster: broker, master, 3 slaves, frameworks A, B, C."""
    if time_scale <= 0:
        raise click.BadParameter("--time-scale must be positive")
    need_all(*demo_extras(broker, insecure))  # all at once, before anything starts
    directory = run_dir or Path(tempfile.mkdtemp(prefix="drfmesos-demo-"))
    kept = "" if run_dir else " (removed when it stops: --run-dir keeps them)"
    click.echo(f"logs and work dirs in {directory}{kept}", err=True)
    try:
        asyncio.run(
            run_demo(
                broker, time_scale, duration, arrival, executor, directory, "info", insecure, http
            )
        )
    finally:  # (a temp dir of ours holds the demo's secrets: nothing of it is left behind)
        if run_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    sys.exit(0)
