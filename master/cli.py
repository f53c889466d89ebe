"""`drfmesos master`."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import click

from master.allocation.allocator import HEADROOM
from master.allocation.preemption import VICTIM_ORDERS
from master.config import DEFAULTS, MasterConfig
from master.ha.leadership import LeadershipError
from master.http.config import CertificateUnusable, HttpConfig, PortTaken
from master.rate_limits import (
    DEFAULT_CAPACITY,
    DEFAULT_QPS,
    RateLimits,
    RateLimitsError,
    load_rate_limits,
)
from protocol.extras import needs
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.cli import broker_option, cluster_option, log_level_option, warn_if_insecure
from protocol.wire.resources import ResourceError, Resources
from protocol.wire.values import MAX_WEIGHT

HTTP_DEFAULTS = HttpConfig()


def parse_weights(text: str) -> dict[str, float]:
    """`role=w,role2=w2` -> {role: w}."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        role, sep, value = part.partition("=")
        try:
            weights[role] = float(value) if sep else float("nan")
        except ValueError:
            weights[role] = float("nan")
        if not sep or not role or not 0 < weights[role] <= MAX_WEIGHT:
            raise click.BadParameter(f"expected role=weight, a weight in (0, 1e6], got {part!r}")
    return weights


def http_config(
    address: str,
    store: Path | None,
    open_metrics: bool,
    cert: Path | None,
    key: Path | None,
    max_backlog_age: float | None = HTTP_DEFAULTS.max_backlog_age,
    connections_per_address: int = HTTP_DEFAULTS.connections_per_address,
) -> HttpConfig | None:
    if address == "off":
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{address!r}: HOST:PORT or off", param_hint="--http")
    if (cert is None) != (key is None):
        raise click.BadParameter("--http-cert and --http-key go together")
    return HttpConfig(
        host.strip("[]") or "127.0.0.1",
        int(port),
        store,
        open_metrics,
        cert,
        key,
        max_backlog_age,
        connections_per_address,
    )


def rate_limits(path: Path | None, qps: float | None, capacity: int) -> RateLimits:
    if path is None:
        return RateLimits.defaults(qps, capacity)
    try:
        return load_rate_limits(path, qps, capacity)
    except RateLimitsError as e:
        raise click.BadParameter(str(e), param_hint="--rate-limits") from None


@click.command()
@broker_option()
@cluster_option
@click.option(
    "--policy",
    type=click.Choice(["hdrf", "naive-hdrf", "flat", "drf", "wdrf", "asset", "cpu", "fifo"]),
    default=DEFAULTS.policy,
    show_default=True,
    help="How roles are ordered: on the role tree (hdrf: min-satisfaction hierarchical "
    "DRF; naive-hdrf: the smallest child at each level; flat: the tree flattened into "
    "products of weights), or side by side (drf, asset, cpu, fifo).",
)
@click.option(
    "--allocation-interval",
    type=float,
    default=DEFAULTS.allocation_interval,
    show_default=True,
    help="Seconds between allocation rounds (a free also starts one, unless "
    "--no-allocate-on-free).",
)
@click.option(
    "--allocate-on-free/--no-allocate-on-free",
    default=DEFAULTS.allocate_on_free,
    show_default=True,
    help="Offer what a task's end frees soon after it ends; off, it waits for the next "
    "allocation round, as in Mesos (whose allocator does not allocate on recovery): what "
    "ends between two rounds is offered together, so a framework whose tasks are bigger "
    "than any one task's room can get room for them.",
)
@click.option(
    "--offer-timeout",
    type=float,
    default=DEFAULTS.offer_timeout,
    help="Rescind offers not answered within this many seconds (off by default).",
)
@click.option(
    "--slave-timeout",
    type=float,
    default=DEFAULTS.slave_timeout,
    show_default=True,
    help="Remove a slave whose heartbeats stop for this long.",
)
@click.option(
    "--heartbeat-interval",
    type=float,
    default=DEFAULTS.heartbeat_interval,
    show_default=True,
    help="Seconds between the master's heartbeats to frameworks, and between those it asks "
    "of slaves (see --slave-timeout).",
)
@click.option(
    "--state-interval",
    type=float,
    default=DEFAULTS.state_interval,
    show_default=True,
    help="Seconds between state snapshots (when something changed).",
)
@click.option(
    "--weights",
    default="",
    help="Role weights: role=w,role2=w2; in a tree any node's (eng=3,eng/backend=1).",
)
@click.option(
    "--principals",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    envvar="DRFMESOS_PRINCIPALS",
    help="The credentials store's principals.json: which roles each framework principal "
    "may register in (without it, any role).",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0),
    default=DEFAULT_QPS,
    show_default=True,
    help="Calls a second each framework or operator principal may make (0: no limit); "
    "calls over it wait their turn.",
)
@click.option(
    "--rate-capacity",
    type=click.IntRange(min=0),
    default=DEFAULT_CAPACITY,
    show_default=True,
    help="Calls of one principal that may wait; past it a call is refused.",
)
@click.option(
    "--rate-limits",
    "rate_limits_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Mesos's --rate_limits JSON: qps and capacity per principal, and an aggregate "
    "default for the rest (--rate-limit/--rate-capacity: each unlisted principal's own).",
)
@click.option(
    "--roles",
    "roles_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A roles file: weights, per-pool ordering and quotas (drfmesos roles schema); "
    "quota set at run time is written back to it.",
)
@click.option(
    "--preemption-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULTS.preemption_timeout,
    help="Preempt for a framework starving (below --preemption-threshold of its fair "
    "share, wanting more, nothing free fits it) this many seconds (off by default).",
)
@click.option(
    "--preemption-threshold",
    type=click.FloatRange(min=0, max=1),
    default=DEFAULTS.preemption_threshold,
    show_default=True,
    help="Starving means below this fraction of the fair share (YARN's "
    "fairSharePreemptionThreshold).",
)
@click.option(
    "--preemption-notice",
    type=click.FloatRange(min=0),
    default=DEFAULTS.preemption_notice,
    show_default=True,
    help="Seconds between warning a victim's scheduler and killing its tasks.",
)
@click.option(
    "--preemption-victims",
    type=click.Choice(VICTIM_ORDERS),
    default=DEFAULTS.preemption_victims,
    show_default=True,
    help="Which of a victim's tasks go first (youngest throws away the least work).",
)
@click.option(
    "--guarantee-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULTS.guarantee_timeout,
    help="Preempt for a role below its quota guarantee this many seconds (off by default).",
)
@click.option(
    "--quota-headroom",
    type=click.Choice(HEADROOM),
    default=DEFAULTS.quota_headroom,
    show_default=True,
    help="Whose unmet quota guarantees are kept free: every quota role's, as Mesos (all: "
    "idle resources, no wait when its framework comes), or only those of roles whose "
    "frameworks want offers (demand: work-conserving; a role that comes later waits for "
    "tasks to end, or for --guarantee-timeout's preemption).",
)
@click.option(
    "--min-allocatable-resources",
    "min_allocatable",
    default=None,
    metavar="NAME:N[;NAME:N]|...",
    help="The least an offer holds: free resources are offered only if they hold one of "
    "these |-separated sets, as Mesos's --min_allocatable_resources (by default cpus:0.01|"
    "mem:32; '' offers anything). A framework's own offer filters replace it for that "
    "framework.",
)
@click.option(
    "--http",
    "http_address",
    default=f"{HTTP_DEFAULTS.host}:{HTTP_DEFAULTS.port}",
    show_default=True,
    help="Where to serve the web UI, the HTTP API and /metrics (HOST:PORT; PORT 0 picks a "
    "free one, but not with --zk, where standbys send clients to the leader's --http as "
    "given; 'off' serves none, and needs no aiohttp).",
)
@click.option(
    "--http-credentials",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The credentials store whose operators may use the UI and API (HTTP Basic); by "
    "default the one --principals is in. Without either, HTTP is open.",
)
@click.option(
    "--http-open-metrics",
    is_flag=True,
    help="Serve /metrics and /health without credentials (for scrapers and probes). The "
    "open /metrics holds the cluster's aggregates only; the series that name tenants "
    "(frameworks' ids, names and roles, roles' shares, principals' calls, tasks' usage) "
    "are on an operator's, asked with credentials.",
)
@click.option(
    "--health-max-backlog-age",
    type=click.FloatRange(min=0.0, min_open=True),
    default=HTTP_DEFAULTS.max_backlog_age,
    show_default=True,
    help="/health says 'behind' once the master's oldest unhandled message has waited this "
    "many seconds (a heartbeat that late is close to --slave-timeout).",
)
@click.option(
    "--http-connections-per-address",
    type=click.IntRange(min=1),
    default=HTTP_DEFAULTS.connections_per_address,
    show_default=True,
    help="HTTP connections one client address (an IPv6 one's /64) may hold open at once; "
    "past it a new one is closed as it is taken. Behind a reverse proxy every client is "
    "its address, and each Mesos HTTP framework holds a SUBSCRIBE stream open: raise it.",
)
@click.option(
    "--http-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate (PEM; with --http-key).",
)
@click.option(
    "--http-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The private key of --http-cert (PEM).",
)
@click.option(
    "--zk",
    default=None,
    envvar="DRFMESOS_ZK",
    help="zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/path, or file:///PATH naming a "
    "file that holds one: run as one of several masters; the leader is elected in "
    "ZooKeeper and keeps the registry there. With USER:PASSWORD (ZooKeeper's digest "
    "scheme) the nodes under the path are the masters' alone.",
)
@click.option(
    "--zk-session-timeout",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    help="A leader cut off from ZooKeeper this long is replaced (it steps down sooner, "
    "after two thirds of it without an answer). Mesos's default, 10 s: at 5 s a leader "
    "busy with 100,000 slaves' registrations lost its session.",
)
@click.option(
    "--zk-mesos-path",
    default="/mesos",
    show_default=True,
    help="With --zk: where the leader also writes its MasterInfo as Mesos does "
    "(json.info_ nodes), so that Mesos frameworks find it from zk://HOST:PORT/mesos.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Without --zk: keep the registry (slaves, frameworks, quotas) here, so that a "
    "restarted master recovers them. Without either, a restart forgets them.",
)
@click.option(
    "--slave-reregister-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULTS.slave_reregister_timeout,
    show_default=True,
    help="After a failover, slaves of the registry that do not re-register this soon are "
    "removed and their tasks reported lost.",
)
@click.option(
    "--max-failover-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULTS.max_failover_timeout,
    help="The longest failover timeout a framework may ask for (longer ones are cut to "
    "it): a framework that disconnects holds its tasks no longer than this.",
)
@click.option(
    "--max-frameworks-per-principal",
    type=click.IntRange(min=0),
    default=DEFAULTS.max_frameworks_per_principal,
    show_default=True,
    help="The most frameworks one principal may have registered at once (0: no most): a "
    "tenant registering thousands would slow the master for every other.",
)
@log_level_option
def master(
    broker: str,
    cluster: str,
    policy: str,
    allocation_interval: float,
    allocate_on_free: bool,
    offer_timeout: float | None,
    slave_timeout: float,
    heartbeat_interval: float,
    state_interval: float,
    weights: str,
    principals: Path | None,
    rate_limit: float,
    rate_capacity: int,
    rate_limits_file: Path | None,
    roles_file: Path | None,
    preemption_timeout: float | None,
    preemption_threshold: float,
    preemption_notice: float,
    preemption_victims: str,
    guarantee_timeout: float | None,
    quota_headroom: str,
    min_allocatable: str | None,
    http_address: str,
    http_credentials: Path | None,
    http_open_metrics: bool,
    http_cert: Path | None,
    http_key: Path | None,
    health_max_backlog_age: float,
    http_connections_per_address: int,
    zk: str | None,
    zk_session_timeout: float,
    zk_mesos_path: str,
    work_dir: Path | None,
    slave_reregister_timeout: float,
    max_failover_timeout: float | None,
    max_frameworks_per_principal: int,
) -> None:
    """Run the master: the books, the DRF allocation module and the offer loop."""
    from master.ha.leadership import Candidate, LoneCandidate, Term, lead
    from master.ha.registry import Registry

    with needs("master"):  # prometheus_client: the master keeps its round timings in it
        from master.master import Master
    from protocol.tooling.cli import run_party
    from protocol.transport.aio import finish
    from protocol.transport.bus import Bus
    from protocol.wire.topics import Topics

    if zk is not None and work_dir is not None:
        raise click.BadParameter("with --zk the registry is in ZooKeeper", param_hint="--work-dir")

    config = MasterConfig(
        policy=policy,
        allocation_interval=allocation_interval,
        allocate_on_free=allocate_on_free,
        offer_timeout=offer_timeout,
        slave_timeout=slave_timeout,
        heartbeat_interval=heartbeat_interval,
        state_interval=state_interval,
        role_weights=parse_weights(weights),
        principals=principals,
        rate_limits=rate_limits(rate_limits_file, rate_limit or None, rate_capacity),
        roles=roles_file,
        preemption_timeout=preemption_timeout,
        preemption_threshold=preemption_threshold,
        preemption_notice=preemption_notice,
        preemption_victims=preemption_victims,
        guarantee_timeout=guarantee_timeout,
        quota_headroom=quota_headroom,
        min_allocatable=parse_min_allocatable(min_allocatable),
        slave_reregister_timeout=slave_reregister_timeout,
        max_failover_timeout=max_failover_timeout,
        max_frameworks_per_principal=max_frameworks_per_principal,
        http=http_config(
            http_address,
            http_credentials or (principals.parent if principals else None),
            http_open_metrics,
            http_cert,
            http_key,
            health_max_backlog_age,
            http_connections_per_address,
        ),
    )
    topics = Topics(cluster)

    from master.roles_file import RolesError, load_roles

    if roles_file is not None:  # refused before anything starts, with the field named
        from master.allocation.allocator import Allocator, AllocatorError

        try:
            Allocator(policy).roles.apply(load_roles(roles_file).roles)  # as the master will
        except (RolesError, AllocatorError) as e:
            raise click.BadParameter(str(e), param_hint="--roles") from None

    candidate: Candidate
    master_id = f"master-{uuid.uuid4().hex[:12]}"  # this process, through all its terms
    if zk is not None:
        with needs("ha"):
            from master.ha.zookeeper import ZkCandidate, ZkURL

        try:
            zk_url = ZkURL.from_flag(zk)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--zk") from None
        from master.mesos_api.leader_info import path_clash

        clash = path_clash(zk_url.path, zk_mesos_path)
        if clash is not None:
            raise click.BadParameter(clash, param_hint="--zk")
        address = f"{config.http.host}:{config.http.port}" if config.http else ""
        candidate = ZkCandidate(
            zk_url, cluster, {"master_id": master_id, "http": address}, zk_session_timeout
        )
    else:
        candidate = LoneCandidate(work_dir)

    if config.http is not None:
        with needs("master"):  # aiohttp: the API, the web UI and a standby's answers
            from master.http.standby import StandbyHttp
            from master.mesos_api.doors import (
                STANDBY_PUBLIC_PATHS,
                mesos_doors,
                standby_mesos_routes,
            )
    from master.mesos_api.leader_info import info_for, mesos_leader_info

    async def leader_address() -> str:
        """The leading master's HTTP address, as the election knows it (a standby's)."""
        standbys = getattr(candidate, "standbys", None)
        contenders = await standbys() if standbys is not None else []
        return str(contenders[0].get("http", "")) if contenders else ""

    async def party(url: BrokerURL) -> None:
        ending = asyncio.current_task()  # (cancelled by a signal: the process stops)
        warn_if_insecure(url, "master")
        # while not leading, a small app of its own answers /health and /metrics
        standby = (
            StandbyHttp(
                config.http,
                master_id,
                leader_address,
                standby_mesos_routes(leader_address),
                STANDBY_PUBLIC_PATHS,
            )
            if config.http
            else None
        )

        def make_bus() -> Bus:
            # every master of a cluster takes over the one persistent session: calls sent
            # while nobody led are queued there for the next leader
            return Bus(url, name="master", client_id=f"drfmesos-master-{cluster}", persistent=True)

        async def serve(bus: Bus, term: Term) -> Callable[[], Awaitable[None]]:
            connected = time.monotonic() - term.started  # (lead() connected the bus)
            if standby is not None:  # the leader's own API takes the port
                await standby.stop()
            registry = Registry(term.store)
            reading = time.monotonic()
            await registry.load()
            read = time.monotonic() - reading
            m = Master(
                bus, topics, config, registry=registry, epoch=term.epoch, master_id=master_id
            )
            m.churn.takeover_registry_seconds = read
            m.churn.takeover_bus_seconds, m.churn.won_at = connected, term.won_at
            if config.http is not None:
                m.http_doors.extend(mesos_doors(m))

            async def stop() -> None:  # this process's parts only (see master.ha.leadership)
                await m.stop()
                # a standby again, until the next term (not when the process is stopping)
                if standby is not None and not (ending is not None and ending.cancelling()):
                    await standby.start()

            try:
                await m.start()
                mesos_info = mesos_leader_info(candidate, zk_mesos_path)
                if mesos_info is not None and m.web_ui:
                    term.withdrawals.append(mesos_info.withdraw)
                    await mesos_info.publish(info_for(master_id, m.web_ui))
            except BaseException:  # a signal while it started: stop what did
                await finish(m.stop())
                raise
            m.churn.takeover_seconds = time.monotonic() - term.started
            # What is alive now (modules, the registry read) lives on: full collections
            # skip it, so one does not stall the loop for a heap's worth of objects.
            gc.freeze()
            return stop

        try:
            if standby is not None:  # (its port taken at the start: the process stops)
                await standby.start(first=True)
            await lead(candidate, make_bus, serve)
        finally:
            if standby is not None:
                await standby.stop()
            await candidate.close()

    try:
        run_party(broker, party)
    except (LeadershipError, PortTaken, CertificateUnusable) as e:
        raise click.ClickException(str(e)) from None


def parse_min_allocatable(text: str | None) -> list[Resources] | None:
    """Mesos's --min_allocatable_resources form, `cpus:1;mem:32|disk:1000`: sets of
    quantities, one of which an offer must hold ('' or '*': any)."""
    if text is None:
        return None
    sets: list[Resources] = []
    for part in text.split("|"):
        if not part.strip() or part.strip() == "*":
            continue
        try:
            quantities = Resources.parse(part)
            quantities.check_names()
        except ResourceError as e:
            raise click.BadParameter(str(e), param_hint="--min-allocatable-resources") from None
        if quantities:
            sets.append(quantities)
    return sets
