"""A framework's Subscribe: who may register which framework, in which role, and whose a
framework id is when a framework subscribes naming one.

The master's books say whose each framework it knows is. One it does not know (a master
restarted without its registry) is the subscribing principal's if the id carries proof
that the cluster gave it to that principal (master.framework_ids) and no slave says the
framework's tasks are another principal's (`Reregister.owners`); the tasks slaves
brought back before their framework did (orphans) then go to it, but for those a slave
says are another's. Every other claim, to another principal's framework or to an id
nobody has, is answered alike: no principal learns which ids exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from master.allocation.allocator import Allocator
from master.authz import Caller, RoleACL
from master.books import Books, Framework, Task
from master.calls.framework_calls import FAILED_OVER
from master.config import MasterConfig, MasterInfo
from master.cycle import OfferCycle
from master.framework_ids import FrameworkIds
from master.ha.recorder import Recorder
from master.ha.registry import FrameworkRecord
from master.offers import OfferBook
from master.outbox import Outbox
from master.updates import TaskUpdates
from protocol.transport.aio import loop_time
from protocol.wire.ids import check_id, shorten
from protocol.wire.messages import (
    Error,
    FrameworkCapability,
    OfferFilters,
    Subscribe,
    Subscribed,
)
from protocol.wire.reservations import is_shared
from protocol.wire.topics import MAX_REPLY_TOPIC, Topics, check_segment


class Subscriptions:
    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        cycle: OfferCycle,
        outbox: Outbox,
        updates: TaskUpdates,
        recorder: Recorder,
        offers: OfferBook,
        *,
        topics: Topics,
        acl: RoleACL,
        ids: FrameworkIds,
        config: MasterConfig,
        info: MasterInfo,
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        """`topics`: where a framework's inbox is; `acl`: who may use which role; `ids`:
        the framework ids the cluster gives; `config`: the most frameworks a principal
        may have, failover timeouts' most; `info`: what a framework is told of this master
        as it subscribes."""
        self.books, self.allocator, self.cycle = books, allocator, cycle
        self.outbox, self.updates, self.recorder = outbox, updates, recorder
        self.topics, self.acl, self.ids, self.config = topics, acl, ids, config
        self.info, self.offers = info, offers
        self.request_round, self.log = request_round, log
        # Subscribes whose records are being written, by (principal, inbox): the new
        # framework's id, or the known one's
        self._writing: dict[tuple[str, str], str] = {}

    def _rescind_shared(self, fw: Framework) -> None:
        """It subscribed again without SHARED_RESOURCES: its offers holding a shared volume
        are taken back (Mesos offers one only to frameworks that declared it)."""
        for offer_id in list(fw.offers):
            record = self.books.offers.get(offer_id)
            if record is not None and any(map(is_shared, record.resources.millis)):
                self.offers.rescind(record)

    async def on_subscribe(self, msg: Subscribe, caller: Caller) -> None:
        """A Subscribe is written to the registry before it is answered. A new
        framework's write goes on in the background, the calls after it read meanwhile
        (every principal's: a tenant's new frameworks held the master's intake for as long
        as a slow ZooKeeper took to write each); a retry from the same inbox meanwhile is
        the first's, whose answer answers both. A known framework's is waited for: its
        calls after it must find it subscribed again (its capabilities, its inbox)."""
        if (caller.principal, msg.inbox) in self._writing:
            return
        problem = self._problem(msg, caller)
        if problem is not None:
            code, why = problem
            self.outbox.refuse(caller, why, code, "Subscribe", framework_id=msg.framework_id)
            return
        books = self.books
        fw = books.frameworks.get(msg.framework_id or "")
        if fw is None and msg.framework_id is None:
            # the same inbox asking again (its first answer crossed a retry): same framework
            fw = books.frameworks.get(books.inboxes.get((caller.principal, msg.inbox), ""))
        framework_id = fw.framework_id if fw else msg.framework_id
        framework_id = framework_id or self.ids.new(caller.principal)
        roles = msg.all_roles()  # (a new framework's: one known keeps its roles)
        record = FrameworkRecord(
            principal=caller.principal,
            name=fw.name if fw else msg.name,
            role=fw.role if fw else roles[0],
            roles=fw.roles if fw else msg.roles,
            failover_timeout=self.failover_timeout(msg.failover_timeout),
        )
        write = self.recorder.framework(framework_id, record, caller)
        if fw is not None:  # (its calls after this one must find it subscribed: waited for)
            if await write:
                self._subscribed(msg, caller, framework_id, known=True)
            return
        writing = (caller.principal, msg.inbox)
        self._writing[writing] = framework_id

        async def subscribe() -> None:
            try:
                written = await write
            finally:
                del self._writing[writing]
            if written:
                self._subscribed(msg, caller, framework_id, known=False)

        self.recorder.in_background(subscribe(), "Subscribe", framework_id=framework_id)

    def _subscribed(self, msg: Subscribe, caller: Caller, framework_id: str, known: bool) -> None:
        """Its record is durable: into the books (what came meanwhile asked again), and
        told it is subscribed."""
        books, now = self.books, loop_time()
        fw = books.frameworks.get(framework_id)  # (it may have come, or gone, meanwhile)
        # torn down, or timed out, while its record was written (a framework known only by
        # its orphans too: its removal is in `books.removed`)
        if fw is None and (known or framework_id in books.removed):
            self.outbox.refuse(
                caller,
                f"framework {framework_id} was removed while it subscribed",
                "framework-removed",
                "Subscribe",
                framework_id=framework_id,
            )
            return
        if why := self.acl.unknown(caller.principal) or self.acl.check_roles(
            caller.principal, fw.all_roles() if fw else msg.all_roles()
        ):  # (the principals file re-read meanwhile)
            self.outbox.refuse(caller, why, "role-refused", "Subscribe", framework_id=framework_id)
            return
        roles = msg.all_roles()
        if fw is not None:
            self.take_offers_back(fw, tell=fw.inbox == msg.inbox)
            self._depose(fw, msg)
            books.inboxes.pop((fw.principal, fw.inbox), None)
            fw.inbox, fw.incarnation = msg.inbox, msg.incarnation
            fw.connected, fw.disconnected_at = True, None
            fw.failover_timeout = self.failover_timeout(msg.failover_timeout)
            books.inboxes[(fw.principal, fw.inbox)] = fw.framework_id
            self.allocator.activate(fw.framework_id)
            self.set_offer_filters(fw.framework_id, msg.offer_filters)
            self.set_suppression(fw, msg.suppressed_roles)
            resubscribed = True
        else:
            fw = Framework(
                framework_id=framework_id,
                principal=caller.principal,
                name=msg.name,
                role=roles[0],
                roles=msg.roles,
                inbox=msg.inbox,
                incarnation=msg.incarnation,
                failover_timeout=self.failover_timeout(msg.failover_timeout),
                registered_at=time.time(),
            )
            books.add_framework(fw)
            books.inboxes[(fw.principal, fw.inbox)] = framework_id
            self.allocator.add_framework(framework_id, roles[0], roles=msg.roles)
            self.set_offer_filters(framework_id, msg.offer_filters)
            self.set_suppression(fw, msg.suppressed_roles)
            self._adopt_orphans(fw)
            resubscribed = bool(msg.framework_id)
        self.set_capabilities(fw, msg.capabilities)
        self.outbox.send_framework(
            fw,
            Subscribed(
                framework_id=fw.framework_id,
                heartbeat_interval_seconds=self.info.heartbeat_interval,
                master_id=self.info.master_id,
                resubscribed=resubscribed,
                epoch=self.info.epoch,
            ),
        )
        # What it is owed goes now, in the order it was made, right behind the answer: a
        # task's update made after this (its end) must not overtake an older one (its
        # RUNNING), as it would if these waited for the retry timer.
        for pending in fw.pending.values():
            self.updates.resend(fw, pending, now)
        self.log.info(
            "framework.subscribed",
            framework_id=fw.framework_id,
            principal=fw.principal,
            name=fw.name,
            roles=fw.all_roles(),
            resubscribed=resubscribed,
        )
        self.outbox.emit("subscribed", framework_id=fw.framework_id, detail=fw.name)
        self.request_round()

    def take_offers_back(self, fw: Framework, *, tell: bool) -> None:
        """As Mesos's (re-)subscription of a framework it knows: its outstanding offers
        are taken back, what they held back to the pool, before it is offered anything.
        No instance of it knows of them: a new scheduler process never heard of them, and
        a driver forgets its offers as it subscribes (its answers to them may have been
        lost with its connection). Its connection is told of the rescinds if the same
        inbox subscribes again (`tell`); not a deposed process's (Mesos's
        failoverFramework removes them unsaid)."""
        for offer_id in list(fw.offers):
            self.offers.rescind(self.books.offers[offer_id], tell=tell)

    def _depose(self, fw: Framework, msg: Subscribe) -> None:
        """Another scheduler subscribes with the framework's id while its scheduler is
        connected (a standby taking over, a restart before the broker saw the old process
        go): the old one is told, as Mesos's failoverFramework tells it, "Framework failed
        over" (the SDK's driver stops; a Mesos API stream gets an ERROR event and closes),
        and its calls are refused from now on (`framework_calls.from_its_scheduler`)."""
        if not fw.connected or not fw.inbox or fw.inbox == msg.inbox:
            return  # (gone already, or the same scheduler subscribing again)
        self.log.info(
            "framework.failed_over",
            framework_id=fw.framework_id,
            principal=fw.principal,
            old_inbox=fw.inbox,
            new_inbox=msg.inbox,
        )
        error = Error(message="Framework failed over", code=FAILED_OVER, about=fw.framework_id)
        self.outbox.send_framework(fw, error)

    def set_suppression(self, fw: Framework, suppressed_roles: list[str]) -> None:
        """As Mesos since 1.9 (MESOS-9793): a (re-)subscription sets the framework's
        suppression to the roles it names suppressed, and no others. Suppression is its
        scheduler's own decision: a new process that says none is offered in every role,
        its predecessor's SUPPRESS forgotten (the SDK's driver names the roles it
        suppressed itself, so its reconnects keep them). An UpdateFramework's too."""
        fid, named = fw.framework_id, set(suppressed_roles)
        if fw.roles is None:  # (one role: the framework whole)
            if named:
                self.cycle.suppress(fid)
            elif self.allocator.suppressed(fid):
                self.cycle.unsuppress(fid)
            return
        off = [r for r in fw.all_roles() if r in named]
        on = [r for r in fw.all_roles() if r not in named and self.allocator.suppressed(fid, r)]
        if off:
            self.cycle.suppress(fid, off)
        if on:
            self.cycle.unsuppress(fid, on)

    def set_offer_filters(self, framework_id: str, filters: OfferFilters | None) -> None:
        # its own replace the master's minimum ([]: anything); none, the master's; a
        # multi-role framework's by role, each in its role (Mesos's map), the master's
        # in a role not named
        if filters is None or filters.by_role is None:
            minimum = filters.min_allocatable if filters else None
            self.cycle.set_offer_filters(framework_id, minimum)
            return
        self.cycle.set_offer_filters(framework_id, None)
        mine = self.allocator.clients.roles(framework_id) or ()
        for role, minimum in filters.by_role.items():
            if role in mine:  # (a role not its own filters nothing, as in Mesos)
                self.cycle.set_offer_filters(framework_id, minimum, [role])

    def set_capabilities(self, fw: Framework, capabilities: list[FrameworkCapability]) -> None:
        """What it hears and is offered, as its capabilities say (replaced each time)."""
        fw.partition_aware = FrameworkCapability.PARTITION_AWARE in capabilities
        fw.task_killing = FrameworkCapability.TASK_KILLING_STATE in capabilities
        shared = FrameworkCapability.SHARED_RESOURCES in capabilities
        if fw.shared_resources and not shared:
            self._rescind_shared(fw)
        fw.shared_resources = shared
        self.allocator.take_shared(fw.framework_id, shared)

    # -- may it? ----------------------------------------------------------------------------
    def _problem(self, msg: Subscribe, caller: Caller) -> tuple[str, str] | None:
        """(code, why) if this Subscribe may not go ahead."""
        try:
            check_segment(msg.inbox, "inbox")
            if msg.framework_id:
                check_id(check_segment(msg.framework_id, "framework_id"), "framework_id")
        except ValueError as e:
            return "subscribe-refused", str(e)
        inbox = self.topics.framework(caller.principal, msg.inbox)
        if len(inbox) > MAX_REPLY_TOPIC:  # (its calls name it as where answers go)
            return "subscribe-refused", (
                f"inbox topic {shorten(inbox)} is {len(inbox)} characters: at most "
                f"{MAX_REPLY_TOPIC}"
            )
        if not msg.name.isprintable():  # it reaches executors' environments
            return "subscribe-refused", "framework name must not contain control characters"
        if caller.kind != "framework":
            return "subscribe-refused", f"a {caller.kind} principal cannot register a framework"
        if why := self.acl.unknown(caller.principal):  # (removed: back for it)
            return "subscribe-refused", why
        if msg.framework_id and (claim := self._claim_problem(msg.framework_id, caller)):
            return claim
        fw = self.books.frameworks.get(msg.framework_id or "")
        if fw is None:
            for role in msg.all_roles():  # (every one: a role it may not use gains it nothing)
                why = self.allocator.roles.problem(role) or self.acl.check(caller.principal, role)
                if why is not None:
                    return "role-refused", why
            if why := self._one_too_many(msg, caller):
                return "too-many-frameworks", why
        elif why := self.acl.check_roles(caller.principal, fw.all_roles()):
            # (a role its principal lost since it registered: refused as a new one's)
            return "role-refused", why
        elif self._other_roles(msg, fw):
            return "role-refused", (
                f"framework {fw.framework_id} is in {', '.join(fw.all_roles())}: a "
                "re-subscription keeps its roles (UpdateFramework changes a MULTI_ROLE "
                "framework's: the SDK's update_framework)"
            )
        roles = fw.all_roles() if fw is not None else msg.all_roles()
        if others := sorted(set(msg.suppressed_roles) - set(roles)):
            return "subscribe-refused", (
                f"suppressed_roles names roles the framework is not in: {', '.join(others)} "
                f"(its roles: {', '.join(roles)})"
            )
        return self._weight_problem(msg, fw.role if fw else msg.all_roles()[0])

    @staticmethod
    def _other_roles(msg: Subscribe, fw: Framework) -> bool:
        """Whether a re-subscribe asks a multi-role framework's roles changed (a framework
        of one role re-subscribing with another keeps its own, as it always did)."""
        if msg.roles is not None:
            return msg.roles != fw.all_roles()
        return fw.roles is not None and msg.role != "*"

    def _one_too_many(self, msg: Subscribe, caller: Caller) -> str | None:
        """A new framework past its principal's most (a tenant registering thousands slowed
        the master for every other: each stays, and is offered to, until it goes)."""
        most = self.config.max_frameworks_per_principal
        books = self.books
        if not most or (caller.principal, msg.inbox) in books.inboxes:  # (its retry)
            return None
        writing = sum(
            1
            for (principal, _), fid in self._writing.items()
            if principal == caller.principal and fid not in books.frameworks
        )
        if books.principal_frameworks[caller.principal] + writing < most:
            return None
        return (
            f"principal {caller.principal} has {most} frameworks registered, the most it "
            "may (the master's --max-frameworks-per-principal): tear one down first"
        )

    def failover_timeout(self, asked: float) -> float:
        """What it asked for, no longer than the operator allows (a framework that goes
        away does not hold its tasks, and so its share, for as long as it likes)."""
        cap = self.config.max_failover_timeout
        return asked if cap is None else min(asked, cap)

    def _weight_problem(self, msg: Subscribe, role: str) -> tuple[str, str] | None:
        """A framework takes its role's weight; it may not set it (weights are operators')."""
        configured = self.allocator.roles.weight(role)
        if msg.weight is None or msg.weight == configured:
            return None
        return "subscribe-refused", (
            f"weight {msg.weight:g} asked for role {role}, whose weight is {configured:g}: "
            "a role's weight is set by an operator (drfmesos weights set); ask an operator"
        )

    # -- whose a framework id is ------------------------------------------------------------
    def _claim_problem(self, framework_id: str, caller: Caller) -> tuple[str, str] | None:
        """(code, why) if `caller` may not subscribe as `framework_id` (None: it may)."""
        books, principal = self.books, caller.principal
        fw = books.frameworks.get(framework_id)
        removed = books.removed.get(framework_id)
        if fw is not None:
            mine = fw.principal == principal
        elif removed is not None:
            if removed[0] == principal:
                return "framework-removed", f"Framework has been removed: {removed[1]}"
            mine = False
        else:  # unknown here (a master without its books): the id's proof, the slaves' word
            mine = self.ids.given_to(framework_id, principal) and (
                books.orphans.owners(framework_id) <= {principal}
            )
        if mine:
            return None
        return "subscribe-refused", (
            f"unknown framework {framework_id}: none of principal {principal}'s (subscribe "
            "without a framework id to register a new one)"
        )

    def _adopt_orphans(self, fw: Framework) -> None:
        """Its tasks, and idle executors, that slaves brought back before it did; those a
        slave says are another principal's stay orphans (SlaveCalls keeps them)."""
        for orphan in self.books.orphans.of(fw.framework_id):
            slave = self.books.slaves.get(orphan.slave_id)
            if orphan.principal not in (None, fw.principal) or slave is None:
                continue  # another principal's, by its slave's word
            self.books.orphans.remove(orphan)
            task = Task(orphan.task, fw.framework_id, orphan.slave_id, orphan.state)
            task.health_said(orphan.healthy)  # (its slave's verdict, said as it came back)
            fw.tasks[task.task_id] = task
            fw.slaves_used.add(orphan.slave_id)
            slave.add_task(fw.framework_id, task.info)
            role = fw.role_of(orphan.task)
            self.allocator.adopt(fw.framework_id, orphan.slave_id, orphan.held, role)
            executor = orphan.task.executor  # (held with its first task, and now its)
            if executor is not None:
                fw.keeps_executor((orphan.slave_id, executor.executor_id), executor.resources, role)
            self.outbox.task_changed(task)
        for idle in self.books.orphans.executors_of(fw.framework_id):
            if idle.principal not in (None, fw.principal) or idle.slave_id not in self.books.slaves:
                continue  # (another principal's, by its slave's word)
            self.books.orphans.remove_executor(idle)
            role = fw.all_roles()[0] if fw.roles is not None else None
            self.allocator.adopt(fw.framework_id, idle.slave_id, idle.resources, role)
            fw.slaves_used.add(idle.slave_id)
            if fw.keeps_executor(idle.key, idle.resources, role) and idle.group:
                fw.group_executors.add(idle.key)  # (a group may join it; a task not name it)
