"""Looking at a cluster: fetch the master's snapshot and render it as tables."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from protocol.tooling.brokers import BrokerURL
from protocol.tooling.terminal import printable
from protocol.transport.aio import within
from protocol.transport.base import Connector
from protocol.transport.bus import Bus, MqttConnector
from protocol.wire.messages import ClusterEvent, Error, State, Teardown, WatchEvents, Wire
from protocol.wire.operator import MAX_WATCH_SECONDS
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics


async def fetch_state(
    url: BrokerURL, cluster: str, timeout: float = 10.0, *, tries: int | None = None
) -> State:
    """The retained snapshot, or the next one the master publishes."""
    return await wait_state(url, cluster, lambda _state: True, timeout, tries=tries)


async def wait_state(
    url: BrokerURL | Connector,
    cluster: str,
    condition: Callable[[State], bool],
    timeout: float = 30.0,
    *,
    tries: int | None = None,
) -> State:
    """The first snapshot (retained or published from now on) for which `condition` holds
    (read over the broker at `url`, or any transport: tests pass the memory one's).
    BrokerUnreachable after `tries` failed attempts to connect (else 30 s of them)."""
    got: asyncio.Future[State] = asyncio.get_running_loop().create_future()

    async def on_state(message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, State) and not got.done() and condition(message):
            got.set_result(message)

    connect = MqttConnector(url) if isinstance(url, BrokerURL) else url
    bus = connect(name="state-reader", inbox=None, will=None)
    try:
        await bus.start(tries=tries)
        await bus.subscribe(Topics(cluster).state, on_state)
        return await within(got, timeout)
    finally:
        await bus.close()


async def operator_call(
    url: BrokerURL,
    cluster: str,
    message: Wire,
    done: Callable[[ClusterEvent], bool],
    timeout: float = 10.0,
    *,
    tries: int | None = None,
) -> str | None:
    """Make an operator's call; None once the event stream shows it done, else what the
    master said was wrong. BrokerUnreachable after `tries` failed attempts to connect."""
    topics = Topics(cluster)
    principal = url.username or "operator"
    outcome: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    unwatched: list[str] = []  # why the master would not stream events, if it said

    async def on_answer(answer: Wire, _reply_to: str | None) -> None:
        if not isinstance(answer, Error):
            return
        said = f"{answer.code}: {answer.message}"
        if answer.about == WatchEvents.TYPE:  # not the call's: its event may never show
            unwatched.append(said)
        elif not outcome.done():
            outcome.set_result(said)

    async def on_event(event: Wire, _reply_to: str | None) -> None:
        if isinstance(event, ClusterEvent) and done(event) and not outcome.done():
            outcome.set_result(None)

    bus = Bus(url, name="operator", inbox=topics.operator(principal))
    try:
        await bus.start(tries=tries)
        await bus.subscribe(topics.operator(principal), on_answer)
        await bus.subscribe(topics.events, on_event)
        calls = topics.inbound("operator", principal)
        # the stream goes out while someone watches: the lease first, then (in order) the
        # call whose event it waits for
        await bus.publish(calls, WatchEvents(seconds=min(timeout + 5, MAX_WATCH_SECONDS)))
        await bus.publish(calls, message)
        try:
            return await within(outcome, timeout)
        except TimeoutError:
            if not unwatched:
                raise
            return f"its outcome is unknown: the master would not stream events ({unwatched[0]})"
    finally:
        await bus.close()


async def teardown_framework(
    url: BrokerURL, cluster: str, framework_id: str, timeout: float = 10.0
) -> str | None:
    """Ask the master, as an operator, to tear a framework down."""
    return await operator_call(
        url, cluster, Teardown(framework_id=framework_id), removed(framework_id), timeout
    )


def removed(framework_id: str) -> Callable[[ClusterEvent], bool]:
    """The event that shows a framework gone."""
    return lambda e: e.kind == "removed" and e.framework_id == framework_id


def _res(r: object) -> str:
    return str(r) if r else "-"


def acks_owed(frameworks: int) -> str:
    """What a drain waits for, as the state view says it."""
    whose = "framework's" if frameworks == 1 else "frameworks'"
    return f"{frameworks} {whose} acks owed"


def render_state(state: State) -> Group:
    head = Table.grid(padding=(0, 2))
    add_plain(head, "master", state.master_id, "policy", state.policy)
    add_plain(head, "epoch", str(state.epoch), "web UI", state.web_ui or "-")
    if state.recovering_slaves:
        add_plain(head, "recovering slaves", str(state.recovering_slaves), "", "")
    add_plain(head, "total", _res(state.total), "allocated", _res(state.allocated))
    add_plain(
        head, "slaves", str(state.slaves_registered), "outstanding offers", str(state.offer_count)
    )
    if state.refused:
        refused = ", ".join(f"{code} {n}" for code, n in sorted(state.refused.items()))
        add_plain(head, "refused calls", refused, "", "")
    if state.preemption is not None:
        p = state.preemption
        add_plain(
            head,
            "preempted",
            f"{p.tasks_preempted} tasks, {p.work_lost_seconds:,.0f} task-s of work lost",
            "being preempted",
            str(p.in_flight),
        )

    fws = Table(title="frameworks", title_justify="left")
    for col in (
        "name",
        "id",
        "principal",
        "role",
        "weight",
        "running",
        "finished",
        "allocated",
        "share",
        "fair share",
    ):
        fws.add_column(
            col,
            justify="right"
            if col in ("weight", "running", "finished", "share", "fair share")
            else "left",
        )
    for f in sorted(state.frameworks, key=lambda f: f.name):
        add_plain(
            fws,
            f.name + ("" if f.active else " (disconnected)"),
            f.framework_id,
            f.principal,
            ", ".join(f.roles or [f.role]),
            f"{f.weight:g}",
            str(f.running_tasks),
            str(f.finished_tasks),
            _res(f.allocated),
            f"{f.dominant_share:.1%}",
            "-"
            if f.fair_share is None
            else f"{f.fair_share:.1%}"
            + (f" (starving {f.starving_seconds:.0f}s)" if f.starving_seconds is not None else ""),
        )
    roles = Table(title="roles", title_justify="left")
    # (a note only when a guarantee cannot be met: no empty column, untitled, otherwise)
    noted = any(r.unsatisfiable for r in state.roles)
    columns = ["role", "weight", "promise", "share", "guarantee", "limit"]
    for col in [*columns, "note"] if noted else columns:
        roles.add_column(col, justify="right" if col in ("weight", "promise", "share") else "left")
    for r in state.roles:
        cells = [
            r.role,
            f"{r.weight:g}",
            f"{r.promise:.1%}" if r.promise is not None else "-",
            f"{r.share:.1%}",
            _res(r.guarantee),
            _res(r.limit),
        ]
        if noted:
            cells.append(f"unsatisfiable: {r.unsatisfiable}" if r.unsatisfiable else "")
        add_plain(roles, *cells)
    unlisted = state.slaves_registered - len(state.slaves)  # a big cluster's: counted only
    title = f"slaves ({unlisted:,} not listed: page /api/v1/slaves)" if unlisted else "slaves"
    slaves = Table(title=title, title_justify="left")
    for col in ("id", "hostname", "total", "free", "tasks", "used / allocated", "maintenance"):
        slaves.add_column(col)
    for s in sorted(state.slaves, key=lambda s: s.slave_id)[:50]:
        allocated = s.total.subtract_clamped(s.free)
        add_plain(
            slaves,
            s.slave_id,
            s.hostname,
            _res(s.total),
            _res(s.free),
            str(s.tasks),
            used_of(s.used, allocated),
            (s.maintenance or "")
            + (f" ({acks_owed(s.drain_acks_owed)})" if s.drain_acks_owed else ""),
        )
    tasks = Table(title="tasks (usage: its slave's last report)", title_justify="left")
    for col in ("task", "framework", "slave", "state", "ports", "used / allocated"):
        tasks.add_column(col)
    names = {f.framework_id: f.name for f in state.frameworks}
    for t in sorted(state.tasks, key=lambda t: (t.framework_id, t.task_id))[:50]:
        add_plain(
            tasks,
            t.task_id,
            names.get(t.framework_id, t.framework_id),
            t.slave_id,
            t.state.value,
            str(t.discrete.get("ports", "-")),
            used_of(t.used, t.resources),
        )
    return Group(head, fws, roles, slaves, *([tasks] if state.tasks else []))


def add_plain(table: Table, *cells: str) -> None:
    """A row of plain text: names and ids come from tenants, and rich would read
    `[/bold]` in a framework's name as markup (and fail on it), and pass ESC on to the
    terminal (its `Text` strips only a few controls): what a terminal would obey is
    escaped (`protocol.tooling.terminal`)."""
    table.add_row(*(Text(printable(cell)) for cell in cells))


def used_of(used: Resources | None, allocated: Resources) -> str:
    """CPU and memory used beside allocated: `0.24/0.25 cpus, 40/64 MB` ("-": no report)."""
    if used is None:
        return "-"
    parts = []
    for name, unit in (("cpus", " cpus"), ("mem", " MB")):
        have = allocated.get(name)
        if have is not None:
            parts.append(f"{used.get(name) or 0:.3g}/{have:g}{unit}")
    return ", ".join(parts) or "-"
