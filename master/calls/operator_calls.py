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
from master.roles_file import QuotaSpec, RolesFile, RoleSpec, save_roles
from protocol.wire.codec import describe_validation
from protocol.wire.messages import SetQuota, SetWeights, WatchEvents, Watching


class OperatorCalls:
    """Constructed with the allocator they change, the registry they record in, the roles
    file they keep up to date (`roles`, written back to `roles_path` if there is one),
    and the outbox through which they refuse and say what they did."""

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
        self.roles, self.roles_path = roles, roles_path
        self.request_round, self.log = request_round, log

    async def on_set_quota(self, msg: SetQuota, caller: Caller) -> None:
        """Set or clear a role's quota; refused (and nothing changed) if it cannot be."""
        try:
            spec = QuotaSpec.model_validate({"guarantee": msg.guarantee, "limit": msg.limit})
        except ValidationError as e:
            self.outbox.refuse(
                caller, describe_validation(e), "invalid-quota", "SetQuota", role=msg.role
            )
            return
        clear = not msg.guarantee and msg.limit is None
        problem = self.allocator.roles.quota_problem(msg.role, None if clear else spec.quota())
        if problem:
            self.outbox.refuse(caller, problem, "invalid-quota", "SetQuota", role=msg.role)
            return
        if not await self.recorder.quota(msg.role, msg.guarantee, msg.limit, caller):
            return
        if clear:
            self.allocator.roles.remove_quota(msg.role)
        else:
            self.allocator.roles.set_quota(msg.role, spec.quota())
        current = self.roles.roles.get(msg.role) or RoleSpec(
            weight=self.allocator.roles.weight(msg.role)
        )
        self.roles.roles[msg.role] = current.model_copy(update={"quota": None if clear else spec})
        if self.roles_path is not None:  # kept in the roles file, as the issue of record
            await asyncio.to_thread(save_roles, self.roles_path, self.roles)
        unsatisfiable = self.allocator.roles.unsatisfiable().get(msg.role)
        detail = f"{msg.role}: " + (
            "cleared" if clear else f"guarantee {msg.guarantee or '-'}, limit {msg.limit or '-'}"
        )
        if unsatisfiable:
            detail += f" (unsatisfiable: {unsatisfiable})"
            self.log.warning("quota.unsatisfiable", role=msg.role, why=unsatisfiable)
        self.log.info("quota.set", role=msg.role, by=caller.principal, detail=detail)
        self.outbox.emit("quota", detail=detail)
        self.request_round()

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
        if self.roles_path is not None:  # kept in the roles file, as the issue of record
            await asyncio.to_thread(save_roles, self.roles_path, self.roles)
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
