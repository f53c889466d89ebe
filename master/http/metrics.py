"""The master's Prometheus metrics (the official client, text format at `/metrics`).

Counters are read at scrape time from what the master already counts for its event
stream, so `/metrics` and the events always agree; gauges are read off the books.

Two pages: an operator's, whole, and the open one (`--http-open-metrics`, for a scraper
that presents no credentials), which holds the cluster's aggregates only. The series
labelled by tenant -- a framework's id, name and role, a role's share, a principal's
calls, a task's usage -- tell which tenants and frameworks exist, which the master tells
no tenant of another (docs/reference/metrics.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from master.http.reader import BookCounts, Gauges, MasterReader
from master.http.usage_metrics import TaskUsageCollector

OFFER_OUTCOMES = {
    "offer": "made",
    "accept": "accepted",
    "decline": "declined",
    "rescind": "rescinded",
}


class MasterCollector(Collector):
    def __init__(self, master: MasterReader, *, tenants: bool = True) -> None:
        """`tenants`: with the series labelled by tenant (else the open page's)."""
        self.master = master
        self.tenants = tenants

    def collect(self) -> Iterator[Metric]:
        m = self.master
        g = m.gauges()
        offers = CounterMetricFamily(
            "drfmesos_offers", "Offers, by what became of them.", labels=["outcome"]
        )
        for kind, outcome in OFFER_OUTCOMES.items():
            offers.add_metric([outcome], m.event_counts[kind])
        yield offers
        yield CounterMetricFamily(
            "drfmesos_tasks_launched", "Tasks launched.", value=m.event_counts["launch"]
        )
        ended = CounterMetricFamily(
            "drfmesos_tasks_ended", "Tasks that reached a terminal state.", labels=["state"]
        )
        for state, n in sorted(m.tasks_ended.items()):
            ended.add_metric([state], n)
        yield ended
        live = GaugeMetricFamily(
            "drfmesos_tasks", "Tasks not yet ended, by state.", labels=["state"]
        )
        for state, n in sorted(g.tasks_by_state.items()):
            live.add_metric([state], n)
        yield live
        health = GaugeMetricFamily(
            "drfmesos_tasks_health",
            "Tasks not yet ended whose health check has said, by what it last said.",
            labels=["health"],
        )
        for verdict, n in sorted(g.tasks_by_health.items()):
            health.add_metric([verdict], n)
        yield health
        yield GaugeMetricFamily("drfmesos_slaves", "Registered slaves.", value=g.counts.slaves)
        yield GaugeMetricFamily(
            "drfmesos_frameworks", "Registered frameworks.", value=g.counts.frameworks
        )
        yield GaugeMetricFamily(
            "drfmesos_offers_outstanding",
            "Offers not yet answered.",
            value=g.counts.offers_outstanding,
        )
        total = GaugeMetricFamily(
            "drfmesos_resources_total", "The cluster's resources.", labels=["resource"]
        )
        used = GaugeMetricFamily(
            "drfmesos_resources_allocated", "Resources offered or in use.", labels=["resource"]
        )
        for name, amount in sorted(g.total.items()):
            total.add_metric([name], amount)
            used.add_metric([name], g.allocated.get(name, 0.0))
        yield total
        yield used
        if self.tenants:
            yield from tenant_metrics(g)
        yield CounterMetricFamily(
            "drfmesos_status_update_resends",
            "Status updates sent to a framework again, unacknowledged.",
            value=m.update_resends,
        )
        refused = CounterMetricFamily(
            "drfmesos_calls_refused", "Calls refused, by reason.", labels=["reason"]
        )
        for reason, n in sorted(m.refused.items()):
            refused.add_metric([reason], n)
        yield refused
        if self.tenants:
            yield from limit_metrics(m)
        yield from backlog_metrics(m)
        yield from message_metrics(m)
        yield from churn_metrics(m, g.counts)
        bus = CounterMetricFamily(
            "drfmesos_bus_messages", "Messages over the bus.", labels=["direction"]
        )
        bus.add_metric(["in"], g.bus_in)
        bus.add_metric(["out"], g.bus_out)
        yield bus
        yield CounterMetricFamily(
            "drfmesos_tasks_preempted", "Tasks killed by preemption.", value=g.tasks_preempted
        )
        yield CounterMetricFamily(
            "drfmesos_preemption_work_lost_seconds",
            "Running time of the tasks preempted, summed.",
            value=g.work_lost_seconds,
        )


def tenant_metrics(g: Gauges) -> Iterator[Metric]:
    """Each framework's shares and tasks, labelled by its id, name and role, and each
    role's share: an operator's page only."""
    share = GaugeMetricFamily(
        "drfmesos_framework_dominant_share",
        "A framework's dominant share (offered or in use).",
        labels=["framework_id", "name", "role"],
    )
    fair = GaugeMetricFamily(
        "drfmesos_framework_fair_share",
        "A framework's fair share: its share of the policy's ideal.",
        labels=["framework_id", "name", "role"],
    )
    tasks = GaugeMetricFamily(
        "drfmesos_framework_tasks",
        "A framework's live tasks the master knows.",
        labels=["framework_id", "name", "role"],
    )
    for fw in g.framework_shares:
        labels = [fw.framework_id, fw.name, fw.role]
        share.add_metric(labels, fw.share)
        tasks.add_metric(labels, fw.tasks)
        if fw.fair is not None:
            fair.add_metric(labels, fw.fair)
    yield share
    yield fair
    yield tasks
    roles = GaugeMetricFamily(
        "drfmesos_role_dominant_share", "A role's (subtree's) dominant share.", labels=["role"]
    )
    for role, role_share in g.role_shares:
        roles.add_metric([role], role_share)
    yield roles


def limit_metrics(m: MasterReader) -> Iterator[Metric]:
    """Per principal: calls waiting for their rate limit, calls that waited, calls refused
    (an operator's page only: they name the principals)."""
    queued = GaugeMetricFamily(
        "drfmesos_calls_queued", "Calls waiting for their rate limit.", labels=["principal"]
    )
    throttled = CounterMetricFamily(
        "drfmesos_calls_throttled",
        "Calls that waited for their rate limit before being handled.",
        labels=["principal"],
    )
    refused = CounterMetricFamily(
        "drfmesos_calls_rate_refused",
        "Calls refused because their principal's queue was full.",
        labels=["principal"],
    )
    for principal, counts in sorted(m.queues.counts.items()):
        queued.add_metric([principal], counts.queued)
        throttled.add_metric([principal], counts.throttled)
        refused.add_metric([principal], counts.refused)
    yield queued
    yield throttled
    yield refused


def backlog_metrics(m: MasterReader) -> Iterator[Metric]:
    """How far behind the master is in reading its inbound messages (Mesos:
    master/event_queue_messages), and that it leads (master/elected)."""
    backlog = m.backlog()
    yield GaugeMetricFamily(
        "drfmesos_inbound_queue_messages",
        "Messages read from the broker, not yet handled.",
        value=backlog.messages,
    )
    yield GaugeMetricFamily(
        "drfmesos_inbound_oldest_wait_seconds",
        "How long the oldest message not yet handled has waited, at least (lag probe).",
        value=backlog.oldest_wait,
    )
    yield GaugeMetricFamily(
        "drfmesos_inbound_last_wait_seconds",
        "How long the last lag probe back waited to be read.",
        value=backlog.last_wait,
    )
    yield elected_metric(1)


def elected_metric(elected: int) -> Metric:
    return GaugeMetricFamily(
        "drfmesos_elected", "1 on the leading master, 0 on a standby.", value=elected
    )


def message_metrics(m: MasterReader) -> Iterator[Metric]:
    """Messages received, by type, and what became of them (Mesos: master/messages_*)."""
    received = CounterMetricFamily(
        "drfmesos_messages_received", "Messages received, by type.", labels=["type"]
    )
    for kind, n in sorted(m.messages.received.items()):
        received.add_metric([kind], n)
    yield received
    outcomes = CounterMetricFamily(
        "drfmesos_messages",
        "Messages by type and outcome (handled, refused with its code, dropped, failed).",
        labels=["type", "outcome", "code"],
    )
    for (kind, outcome, code), n in sorted(m.messages.outcomes.items()):
        outcomes.add_metric([kind, outcome, code], n)
    yield outcomes


def churn_metrics(m: MasterReader, counts: BookCounts) -> Iterator[Metric]:
    """Slaves' comings and goings (Mesos: master/slave_registrations, _reregistrations,
    _removals, slaves_connected, slaves_disconnected, recovery_slave_removals)."""
    churn = m.churn
    yield CounterMetricFamily(
        "drfmesos_slave_registrations", "Slaves registered.", value=churn.registrations
    )
    yield CounterMetricFamily(
        "drfmesos_slave_reregistrations", "Slaves re-registered.", value=churn.reregistrations
    )
    yield CounterMetricFamily(
        "drfmesos_slave_registration_retries_absorbed",
        "Registers that repeated one whose registry record was being written (answered by it).",
        value=churn.retries_absorbed,
    )
    yield CounterMetricFamily(
        "drfmesos_slave_disconnects", "Slaves whose connection was lost.", value=churn.disconnects
    )
    removals = CounterMetricFamily(
        "drfmesos_slave_removals",
        "Slaves removed, by cause (unreachable, operator, recovery).",
        labels=["cause"],
    )
    for cause, n in sorted(churn.removals.items()):
        removals.add_metric([cause], n)
    yield removals
    connected = counts.slaves_connected
    yield GaugeMetricFamily("drfmesos_slaves_connected", "Slaves connected.", value=connected)
    yield GaugeMetricFamily(
        "drfmesos_slaves_disconnected",
        "Slaves registered whose connection is lost.",
        value=counts.slaves - connected,
    )
    out = GaugeMetricFamily(
        "drfmesos_slaves_maintenance",
        "Slaves an operator took out of the offers, by state (deactivated, draining, drained).",
        labels=["state"],
    )
    for state in ("deactivated", "draining", "drained"):
        out.add_metric([state], counts.maintenance.get(state, 0))
    yield out
    recovery = GaugeMetricFamily(
        "drfmesos_recovery_slaves",
        "After a failover: slaves of the registry expected, back, removed, still awaited.",
        labels=["state"],
    )
    recovery.add_metric(["expected"], churn.recovery_expected)
    recovery.add_metric(["back"], churn.recovery_back)
    recovery.add_metric(["removed"], churn.recovery_removed)
    recovery.add_metric(["waiting"], counts.recovering)
    yield recovery
    yield GaugeMetricFamily(
        "drfmesos_recovery_done_timestamp_seconds",
        "When the last slave of the registry a failover awaited was back or removed "
        "(Unix time; 0: none awaited yet, or some still are).",
        value=churn.recovered_at if not counts.recovering else 0.0,
    )
    takeover = GaugeMetricFamily(
        "drfmesos_takeover_seconds",
        "How this leader's term began: connecting to the broker, reading the registry, "
        "and from winning the election until serving (both included).",
        labels=["step"],
    )
    takeover.add_metric(["bus"], churn.takeover_bus_seconds)
    takeover.add_metric(["registry"], churn.takeover_registry_seconds)
    takeover.add_metric(["serving"], churn.takeover_seconds)
    yield takeover
    yield GaugeMetricFamily(
        "drfmesos_term_won_timestamp_seconds",
        "When this leader won its election (Unix time; without ZooKeeper: began to lead).",
        value=churn.won_at,
    )


def registry_for(master: MasterReader, *, tenants: bool = True) -> CollectorRegistry:
    """The metrics, with the series labelled by tenant (an operator's page) or without
    (the open page: aggregates only)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MasterCollector(master, tenants=tenants))
    if tenants:
        registry.register(TaskUsageCollector(master))
    registry.register(master.round_duration)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
