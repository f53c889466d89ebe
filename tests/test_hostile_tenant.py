"""A hostile tenant gains nothing: each attack on a secured cluster (credentials and the
broker's ACL, the master, two slaves, the SDK driver), measured by the attacker's share
against its fair share and by the victim's tasks. The attacks run in process on the memory
transport, which applies the credentials store's ACL as the brokers do; the operator's
weights (a bare MQTT client, `drfmesos weights`) go through a real TLS broker.

Fairness is between roles, as in Mesos: `alice` (the victim) and `mallory` (the attacker)
each have a role of their own, promised half of the cluster of 8 CPUs; every task is
<1 CPU, 64 MB>, so a fair share is 4 running tasks. The victim starts first and takes the
whole cluster; the attacker then comes in. For every attack the attacker ends at most one
task above its fair share and the victim, once at its fair share, never drops below it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster.local.secure import as_principal, provision
from cluster.local.view import operator_call
from frameworks.driver import SchedulerDriver
from frameworks.errors import DriverError
from frameworks.scheduler import Scheduler, build_task
from master.ha.registry import MemoryStore, Registry
from master.master import Master, MasterConfig
from master.roles_file import load_roles
from protocol.tooling.brokers import BrokerURL, EmbeddedBroker
from protocol.tooling.credentials import Store
from protocol.transport.base import Connector
from protocol.transport.bus import Bus, MqttConnector
from protocol.transport.memory import MemoryBroker
from protocol.wire.messages import (
    ClusterEvent,
    Error,
    Filters,
    Gone,
    Offer,
    Revive,
    SetWeights,
    Subscribe,
    Subscribed,
    TaskState,
    TaskStatus,
    Teardown,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics

from harness.helpers import Inbox, eventually, open_transport, start_secure_slaves
from harness.trust import PRINCIPALS, Attacker

T = Topics("tenants")
TASK = Resources(cpus=1, mem=64)
FAIR = 4  # tasks: half of the 8 CPUs
pytestmark = pytest.mark.timeout(60)


class Tenant(Scheduler):
    """Launches as many long tasks as each offer holds (up to `most`), declining the rest
    briefly; or, as an attacker, declares a demand, declines everything, or holds offers."""

    def __init__(
        self,
        most: int | None = None,
        *,
        declare: int | None = None,
        launch: bool = True,
        answer: bool = True,
    ) -> None:
        self.most, self.declare, self.launch, self.answer = most, declare, launch, answer
        self.running: set[str] = set()
        self.live: set[str] = set()  # launched and not ended
        self.lowest_since_fair: int | None = None  # fewest tasks once it had its fair share
        self.offers = 0
        self.n = 0
        self.changed = asyncio.Event()

    async def registered(self, driver: SchedulerDriver, framework_id: str, master_id: str) -> None:
        if self.declare:
            await driver.request_resources([(TASK, self.declare)])

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        self.offers += len(offers)
        self.changed.set()
        if not self.answer:
            return  # holds them, answering nothing
        for offer in offers:
            fits, rest = 0, offer.resources
            while rest.contains(TASK):
                fits, rest = fits + 1, rest - TASK
            if self.most is not None:
                fits = min(fits, self.most - len(self.live))
            if not self.launch or fits <= 0:
                await driver.decline_offer(offer.offer_id, Filters(refuse_seconds=0.1))
                continue
            tasks = []
            for _ in range(fits):
                self.n += 1
                self.live.add(f"t{self.n}")
                tasks.append(build_task(offer, f"t{self.n}", TASK, command="sleep 300"))
            await driver.launch_tasks([offer.offer_id], tasks, Filters(refuse_seconds=0.1))

    async def status_update(self, driver: SchedulerDriver, status: TaskStatus) -> None:
        if status.state == TaskState.RUNNING:
            self.running.add(status.task_id)
        elif status.state.terminal:
            self.running.discard(status.task_id)
            self.live.discard(status.task_id)
        if len(self.running) >= FAIR or self.lowest_since_fair is not None:
            low = self.lowest_since_fair
            self.lowest_since_fair = (
                len(self.running) if low is None else min(low, len(self.running))
            )
        self.changed.set()


@dataclass
class Tenants:
    store: Store
    url: BrokerURL
    master: Master
    stack: contextlib.AsyncExitStack
    drivers: list[SchedulerDriver] = field(default_factory=list)
    memory: MemoryBroker | None = None  # the in-process broker, instead of a real one

    def as_(self, name: str) -> BrokerURL:
        return as_principal(self.url, self.store, name)

    def connect(self, name: str) -> Connector:
        """`name`'s transport maker: on the memory broker, or on the real one as `as_`."""
        return self.memory.connector(name) if self.memory else MqttConnector(self.as_(name))

    async def tenant(
        self, principal: str, scheduler: Tenant, *, name: str | None = None, **kw: object
    ) -> SchedulerDriver:
        driver = SchedulerDriver(
            scheduler,
            name=name or principal,
            broker=self.connect(principal),
            cluster=T.cluster,
            role=str(kw.pop("role", principal)),
            **kw,  # type: ignore[arg-type]
        )
        await driver.start(timeout=10)
        self.stack.push_async_callback(driver._close)
        self.drivers.append(driver)
        return driver

    def running(self, role: str) -> int:
        """Tasks running in `role`, as the master's books have them."""
        return sum(
            fw.running_tasks() for fw in self.master.books.frameworks.values() if fw.role == role
        )


@contextlib.asynccontextmanager
async def tenants(
    tmp_path: Path, *, real: bool = False, **config: object
) -> AsyncIterator[Tenants]:
    """The secured cluster, the victim alice running on all of it: in process on the
    memory transport, or (`real`) on an embedded broker with TLS."""
    store = provision(tmp_path / "auth", PRINCIPALS)
    for name in ("mallory-2", "mallory-3"):  # more principals of the tenant's, in its role
        store.add(name, "framework", roles=("mallory",), keep_secret=True)
    broker = EmbeddedBroker(auth=store.path, tls=True) if real else None
    if broker is not None:
        await broker.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            url = broker.url if broker else BrokerURL("memory", 0)
            c = Tenants(store, url, None, stack)  # type: ignore[arg-type]
            if broker is None:
                c.memory = MemoryBroker(store.principals.values())
            settings = {
                "allocation_interval": 0.05,
                "heartbeat_interval": 0.5,
                "state_interval": 0.1,
                "principals": store.principals_file,
                **config,
            }
            if broker is None:
                mbus = await open_transport(stack, c.connect("master"), "master")
            else:
                mbus = await stack.enter_async_context(
                    Bus(c.as_("master"), name="master", persistent=True)
                )
            c.master = Master(mbus, T, MasterConfig(**settings))  # type: ignore[arg-type]
            await c.master.start()
            stack.push_async_callback(c.master.stop)
            await start_secure_slaves(stack, c.connect, T, tmp_path)
            yield c
    finally:
        if broker is not None:
            await broker.stop()


# preemption acts for a framework below its whole fair share (YARN's threshold at 1)
PREEMPTION = {"preemption_timeout": 0.3, "preemption_notice": 0.1, "preemption_threshold": 1.0}


async def victim_everywhere(c: Tenants) -> Tenant:
    victim = Tenant()
    await c.tenant("alice", victim)
    await eventually(lambda: c.running("alice") == 8, timeout=15)
    return victim


async def settle(c: Tenants, condition: Callable[[], bool], timeout: float = 20) -> None:
    try:
        await eventually(condition, timeout=timeout)
    except AssertionError:
        counts = {r: c.running(r) for r in ("alice", "mallory")}
        a = c.master.allocator
        free = {s: str(a.free(s)) for s in a.slaves}
        held = {f: str(a.allocation(f)) for f in a.frameworks}
        raise AssertionError(
            f"not settled: running {counts}; free {free}; held {held}; reserved "
            f"{a.reservations}; fair {c.master.views.state().frameworks}"
        ) from None


async def rounds_later(c: Tenants, n: int = 30) -> None:
    """After `n` more allocation rounds: longer than preemption takes to time out and act
    (0.3 s + 0.1 s notice), so whatever it would still do has been done."""
    start = c.master.offer_rounds.count
    await settle(c, lambda: c.master.offer_rounds.count >= start + n)


def victim_kept_its_fair_share(c: Tenants, victim: Tenant) -> None:
    assert victim.lowest_since_fair is not None
    assert victim.lowest_since_fair >= FAIR, f"the victim fell to {victim.lowest_since_fair}"
    assert c.running("alice") >= FAIR


# -- weights: an operator's, never a tenant's ----------------------------------------------


async def test_a_tenant_cannot_give_itself_weight_and_shares_end_equal(tmp_path: Path) -> None:
    async with tenants(tmp_path, **PREEMPTION) as c:
        victim = await victim_everywhere(c)
        with pytest.raises(DriverError, match="ask an operator"):
            await c.tenant("mallory", Tenant(), weight=100.0)
        assert c.master.allocator.roles.weight("mallory") == 1.0
        await c.tenant("mallory", Tenant(declare=8), weight=1.0)  # the configured weight
        await settle(c, lambda: c.running("mallory") == FAIR and c.running("alice") == FAIR)
        victim_kept_its_fair_share(c, victim)
        assert c.master.outbox.refused["subscribe-refused"] == 1


async def test_only_an_operator_sets_weights_and_they_are_kept_and_survive_a_failover(
    tmp_path: Path,
) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text("roles:\n  alice: {weight: 1}\n")
    async with tenants(tmp_path, real=True, roles=roles) as c:

        def weights_set(e: ClusterEvent) -> bool:
            return e.kind == "weights"

        # a framework principal's SetWeights: not an operator's call, nothing changes
        inbox = T.outbox("framework", "mallory") + "/in"
        bus = await c.stack.enter_async_context(Bus(c.as_("mallory"), name="m", inbox=inbox))
        mallory = Attacker(bus, T.inbound("framework", "mallory"))
        await bus.subscribe(T.outbox("framework", "mallory") + "/#", mallory.inbox)
        error = await mallory.call(SetWeights(weights={"mallory": 9}))
        assert error.code in ("forbidden", "unknown-call", "invalid"), error
        assert c.master.allocator.roles.weight("mallory") == 1.0
        # an operator's: applied, in the registry and the roles file, shown in the state
        call = SetWeights(weights={"alice": 3, "eng/batch": 2})
        assert await operator_call(c.as_("ops"), T.cluster, call, weights_set) is None
        assert c.master.allocator.roles.weight("alice") == 3
        assert c.master.registry.weights["alice"].weight == 3
        assert load_roles(roles).roles["alice"].weight == 3
        assert load_roles(roles).roles["eng/batch"].weight == 2
        views = {r.role: r for r in c.master.views.state().roles}
        assert views["alice"].weight == 3
        # a wildcard is no role: refused, all or nothing
        bad = SetWeights(weights={"alice": 5, "a/+": 1})
        assert "invalid-weight" in (await operator_call(c.as_("ops"), T.cluster, bad,
                                                        weights_set) or "")  # fmt: skip
        assert c.master.allocator.roles.weight("alice") == 3
        # a new leader reads the registry: the weight is still the operator's
        store = MemoryStore()
        for role, record in c.master.registry.weights.items():
            await store.put(f"weight/{role}", record.model_dump(mode="json"))
        registry = Registry(store)
        await registry.load()
        successor = Master(c.master.bus, T, MasterConfig(), registry=registry)
        successor.recovery.recover()
        assert successor.allocator.roles.weight("alice") == 3
        assert successor.allocator.roles.weight("eng/batch") == 2


# -- the attacks ----------------------------------------------------------------------------


async def test_a_tenant_cannot_subscribe_into_anothers_role(tmp_path: Path) -> None:
    async with tenants(tmp_path, **PREEMPTION) as c:
        victim = await victim_everywhere(c)
        with pytest.raises(DriverError, match="may not register in role 'alice'"):
            await c.tenant("mallory", Tenant(declare=8), role="alice")
        assert c.running("alice") == 8
        assert victim.lowest_since_fair is not None


async def test_a_huge_declared_demand_gets_the_attacker_its_fair_share_and_no_more(
    tmp_path: Path,
) -> None:
    """Preemption fires for it, as it should, but only up to its fair share."""
    async with tenants(tmp_path, **PREEMPTION) as c:
        victim = await victim_everywhere(c)
        attacker = Tenant(declare=1_000_000)
        await c.tenant("mallory", attacker)
        await settle(c, lambda: c.running("mallory") >= FAIR)
        await rounds_later(c)

        assert c.running("mallory") <= FAIR + 1
        victim_kept_its_fair_share(c, victim)


async def test_a_demand_declared_and_never_used_costs_the_victim_nothing_below_its_share(
    tmp_path: Path,
) -> None:
    """The attacker declares a huge demand and declines every offer: preemption may take
    the victim's tasks above its fair share, never below it."""
    async with tenants(tmp_path, **PREEMPTION) as c:
        victim = await victim_everywhere(c)
        attacker = Tenant(declare=1_000_000, launch=False)
        await c.tenant("mallory", attacker)
        await settle(c, lambda: attacker.offers >= 5)  # it was offered, and declined, plenty
        await rounds_later(c)
        assert c.running("mallory") == 0
        victim_kept_its_fair_share(c, victim)


async def test_holding_offers_unanswered_gains_nothing_with_an_offer_timeout(
    tmp_path: Path,
) -> None:
    """The attacker comes first and sits on every offer it gets; the offer timeout takes
    them back and the victim gets its fair share, then the whole cluster. (As Mesos, a
    timed-out offer was offered straight back: to the one that let it time out, first
    again in the DRF order with its share at 0, so a framework that never answers, hung
    or hostile, kept every free resource from the others. Here it counts as declined,
    for longer each time in a row.)"""
    async with tenants(tmp_path, offer_timeout=0.5) as c:
        attacker = Tenant(answer=False)
        await c.tenant("mallory", attacker)
        await settle(c, lambda: attacker.offers >= 1)
        victim = Tenant()
        await c.tenant("alice", victim)
        await settle(c, lambda: c.running("alice") >= FAIR)
        await settle(c, lambda: c.running("alice") == 8)  # all of it: mallory runs nothing
        seen = attacker.offers
        await rounds_later(c)
        assert attacker.offers <= seen + 2  # (its filters outlast a few rounds)
        assert c.running("mallory") == 0  # what it holds it cannot use: offers time out
        victim_kept_its_fair_share(c, victim)


async def test_a_long_failover_timeout_is_cut_to_the_operators_cap(tmp_path: Path) -> None:
    """The attacker asks to keep its tasks a year after it goes away, then goes away: the
    master keeps them only as long as the operator allows, then they are freed."""
    async with tenants(tmp_path, max_failover_timeout=0.5) as c:
        attacker = Tenant(most=FAIR)
        driver = await c.tenant("mallory", attacker, failover_timeout=365 * 86400.0)
        await settle(c, lambda: c.running("mallory") == FAIR)
        fw = c.master.books.frameworks[driver.framework_id or ""]
        assert fw.failover_timeout == 0.5
        assert c.master.registry.frameworks[fw.framework_id].failover_timeout == 0.5
        # its connection drops (the broker publishes its Last Will), its tasks kept for now
        assert driver.bus is not None
        gone = Gone(kind="framework", id=driver.inbox_id, incarnation=driver.bus.incarnation)
        await driver.bus.publish(T.gone("framework", "mallory"), gone)
        driver.stop(failover=True)
        await driver._close()
        await settle(c, lambda: fw.framework_id not in c.master.books.frameworks)
        await victim_everywhere(c)  # and the victim has the whole cluster


async def test_many_frameworks_of_one_tenant_share_its_roles_fair_share(tmp_path: Path) -> None:
    """Fairness is between roles, as in Mesos: three frameworks of the tenant's (under
    three principals of its, all in its role), there before the victim and holding all of
    the cluster, end with the role's half between them, not three quarters: preemption
    gives the victim its half back. (Under one principal they could not even run side by
    side: the broker gives a principal one connection, and a second one takes the
    first's over.)"""
    async with tenants(tmp_path, **PREEMPTION) as c:
        attackers = [Tenant(declare=8) for _ in range(3)]
        principals = ("mallory", "mallory-2", "mallory-3")
        for principal, attacker in zip(principals, attackers, strict=True):
            await c.tenant(principal, attacker, role="mallory")
        await settle(c, lambda: c.running("mallory") == 8)
        victim = Tenant(declare=8)
        await c.tenant("alice", victim)
        await settle(c, lambda: c.running("alice") >= FAIR)
        await rounds_later(c)
        assert c.running("mallory") <= FAIR + 1
        victim_kept_its_fair_share(c, victim)


async def test_a_tenant_registers_no_more_frameworks_than_the_operator_allows(
    tmp_path: Path,
) -> None:
    """Registering thousands of frameworks (each kept, and offered to, until it goes) once
    slowed the master for every tenant: a principal has at most the operator's number
    registered at once; a retry of one of them, or one that replaces a torn-down one,
    is no new one."""
    async with tenants(tmp_path, max_frameworks_per_principal=3) as c:
        raw = await open_transport(c.stack, c.connect("mallory"), "mallory")
        answers = Inbox()
        await raw.subscribe(T.outbox("framework", "mallory") + "/#", answers)
        calls = T.inbound("framework", "mallory")

        def subscribe(n: int) -> Subscribe:
            return Subscribe(name=f"ghost-{n}", role="mallory", inbox=f"g{n}")

        for n in range(5):
            await raw.publish(calls, subscribe(n))
        refused = await answers.wait_count(Error, 2)
        assert {e.code for e in refused} == {"too-many-frameworks"}
        assert "--max-frameworks-per-principal" in refused[0].message
        first = await answers.wait_count(Subscribed, 3)
        assert c.master.books.principal_frameworks["mallory"] == 3
        await raw.publish(calls, subscribe(0))  # a retry: answered again, the same one
        assert (await answers.wait_count(Subscribed, 4))[-1].framework_id == first[0].framework_id
        await raw.publish(calls, Teardown(framework_id=first[1].framework_id))
        await eventually(lambda: c.master.books.principal_frameworks["mallory"] == 2)
        await raw.publish(calls, subscribe(9))  # in the place of the one torn down
        await answers.wait_count(Subscribed, 5)
        assert c.master.books.principal_frameworks["mallory"] == 3
        assert [e.code for e in answers.of(Error)].count("too-many-frameworks") == 2
        await c.tenant("alice", Tenant())  # another principal's are its own to count
        assert c.master.books.principal_frameworks["alice"] == 1


async def test_a_removed_principals_frameworks_are_disconnected_will_or_none(
    tmp_path: Path,
) -> None:
    """`drfmesos auth remove`: a framework whose connection left no Last Will (a client
    of its own) was kept active, and offered the whole cluster, until torn down."""
    async with tenants(tmp_path, max_failover_timeout=0.5) as c:
        raw = await open_transport(c.stack, c.connect("mallory"), "mallory")  # no Will
        answers = Inbox()
        await raw.subscribe(T.outbox("framework", "mallory") + "/#", answers)
        subscribe = Subscribe(name="no-will", role="mallory", inbox="g", failover_timeout=60)
        await raw.publish(T.inbound("framework", "mallory"), subscribe)
        framework_id = (await answers.wait_for(Subscribed)).framework_id
        victim = await c.tenant("alice", Tenant())
        c.store.remove("mallory")
        fw = c.master.books.frameworks[framework_id]
        await eventually(lambda: not fw.connected, timeout=10)  # (re-read each second)
        await eventually(lambda: framework_id not in c.master.books.frameworks, timeout=10)
        assert c.master.books.frameworks[victim.framework_id or ""].connected


async def test_drfmesos_weights_set_and_list_as_an_operator(tmp_path: Path) -> None:
    """The commands an operator types, over the same broker and credentials as quota."""
    async with tenants(tmp_path, real=True) as c:
        broker = f"mqtts://ops@{c.url.host}:{c.url.port}"
        creds = ["--broker", broker, "--secret-file", str(c.store.secret_file("ops"))]
        creds += ["--ca", c.url.ca or "", "--cluster", T.cluster]

        async def drfmesos(*args: str) -> tuple[int, str]:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cluster", *args, *creds,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
            out, _ = await proc.communicate()
            return proc.returncode or 0, out.decode()

        code, out = await drfmesos("weights", "set", "alice=2,eng/batch=3")
        assert code == 0, out
        assert c.master.allocator.roles.weight("alice") == 2
        assert c.master.allocator.roles.weight("eng/batch") == 3
        await eventually(lambda: c.master.views.state().roles != [])
        code, out = await drfmesos("weights", "list")
        assert code == 0, out
        assert "alice=2" in out
        code, out = await drfmesos("weights", "set", "alice=-1")
        assert code != 0
        assert "a weight in (0, 1e6]" in out


async def test_a_removed_principal_is_taken_no_call_until_it_is_added_back(
    tmp_path: Path,
) -> None:
    """Its connection may outlive `drfmesos auth remove` (the broker's reload comes later,
    or a client keeps its session): its framework was disconnected, and re-subscribing
    with its id brought it straight back. Now no call of its is taken; added back, it
    comes back to its framework."""
    async with tenants(tmp_path) as c:
        inbox = T.framework("mallory", "g")  # (its calls' reply_to)
        raw = await open_transport(c.stack, c.connect("mallory"), "mallory", inbox=inbox)
        answers = Inbox()
        await raw.subscribe(T.outbox("framework", "mallory") + "/#", answers)
        calls = T.inbound("framework", "mallory")
        subscribe = Subscribe(name="m", role="mallory", inbox="g", failover_timeout=60)
        await raw.publish(calls, subscribe)
        framework_id = (await answers.wait_for(Subscribed)).framework_id
        fw = c.master.books.frameworks[framework_id]
        c.store.remove("mallory")
        await eventually(lambda: not fw.connected, timeout=2)
        told = await answers.wait_for(Error, lambda e: e.code == "principal-removed")
        assert "not in the cluster's principals" in told.message

        again = subscribe.model_copy(update={"framework_id": framework_id})
        for call in (again, Revive(framework_id=framework_id)):
            seen = len(answers.of(Error))
            await raw.publish(calls, call)
            error = (await answers.wait_count(Error, seen + 1))[seen]
            assert "not in the cluster's principals" in error.message, call
        assert not fw.connected

        c.store.add("mallory", "framework", keep_secret=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2  # (the master looks at the store twice a second)
        while not fw.connected and loop.time() < deadline:  # as its driver retries
            await raw.publish(calls, again)
            with contextlib.suppress(AssertionError):
                await eventually(lambda: fw.connected, timeout=0.2)
        assert fw.connected
        assert answers.of(Subscribed)[-1].resubscribed
