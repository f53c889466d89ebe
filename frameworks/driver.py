"""The SDK's `SchedulerDriver`: everything a framework sends and receives goes through it.

It subscribes, re-subscribes with its framework id after a disconnect (or a new leader:
`frameworks.master_link`), hands what arrives to the `Scheduler`'s callbacks one at a
time (`frameworks.callback_queue`), acknowledges status updates once `status_update`
returns (unless told not to), and refuses misuse -- launching on an offer that is gone, or
more than an offer holds -- with `DriverError` rather than a silent drop. The `Scheduler`
whose callbacks it calls, and the task helpers, are in `frameworks.scheduler`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterable
from typing import Literal

from frameworks import errors
from frameworks.callback_queue import CallbackQueue
from frameworks.calls import (
    accept_checked,
    acknowledgement,
    listed,
    made_at_once,
    outstanding_ids,
    reconcile_calls,
    unauthenticated_principal,
)
from frameworks.errors import DriverError
from frameworks.framework_update import Updater, capabilities_of, update_of
from frameworks.master_link import MasterLink
from frameworks.scheduler import Scheduler, callbacks_problem
from frameworks.task_files import TaskFiles
from frameworks.why import NO_OFFER_WARNING, NoOfferWatch, WhyAsker
from protocol import logs
from protocol.tooling.brokers import BrokerURL, broker_from_env
from protocol.transport.aio import cancel_and_wait, first_of
from protocol.transport.base import BusClosed, Connector, Transport
from protocol.transport.bus import MqttConnector
from protocol.transport.inbound import Dispatcher
from protocol.transport.leader import LeaderWatch
from protocol.wire.messages import (
    Decline,
    Error,
    Failure,
    Filters,
    FrameworkMessage,
    FrameworkUpdated,
    Gone,
    Heartbeat,
    Kill,
    KillPolicy,
    Message,
    Offer,
    OfferFilters,
    OfferOperation,
    Offers,
    Preempting,
    Request,
    Rescind,
    Revive,
    Subscribe,
    Subscribed,
    Suppress,
    TaskFileData,
    TaskGroup,
    TaskInfo,
    TaskRequest,
    TaskStatus,
    Teardown,
    Update,
    Wire,
)
from protocol.wire.resources import Resources
from protocol.wire.topics import Topics
from protocol.wire.why import Why


class SchedulerDriver:
    """Runs a `Scheduler` against a cluster; `await driver.run()` serves until `stop()`.
    Every call is sent when called and returns at once (it may be awaited; one written
    without `await` still happens); one the driver refuses raises `DriverError`."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        name: str,
        broker: str | BrokerURL | Connector | None = None,
        cluster: str | None = None,
        role: str | None = None,
        roles: Iterable[str] | None = None,
        weight: float | None = None,
        failover_timeout: float = 0.0,
        framework_id: str | None = None,
        implicit_acknowledgements: bool = True,
        min_offer: Iterable[Resources] = (),
        partition_aware: bool = False,
        task_killing: bool = False,
        shared_resources: bool = False,
        no_offer_warning: float | None = NO_OFFER_WARNING,
    ) -> None:
        """Connect to `broker` (`mqtt[s]://PRINCIPAL@host:port`, a `BrokerURL` with its CA
        and secret file, or a transport Connector) as framework `name` of `cluster`.
        Left out, or a URL without a secret, they come from the environment as the
        `drfmesos` command reads it: `DRFMESOS_BROKER` (else the local broker),
        `DRFMESOS_SECRET_FILE`, `DRFMESOS_CA` and `DRFMESOS_CLUSTER` (else `default`).

        `role`: the role to register in; by default the role named as the principal (the
        broker URL's user, which `drfmesos auth add` allows it unless the operator names
        others with `--roles`: then name one), or, without credentials, the framework's
        name. A secured cluster refuses a role its principal was not given (`RoleRefused`).
        `roles`: several roles, in place of `role` (Mesos's MULTI_ROLE): the framework is
        offered in each of them, every offer says which (`Offer.role`), and what it
        launches on an offer is that role's; `suppress_offers` and `revive_offers` then
        take roles. A secured cluster refuses the framework if any of them is not its
        principal's.

        `min_offer`: the smallest offers this framework can use (Mesos 1.10's offer_filters;
        `[Resources(cpus=0.1, mem=32)]`, your smallest task): the master offers no less, so
        no crumbs (memory and no CPU, say) to decline every few seconds.

        `implicit_acknowledgements`: acknowledge each status update when `status_update`
        returns (the default); with False, call `acknowledge_status_update` yourself, after
        you have recorded it, and the slave re-sends it until you do.

        `failover_timeout`: how long the master keeps this framework's tasks after its
        driver disconnects, for a successor that subscribes with `framework_id`.

        `partition_aware`: hear Mesos 1.1's finer states (TASK_DROPPED, TASK_UNREACHABLE,
        TASK_GONE, ...) in place of TASK_LOST (examples/task-states.md). `task_killing`:
        hear TASK_KILLING as a kill begins, before its grace (TASK_KILLING_STATE).
        `shared_resources`: be offered shared persistent volumes, even while tasks use
        them, and make them (SHARED_RESOURCES): several tasks then use one at once.

        `no_offer_warning`: after this many seconds wanting offers (subscribed, not
        suppressed, and not having declared it wants nothing) with none coming, the driver
        asks the master why and logs its first reason, once (None: never).

        `weight`: leave it out. A role's weight is the operator's (`drfmesos weights`); a
        weight other than the configured one is refused at subscribe."""
        if (problem := callbacks_problem(scheduler)) is not None:
            raise DriverError(problem)
        self.scheduler = scheduler
        self.name = name
        if broker is None or isinstance(broker, str):
            broker = broker_from_env(broker)
        # the MQTT bus, or any other transport (tests pass protocol.transport.memory's)
        self.broker = broker if isinstance(broker, BrokerURL) else None
        self._connect = MqttConnector(broker) if isinstance(broker, BrokerURL) else broker
        self.topics = Topics(cluster or os.environ.get("DRFMESOS_CLUSTER") or "default")
        self.weight = weight
        self.failover_timeout = failover_timeout
        self.framework_id = framework_id
        self.implicit_acknowledgements = implicit_acknowledgements
        self.min_offer = [r for r in listed(min_offer, "min_offer", "Resources", "[r]") if r]
        self.roles = None if roles is None else listed(roles, "roles", "roles", f"[{roles!r}]")
        self.capabilities = capabilities_of(
            partition_aware, task_killing, shared_resources, self.roles is not None
        )
        self._watching: asyncio.Task[None] | None = None  # for the bus giving up
        # who we are is the broker's username; without authentication, as a Mesos framework
        # names its own principal: its name (unproven, so it protects nothing)
        self.principal = self._connect.principal or unauthenticated_principal(name)
        self.role = role or self.principal  # as the CLI's frameworks: the principal's own
        if self.roles is not None:
            self.role = "*"  # (a multi-role framework's are its roles)
        self.inbox_id = f"fw-{uuid.uuid4().hex[:16]}"
        self.to_master = self.topics.inbound("framework", self.principal)
        self.removed: str | None = None  # why the master removed us, once it has
        self._refusal: type[DriverError] = errors.SubscribeRefused  # what start() raises then
        self.log = logs.get("driver", framework=name)
        self.offers: dict[str, Offer] = {}  # outstanding: offered and not yet used
        # the roles it suppressed (and has not revived): named as it subscribes again, as
        # the master sets its suppression to what a subscription names (Mesos 1.9's)
        self._suppressed: set[str] = set()
        self.bus: Transport | None = None
        self._stopped = asyncio.Event()
        self._teardown = True
        self._files = TaskFiles(self._call)  # reads of its tasks' sandbox files
        self._why = WhyAsker(self._call)  # questions about why offers do not come
        self._updater = Updater(self._call)  # its updates of itself, answered
        self._drought = NoOfferWatch(self.why, lambda: self.log, no_offer_warning or 0.0)
        self._drought_watch: asyncio.Task[None] | None = None  # runs it (if no_offer_warning)
        self._link = MasterLink(  # subscribed to the leading master, and hearing it
            bus=lambda: self.bus,
            to_master=self.to_master,
            subscription=self._subscription,
            stopped=self._stopped,
            lost=self._disconnected,
            log=lambda: self.log,
            cluster=self.topics.cluster,
            broker=f"the broker at {self.broker.bare}" if self.broker else "the broker",
        )
        self._callbacks = CallbackQueue(lambda: self.log)  # the scheduler's, one at a time

    @property
    def inbox(self) -> str:
        return self.topics.framework(self.principal, self.inbox_id)

    @property
    def master_id(self) -> str:
        """The master it subscribed with last ("" before it did)."""
        return self._link.master_id

    @property
    def master_epoch(self) -> int:
        """That master's epoch (its term as leader)."""
        return self._link.master_epoch

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, timeout: float = 30.0) -> None:
        """Connect and subscribe; returns once the master has answered. Else raises a
        `DriverError` saying why (`BrokerRefused`, `MasterUnreachable`, `RoleRefused`...)."""
        bus = self._connect(
            name=f"framework-{self.name}",
            inbox=self.inbox,
            will=(self.topics.gone("framework", self.principal), "framework", self.inbox_id),
        )
        d = Dispatcher(bus, "framework")
        d.on(Subscribed, self._callbacks.queued(self._on_subscribed))
        d.on(Offers, self._callbacks.queued(self._on_offers))
        d.on(Rescind, self._callbacks.queued(self._on_rescind))
        d.on(Update, self._callbacks.queued(self._on_update))
        d.on(FrameworkMessage, self._callbacks.queued(self._on_message))
        d.on(Failure, self._callbacks.queued(self._on_failure))
        d.on(Error, self._on_error_at_once)
        d.on(Heartbeat, self._link.on_heartbeat)
        d.on(Preempting, self._callbacks.queued(self._on_preempting))
        # answered at once, beside the callbacks: one of them may be awaiting it
        d.on(TaskFileData, self._files.on_answer)
        d.on(Why, self._why.on_answer)
        d.on(FrameworkUpdated, self._updater.on_answer)
        self._callbacks.start()
        if self._drought.after:
            self._drought_watch = asyncio.create_task(self._drought.run(), name="driver-no-offers")
        self._link.start()
        await bus.subscribe(self.inbox, d)
        await LeaderWatch.on(bus, self.topics, self._link.on_leader, beat=self._link.on_beat)
        bus.on_connect(self._link.subscribe)
        self.bus = bus
        try:
            await bus.start(timeout=timeout)
        except (BusClosed, TimeoutError) as e:  # one error family: see frameworks.errors
            await self._close()
            raise errors.connecting(e, str(self.broker or "the broker")) from e
        self._watching = asyncio.create_task(self._stop_if_given_up(bus), name="driver-bus")
        await first_of(self._link.subscribed, self._stopped, timeout=timeout)
        if self.removed is not None:
            await self._close()
            raise self._refusal(self.removed)
        if not self._link.subscribed.is_set():
            await self._close()
            raise errors.MasterUnreachable(
                f"no answer from a master of cluster {self.topics.cluster!r} in {timeout}s"
            )

    async def _stop_if_given_up(self, bus: Transport) -> None:
        """The bus will not connect again (another process took this principal over, or
        the broker refuses it now): the driver stops, and `removed` says why."""
        await bus.gave_up.wait()
        self.removed = str(bus.refused or "the broker connection ended for good")
        self._refusal = errors.BrokerRefused
        self._teardown = False  # (nothing to send it on)
        self._stopped.set()

    def _subscription(self, incarnation: str) -> Subscribe:
        """What it subscribes with (again, with its framework id, after a reconnect)."""
        return Subscribe(
            name=self.name,
            role=self.role,
            roles=self.roles,
            weight=self.weight,
            failover_timeout=self.failover_timeout,
            framework_id=self.framework_id,
            inbox=self.inbox_id,
            incarnation=incarnation,
            offer_filters=OfferFilters(min_allocatable=self.min_offer) if self.min_offer else None,
            capabilities=self.capabilities,
            suppressed_roles=sorted(self._suppressed),
        )

    async def _disconnected(self) -> None:
        self._drought.subscribed(False)
        await self.scheduler.disconnected(self)

    @made_at_once
    def stop(self, failover: bool = False) -> None:
        """Stop the driver: no more callbacks, and `run()`/`join()` disconnect and return.
        Without `failover` the framework is torn down (its tasks killed); with it, the
        master keeps its tasks for `failover_timeout` for a successor: it is told the
        driver went (as the broker tells it of a connection lost), takes back its offers
        and removes it if no successor subscribes with `framework_id` in that time."""
        self._teardown = not failover
        self._stopped.set()

    async def join(self) -> None:
        """Wait until `stop()` is called, then disconnect."""
        await self._stopped.wait()
        await self._close()

    async def run(self) -> None:
        """`start()` then `join()` (until `stop()`, or a removal: see `driver.removed`).

        Cancelled before `stop()` (Ctrl-C ends `asyncio.run` so), it goes as a process
        that died: a framework with a `failover_timeout` keeps its tasks for a successor
        for that long, as Mesos keeps a scheduler's whose process ends without a
        stop; one without is torn down."""
        try:
            await self.start()
            await self.join()
        except asyncio.CancelledError:
            if self.failover_timeout > 0 and not self._stopped.is_set():
                self._teardown = False
            raise
        finally:
            await self._close()

    async def _close(self) -> None:
        bus, self.bus = self.bus, None
        if bus is None:
            return
        await self._callbacks.close()
        if self._drought_watch is not None:
            await cancel_and_wait(self._drought_watch)
            self._drought_watch = None
        await self._link.close()
        if self._watching is not None and self._watching is not asyncio.current_task():
            await cancel_and_wait(self._watching)
        self._watching = None
        if self._teardown and self.framework_id and bus.connected:
            with contextlib.suppress(Exception):
                await bus.publish(
                    self.to_master, Teardown(framework_id=self.framework_id), timeout=5
                )
        elif self.framework_id and bus.connected:
            # gone without a teardown (stop(failover=True); stopped by the master): a
            # clean close sends no Last Will, so we send ours, and the master disconnects
            # the framework as for a connection lost (its offers back, its failover
            # timeout running); it ignores it if this is not the framework's connection
            # now (a process took it over, or it was removed)
            with contextlib.suppress(Exception):
                gone = Gone(kind="framework", id=self.inbox_id, incarnation=bus.incarnation)
                await bus.publish(self.topics.gone("framework", self.principal), gone, timeout=5)
        await bus.close()

    # -- calls ---------------------------------------------------------------------------------
    def _call_bus(self) -> Transport:
        if self.bus is None or self.framework_id is None:
            raise DriverError("the driver is not subscribed: call start() first")
        return self.bus

    def _call(self, call: Wire) -> None:
        """Send a call to the master without waiting for the broker, as the Mesos driver's
        calls return at once: the bus sends it at least once and in order with the other
        calls, across reconnects (`stop` waits for what is still on its way). A callback
        that makes several calls -- launch, then suppress -- is not held up by the broker's
        acknowledgement of each, nor are the events that follow it."""
        self._call_bus().post(self.to_master, call)

    @made_at_once
    def launch_tasks(
        self, offer_ids: Iterable[str], tasks: list[TaskInfo], filters: Filters | None = None
    ) -> None:
        """Use offers for `tasks`; what the tasks leave unused goes back with `filters`."""
        self._accept("launch_tasks", offer_ids, tasks, filters, [], [])

    @made_at_once
    def launch_group(
        self,
        offer_ids: Iterable[str],
        executor_id: str,
        tasks: list[TaskInfo],
        executor_resources: Resources | None = None,
        filters: Filters | None = None,
    ) -> None:
        """Launch `tasks` as one task group (Mesos's LAUNCH_GROUP with the default
        executor): all of them or none, on the offers' slave, under the executor
        `executor_id`, which the slave runs for them, holding `executor_resources` (taken
        from the offers too, unless that executor runs there already) until its last task
        ends. Each task is a command task (`build_task(..., command=...)`) and reports its
        own updates. One that fails or is killed has the others of its group killed
        (TASK_KILLED); one that finishes does not. An invalid group (one task too big, an
        id in use, ...) has every task of it end TASK_ERROR, REASON_TASK_GROUP_INVALID,
        and none runs."""
        group = TaskGroup(
            executor_id=executor_id,
            executor_resources=executor_resources or Resources(),
            tasks=listed(tasks, "launch_group", "tasks", "[task]"),
        )
        self._accept("launch_group", offer_ids, [], filters, [], [group])

    @made_at_once
    def accept_offers(
        self,
        offer_ids: Iterable[str],
        tasks: list[TaskInfo],
        filters: Filters | None = None,
        operations: list[OfferOperation] | None = None,
        groups: list[TaskGroup] | None = None,
    ) -> None:
        """`launch_tasks` by Mesos's newer name (see `calls.launch_checked`); with
        `operations` (RESERVE, UNRESERVE, CREATE, DESTROY, GROW_VOLUME, SHRINK_VOLUME:
        docs, reservations) applied to the offers first, in order, so the tasks may use
        what they make (not a resized volume: it comes in a later offer); and `groups`,
        task groups each launched all or none after the tasks (see `launch_group`)."""
        self._accept("accept_offers", offer_ids, tasks, filters, operations or [], groups or [])

    def _accept(
        self,
        call: str,  # the launch call made, which its refusals name
        offer_ids: Iterable[str],
        tasks: list[TaskInfo],
        filters: Filters | None,
        operations: list[OfferOperation],
        groups: list[TaskGroup],
    ) -> None:
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        self._call_bus()  # (subscribed, or DriverError)
        accept = accept_checked(
            call, self.framework_id, self.offers, offer_ids, tasks, filters, operations, groups
        )
        for o in accept.offer_ids:
            del self.offers[o]
        self._call(accept)

    @made_at_once
    def decline_offer(self, offer_id: str, filters: Filters | None = None) -> None:
        """Give an offer back; `Filters(refuse_seconds=60)`: not that slave again for 60 s."""
        self.decline_offers([offer_id], filters)

    @made_at_once
    def decline_offers(self, offer_ids: Iterable[str], filters: Filters | None = None) -> None:
        """Decline several offers in one call (Mesos's DECLINE takes a list), one filter."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        self._call_bus()  # (subscribed, or DriverError)
        ids = outstanding_ids(self.offers, offer_ids, "decline_offers")
        if not ids:
            return
        for o in ids:
            del self.offers[o]
        self._call(
            Decline(
                framework_id=self.framework_id or "", offer_ids=ids, filters=filters or Filters()
            ),
        )

    @made_at_once
    def revive_offers(self, roles: Iterable[str] = ()) -> None:
        """Offers again after `suppress_offers`, and the declines' filters cleared; a
        multi-role framework's in `roles` only (none: in every role; a role it is not in:
        `DriverError`)."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        roles = self._own_roles(roles, "revive_offers")
        self._call(Revive(framework_id=self.framework_id or "", roles=roles))
        self._suppressed -= set(roles or self._all_roles())
        self._drought.suppressed(False)

    @made_at_once
    def suppress_offers(self, roles: Iterable[str] = ()) -> None:
        """No offers until revive; also clears what `request_resources` declared. A
        multi-role framework's in `roles` only (none: in every role; only then is what it
        declared cleared; a role it is not in: `DriverError`)."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        roles = self._own_roles(roles, "suppress_offers")
        self._call(Suppress(framework_id=self.framework_id or "", roles=roles))
        self._suppressed |= set(roles or self._all_roles())
        if not roles or set(roles) >= set(self.roles or ()):
            self._drought.suppressed(True)

    def _all_roles(self) -> list[str]:
        return self.roles if self.roles is not None else [self.role]

    def _own_roles(self, roles: Iterable[str], about: str) -> list[str]:
        """`roles`, if each is this framework's (else `DriverError`: the master would
        refuse the call whole, as Mesos answers it 400). One role given alone is refused
        saying so (as its characters, it read as roles named "e", "n", "g")."""
        roles, mine = listed(roles, about, "roles", f"[{roles!r}]"), self._all_roles()
        others = sorted(set(roles) - set(mine))
        if others:
            raise DriverError(
                f"{about}: this framework is not in role(s) {', '.join(others)} "
                f"(its roles: {', '.join(mine)})"
            )
        return roles

    @made_at_once
    def request_resources(self, requests: Iterable[TaskRequest | tuple[Resources, int]]) -> None:
        """Tell the master what this framework still wants to run: task sizes with counts
        (Mesos's REQUEST, pymesos's requestResources). Each call replaces the last; an
        empty list clears it, and so does suppress. The master sets fair shares -- and,
        with preemption on, takes resources back for a starving framework -- by it;
        launching a task of a declared size counts one off."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        wanted = [
            r if isinstance(r, TaskRequest) else TaskRequest(resources=r[0], count=r[1])
            for r in requests
        ]
        self._call(Request(framework_id=self.framework_id or "", requests=wanted))
        self._drought.demand(any(r.count > 0 for r in wanted))

    @made_at_once
    def kill_task(
        self, task_id: str, slave_id: str | None = None, grace_period: float | None = None
    ) -> None:
        """Kill a task: it ends TASK_KILLED (SIGTERM, then SIGKILL after `grace_period`
        seconds, else its `kill_policy`'s, else its slave's `--kill-grace`)."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        policy = None if grace_period is None else KillPolicy(grace_period=grace_period)
        fid = self.framework_id or ""
        self._call(Kill(framework_id=fid, task_id=task_id, slave_id=slave_id, kill_policy=policy))

    @made_at_once
    def acknowledge_status_update(self, status: TaskStatus) -> None:
        """Needed only with implicit_acknowledgements=False (and only if status.uuid)."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        if not status.uuid:
            return
        self._call(acknowledgement(self.framework_id or "", status))

    @made_at_once
    def reconcile_tasks(self, tasks: Iterable[TaskStatus | str] = ()) -> None:
        """Ask for the latest state of tasks (by status or id); none means all of them.
        Any number: see `frameworks.calls.reconcile_calls`."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        for call in reconcile_calls(self.framework_id or "", tasks):
            self._call(call)

    @made_at_once
    def send_framework_message(self, executor_id: str, slave_id: str, data: bytes) -> None:
        """Opaque `data` to one of this framework's custom executors."""
        if self._stopped.is_set():
            return  # as the Mesos driver: calls after stop() do nothing
        self._call(
            Message(
                framework_id=self.framework_id or "",
                slave_id=slave_id,
                executor_id=executor_id,
                data=data,
            ),
        )

    async def read_file(
        self,
        task_id: str,
        name: Literal["stdout", "stderr"] = "stdout",
        *,
        offset: int = 0,
        length: int = 65536,
        timeout: float = 10.0,
    ) -> TaskFileData:
        """Read part of one of this framework's tasks' `stdout` or `stderr` from its
        sandbox, through the master (Mesos's agent files API): up to `length` bytes (at
        most 1 MB) from `offset`. The answer's `size` is the whole file's, so a follower
        reads again from `offset + len(data)`. A task that ended is readable while its
        slave keeps its sandbox. Raises DriverError when it cannot be read."""
        if self._stopped.is_set():
            raise DriverError("the driver is stopped")
        return await self._files.read(
            self.framework_id or "", task_id, name, offset, length, timeout
        )

    async def why(self, timeout: float = 10.0) -> Why:
        """Ask the master why this framework is offered nothing: its reasons, the one that
        explains first (`why.top`), each a code and the numbers behind it, and the offers
        it was made lately. Raises DriverError when the master does not answer."""
        if self._stopped.is_set():
            raise DriverError("the driver is stopped")
        self._call_bus()  # (not subscribed: DriverError)
        return await self._why.ask(self.framework_id or "", timeout)

    async def update_framework(
        self,
        *,
        name: str | None = None,
        roles: Iterable[str] | None = None,
        failover_timeout: float | None = None,
        min_offer: Iterable[Resources] | None = None,
        partition_aware: bool | None = None,
        task_killing: bool | None = None,
        shared_resources: bool | None = None,
        timeout: float = 10.0,
    ) -> list[str]:
        """Change what may change of this framework without subscribing again (Mesos
        1.9's UPDATE_FRAMEWORK); what is not given stays as it is. A MULTI_ROLE
        framework's `roles` may gain any role its principal may use, and lose one it holds
        nothing in (its tasks and executors there ended). Its outstanding offers are
        rescinded (`offer_rescinded`), and new ones come as it is now; its suppressed
        roles stay suppressed. Returns its roles now; raises DriverError saying why if the
        master refuses it (nothing changed then), or does not answer in `timeout`."""
        if self._stopped.is_set():
            raise DriverError("the driver is stopped")
        bus = self._call_bus()  # (not subscribed: DriverError)
        subscribed = self._subscription(bus.incarnation)  # what it is, to change
        msg = update_of(
            subscribed,
            name=name,
            roles=roles,
            failover_timeout=failover_timeout,
            min_offer=min_offer,
            partition_aware=partition_aware,
            task_killing=task_killing,
            shared_resources=shared_resources,
        )
        answer = await self._updater.update(msg, timeout)
        # what it subscribes with again (a reconnect, a new leader) is what it is now
        self.name, self.roles, self.capabilities = msg.name, msg.roles, msg.capabilities
        self.failover_timeout = msg.failover_timeout
        self.min_offer = msg.offer_filters.min_allocatable if msg.offer_filters else []
        now = set(msg.roles if msg.roles is not None else [msg.role])
        self._suppressed &= now
        left = sorted(set(subscribed.all_roles()) - now)
        self.log.info("framework.updated", roles=answer.roles, left=left)
        return answer.roles

    # -- events ----------------------------------------------------------------------------------
    async def _on_subscribed(self, msg: Subscribed, _r: str | None) -> None:
        first = self.framework_id is None
        if not self._link.answered(msg, self.framework_id):
            return  # the answer to a retry that crossed the first answer
        self.framework_id = msg.framework_id
        self.log = self.log.bind(framework_id=msg.framework_id)
        self.offers.clear()  # offers from before a reconnect were rescinded
        self._drought.subscribed()
        self.log.info("framework.subscribed", resubscribed=msg.resubscribed)
        if first and not msg.resubscribed:
            await self.scheduler.registered(self, msg.framework_id, msg.master_id)
        else:
            await self.scheduler.reregistered(self, msg.master_id)

    async def _on_offers(self, msg: Offers, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        for offer in msg.offers:
            self.offers[offer.offer_id] = offer
        self._drought.offered()
        await self.scheduler.resource_offers(self, msg.offers)

    async def _on_rescind(self, msg: Rescind, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        self.offers.pop(msg.offer_id, None)
        await self.scheduler.offer_rescinded(self, msg.offer_id)

    async def _on_update(self, msg: Update, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        await self.scheduler.status_update(self, msg.status)
        if (
            self.implicit_acknowledgements
            and msg.status.uuid
            and self.framework_id  # (none yet: the master would refuse it)
            and self.bus is not None
        ):
            self.bus.post(self.to_master, acknowledgement(self.framework_id, msg.status))

    async def _on_message(self, msg: FrameworkMessage, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        await self.scheduler.framework_message(self, msg.slave_id, msg.executor_id, msg.data)

    async def _on_failure(self, msg: Failure, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        if msg.executor_id is None:
            await self.scheduler.slave_lost(self, msg.slave_id)
        else:
            await self.scheduler.executor_lost(
                self, msg.executor_id, msg.slave_id, msg.status if msg.status is not None else -1
            )

    async def _on_error_at_once(self, msg: Error, reply_to: str | None) -> None:
        """An error about a question of ours goes to its asker at once (a callback may be
        awaiting it); any other reaches the scheduler in turn."""
        if not self._why.on_error(msg) and not self._updater.on_error(msg):
            await self._callbacks.queued(self._on_error)(msg, reply_to)

    async def _on_error(self, msg: Error, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        # a subscription refused is raised from start(): its caller says it, not the log
        refused = msg.code in errors.FATAL and not self._link.subscribed.is_set()
        (self.log.info if refused else self.log.warning)(
            "framework.error", message=msg.message, code=msg.code
        )
        if msg.code == "unknown-framework" and self.framework_id and self._link.subscribed.is_set():
            # a master that does not know us (a new leader we have not heard of yet)
            self._link.again()
        fatal = msg.code in errors.FATAL
        if fatal:  # as the Mesos driver: the framework is gone, so the driver stops
            self.removed = msg.message
            self._refusal = errors.FATAL[msg.code]
            self._teardown = False
        try:
            await self.scheduler.error(self, msg.message)
        finally:
            if fatal:
                self._stopped.set()

    async def _on_preempting(self, msg: Preempting, _r: str | None) -> None:
        if self._stopped.is_set():
            return  # stopped: no more callbacks
        self.log.info("framework.preempting", tasks=len(msg.tasks), deadline=msg.deadline_seconds)
        await self.scheduler.preempting(self, msg)
