"""A subscribed framework's UpdateFramework (Mesos 1.9's UPDATE_FRAMEWORK): what may
change of it, changed without subscribing again.

Everything a Subscribe says of it is replaced: its name, failover timeout (within the
operator's most), offer filters, capabilities and suppressed roles, and a MULTI_ROLE
framework's roles. Its outstanding offers are rescinded (told to it), as a re-subscription
has them. Not changed: its principal (the broker's word), a framework of one role's role,
and whether it is MULTI_ROLE. A role may come if its principal may use it; a role may go
only once the framework holds nothing in it -- Mesos keeps a framework in a role it left
until its tasks there end; here the update is refused, saying which tasks are there, so
that no task's resources are ever counted in a role its framework is not in.

The new record is written to the registry before anything changes, in the background:
the intake reads everybody's calls meanwhile. Then it is checked again (the framework's
own calls went on), made, and the framework told `FrameworkUpdated`, so a new leader
knows its roles; an update refused at either check, or whose write fails, changes
nothing (its old record written back if the second check refuses it). One update of a
framework at a time.
"""

from __future__ import annotations

from typing import Any

from master.allocation.allocator import Allocator, AllocatorError
from master.authz import Caller, RoleACL
from master.books import Books, Framework
from master.calls.framework_calls import framework_of_caller
from master.calls.subscribe import Subscriptions
from master.ha.recorder import Recorder
from master.ha.registry import FrameworkRecord
from master.outbox import Outbox
from protocol.wire.messages import FrameworkUpdated, UpdateFramework

ABOUT = "UpdateFramework"
NAMED_TASKS = 3  # of a role's tasks that keep it, named in the refusal (the rest counted)


class FrameworkUpdates:
    def __init__(
        self,
        books: Books,
        allocator: Allocator,
        subscriptions: Subscriptions,
        recorder: Recorder,
        outbox: Outbox,
        acl: RoleACL,
        *,
        log: Any,
    ) -> None:
        """`subscriptions`: what a Subscribe sets of a framework, set the same way here."""
        self.books, self.allocator, self.subscriptions = books, allocator, subscriptions
        self.recorder, self.outbox, self.acl, self.log = recorder, outbox, acl, log
        self._writing: set[str] = set()  # frameworks whose update is being written

    async def on_update_framework(self, msg: UpdateFramework, caller: Caller) -> None:
        """Checked, then written to the registry in the background (the intake reads
        everybody's calls meanwhile: a tenant's updates held them all for a ZooKeeper
        write each, review 84), then checked again and made, and told; refused at
        either check, or if the write fails, with nothing changed."""
        fw = framework_of_caller(self.books, self.outbox, msg.framework_id, caller, ABOUT)
        if fw is None:
            return
        fid = fw.framework_id
        problem = self._problem(fw, msg, caller) or self._busy(fid)
        if problem is not None:
            code, why = problem
            self.outbox.refuse(caller, why, code, ABOUT, framework_id=fid)
            return
        roles = msg.roles
        record = FrameworkRecord(
            principal=fw.principal,
            name=msg.name,
            role=roles[0] if roles else fw.role,
            roles=list(roles) if roles else None,
            failover_timeout=self.subscriptions.failover_timeout(msg.failover_timeout),
        )
        was = FrameworkRecord(
            principal=fw.principal,
            name=fw.name,
            role=fw.role,
            roles=fw.roles,
            failover_timeout=fw.failover_timeout,
        )
        self._writing.add(fid)

        async def update() -> None:
            try:
                written = await self.recorder.framework(fid, record, caller, ABOUT)
            finally:
                self._writing.discard(fid)
            if written:
                self._apply(msg, caller, record, was)

        self.recorder.in_background(update(), ABOUT, framework_id=fid)

    def _busy(self, framework_id: str) -> tuple[str, str] | None:
        if framework_id not in self._writing:
            return None
        return "busy", f"framework {framework_id} has an update on its way: one at a time"

    def _apply(
        self, msg: UpdateFramework, caller: Caller, record: FrameworkRecord, was: FrameworkRecord
    ) -> None:
        """The update is in the registry: made, unless the framework went meanwhile or
        now holds something in a role it leaves (its calls went on while it was written):
        then refused, and the record it had written back."""
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is None:
            return  # (removed meanwhile: its record is dropped with it)
        problem = self._problem(fw, msg, caller)
        if problem is None:
            self.subscriptions.take_offers_back(fw, tell=True)  # (a left role's: these)
            if record.roles is not None and record.roles != fw.roles:
                try:
                    self.allocator.set_roles(fw.framework_id, record.roles)
                except AllocatorError as e:  # (a dying task's resources, not yet back)
                    problem = ("role-in-use", str(e))
        if problem is not None:
            code, why = problem
            self.outbox.refuse(caller, why, code, ABOUT, framework_id=fw.framework_id)
            quiet = Caller(caller.kind, caller.principal, None)  # (refused once already)

            async def restore() -> None:
                await self.recorder.framework(fw.framework_id, was, quiet, ABOUT)

            self.recorder.in_background(restore(), ABOUT, framework_id=fw.framework_id)
            return
        subs = self.subscriptions
        fw.roles, fw.role = record.roles, record.role
        fw.name, fw.failover_timeout = record.name, record.failover_timeout
        subs.set_offer_filters(fw.framework_id, msg.offer_filters)
        subs.set_suppression(fw, msg.suppressed_roles)
        subs.set_capabilities(fw, msg.capabilities)
        self.outbox.send_framework(
            fw, FrameworkUpdated(framework_id=fw.framework_id, roles=fw.all_roles())
        )
        self.log.info(
            "framework.updated",
            framework_id=fw.framework_id,
            principal=fw.principal,
            name=fw.name,
            roles=fw.all_roles(),
        )
        self.outbox.emit("updated", framework_id=fw.framework_id, detail=fw.name)
        subs.request_round()

    def _problem(
        self, fw: Framework, msg: UpdateFramework, caller: Caller
    ) -> tuple[str, str] | None:
        """(code, why) if this update may not go ahead (None: it may)."""
        if not msg.name.isprintable():  # it reaches executors' environments
            return "invalid", "framework name must not contain control characters"
        if (fw.roles is None) != (msg.roles is None):
            return "invalid", (
                f"framework {fw.framework_id} is "
                + ("not " if fw.roles is None else "")
                + "MULTI_ROLE, and stays so (register a new framework to change it)"
            )
        if msg.roles is None and msg.role not in ("*", fw.role):
            return "invalid", (
                f"framework {fw.framework_id} is in role {fw.role}: a framework of one role "
                "keeps it (a MULTI_ROLE framework's roles may change)"
            )
        roles = msg.roles if msg.roles is not None else [fw.role]
        for role in roles:
            if role in fw.all_roles():
                continue
            if why := self.allocator.roles.problem(role):
                return "invalid", why
            if why := self.acl.check(caller.principal, role):
                return "role-refused", why  # (the principal may not: a 403 over HTTP)
        if others := sorted(set(msg.suppressed_roles) - set(roles)):
            return "invalid", (
                f"suppressed_roles names roles the framework is not in: {', '.join(others)} "
                f"(its roles: {', '.join(roles)})"
            )
        for role in [r for r in fw.all_roles() if r not in roles]:
            if held := self._holding(fw, role):
                return "role-in-use", (
                    f"framework {fw.framework_id} still runs {held} in role {role}: a role "
                    "may go once its tasks and executors there have ended"
                )
        return None

    @staticmethod
    def _holding(fw: Framework, role: str) -> str:
        """What of the framework's holds resources in `role` ("" if nothing does): its
        live and unreachable tasks there, and its executors."""
        tasks = sorted(
            t.task_id
            for t in (*fw.tasks.values(), *fw.unreachable.values())
            if not t.terminal and fw.role_of(t.info) == role
        )
        executors = sum(1 for r in fw.executor_roles.values() if r == role)
        said = []
        if tasks:
            named = ", ".join(tasks[:NAMED_TASKS])
            more = f" and {len(tasks) - NAMED_TASKS} more" if len(tasks) > NAMED_TASKS else ""
            said.append(f"task{'s' if len(tasks) > 1 else ''} {named}{more}")
        if executors:
            said.append(f"{executors} executor{'s' if executors > 1 else ''}")
        return " and ".join(said)
