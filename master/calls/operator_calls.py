"""What the master does with operators' calls beyond teardown: quota and weights at run
time, each recorded in the registry (so a new leader has it) and written back to the
roles file before it takes effect; and a lease on the event stream."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from master.allocation.allocator import Allocator
from master.authz import Caller
from master.ha.recorder import Recorder
from master.outbox import Outbox
from master.roles_file import (
    DEFAULT_ROLE,
    NO_DEFAULT_QUOTA,
    QuotaSpec,
    RolesFile,
    RolesFileKeeper,
    RoleSpec,
)
from protocol.wire.codec import describe_validation
from protocol.wire.messages import SetQuota, SetQuotas, SetWeights, WatchEvents, Watching


class OperatorCalls:
    """Constructed with the allocator they change, the registry they record in, the roles
    file they keep up to date (`roles`, written back to `roles_path` if there is one, by
    a `RolesFileKeeper`), and the outbox through which they refuse and say what they
    did."""

    def __init__(
        self,
        allocator: Allocator,
        recorder: Recorder,
        outbox: Outbox,
        roles: RolesFile,
        roles_path: Path | None,
        *,
        request_round: Callable[[], None],
        log: Any,
    ) -> None:
        self.allocator, self.recorder, self.outbox = allocator, recorder, outbox
        self.roles = roles
        self.roles_file = None if roles_path is None else RolesFileKeeper(roles_path, roles)
        self.request_round, self.log = request_round, log

    async def on_set_quota(self, msg: SetQuota, caller: Caller) -> None:
        """Set or clear a role's quota; refused (and nothing changed) if it cannot be."""
        await self._set_quotas([msg], caller, "SetQuota")

    async def on_set_quotas(self, msg: SetQuotas, caller: Caller) -> None:
        """Set or clear several roles' quotas, all or none (Mesos's UPDATE_QUOTA): each
        checked, and their guarantees' nesting together, before any is recorded."""
        await self._set_quotas(msg.quotas, caller, "SetQuotas")

    async def _set_quotas(self, asked: list[SetQuota], caller: Caller, about: str) -> None:
        specs: dict[str, QuotaSpec | None] = {}  # (None: cleared)
        for msg in asked:
            if msg.role == DEFAULT_ROLE and (msg.guarantee or msg.limit is not None):
                self.outbox.refuse(caller, NO_DEFAULT_QUOTA, "invalid-quota", about, role="*")
                return
            try:
                spec = QuotaSpec.model_validate({"guarantee": msg.guarantee, "limit": msg.limit})
            except ValidationError as e:
                self.outbox.refuse(
                    caller, describe_validation(e), "invalid-quota", about, role=msg.role
                )
                return
            specs[msg.role] = None if not msg.guarantee and msg.limit is None else spec
        changes = {role: None if spec is None else spec.quota() for role, spec in specs.items()}
        problem = self.allocator.roles.quotas_problem(changes)
        if problem:
            self.outbox.refuse(caller, problem, "invalid-quota", about, role=",".join(specs))
            return
        recorded = {msg.role: (msg.guarantee, msg.limit) for msg in asked}
        if not await self.recorder.quotas(recorded, caller, about):
            return  # (refused, saying so: nothing of it in the registry, nor here)
        for msg in asked:
            self._quota_set(msg, specs[msg.role], caller)
        await self._save_roles()
        self.request_round()

    async def _save_roles(self) -> None:
        """The roles file written anew, as the issue of record; an edit made by hand since
        is kept beside it, and said (the master reads the file only at its start)."""
        if self.roles_file is None:
            return
        aside = await asyncio.to_thread(self.roles_file.save, self.roles)
        if aside is not None:
            self.log.warning(
                "roles.file_edited",
                path=str(self.roles_file.path),
                kept=str(aside),
                detail="the roles file was edited while the master ran: the master reads it "
                "only at its start (drfmesos weights set / quota set change roles at run "
                "time); the edit is kept beside it",
            )

    def _quota_set(self, msg: SetQuota, spec: QuotaSpec | None, caller: Caller) -> None:
        """A role's quota, recorded, takes effect (None: cleared)."""
        if spec is None:
            self.allocator.roles.remove_quota(msg.role)
        else:
            self.allocator.roles.set_quota(msg.role, spec.quota())
        current = self.roles.roles.get(msg.role) or RoleSpec(
            weight=self.allocator.roles.weight(msg.role)
        )
        kept = current.model_copy(update={"quota": spec})
        if kept == RoleSpec():  # (nothing of its own left: out of the file, not `role: {}`)
            self.roles.roles.pop(msg.role, None)
        else:
            self.roles.roles[msg.role] = kept
        unsatisfiable = self.allocator.roles.unsatisfiable().get(msg.role)
        detail = f"{msg.role}: " + (
            "cleared"
            if spec is None
            else f"guarantee {msg.guarantee or '-'}, limit {msg.limit or '-'}"
        )
        if unsatisfiable:
            detail += f" (unsatisfiable: {unsatisfiable})"
            self.log.warning("quota.unsatisfiable", role=msg.role, why=unsatisfiable)
        self.log.info("quota.set", role=msg.role, by=caller.principal, detail=detail)
        self.outbox.emit("quota", detail=detail)

    async def on_set_weights(self, msg: SetWeights, caller: Caller) -> None:
        """Set roles' weights (Mesos's /weights); all or none: refused if any role cannot
        have one."""
        for role in msg.weights:
            problem = self.allocator.roles.problem(role)
            if problem:
                self.outbox.refuse(caller, problem, "invalid-weight", "SetWeights", role=role)
                return
        if not await self.recorder.weights(msg.weights, caller):
            return
        for role, weight in msg.weights.items():
            self.allocator.roles.set_weight(role, weight)
            current = self.roles.roles.get(role) or RoleSpec()
            self.roles.roles[role] = current.model_copy(update={"weight": weight})
        await self._save_roles()
        detail = ",".join(f"{role}={weight:g}" for role, weight in sorted(msg.weights.items()))
        self.log.info("weights.set", by=caller.principal, weights=detail)
        self.outbox.emit("weights", detail=detail)
        self.request_round()

    async def on_watch_events(self, msg: WatchEvents, caller: Caller) -> None:
        """Publish the event stream for the lease's seconds (this master's term only: a
        watcher renews it with a new leader)."""
        self.outbox.watch_events(msg.seconds)
        if caller.reply_to:  # (heard: a follower that hears nothing was not)
            self.outbox.send_topic(caller.reply_to, Watching(seconds=msg.seconds))
        self.log.debug("events.watched", by=caller.principal, seconds=msg.seconds)
