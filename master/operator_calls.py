"""What the master does with operators' calls beyond teardown: quota at run time."""

from __future__ import annotations

import asyncio

from pydantic import ValidationError

from master.authz import Caller
from master.core import MasterCore
from master.roles_file import QuotaSpec, RoleSpec, save_roles
from protocol.codec import describe_validation
from protocol.messages import SetQuota


class OperatorCalls(MasterCore):
    async def _on_set_quota(self, msg: SetQuota, caller: Caller) -> None:
        """Set or clear a role's quota; refused (and nothing changed) if it cannot be."""
        try:
            spec = QuotaSpec.model_validate({"guarantee": msg.guarantee, "limit": msg.limit})
        except ValidationError as e:
            self._refuse(caller, describe_validation(e), "invalid-quota", "SetQuota", role=msg.role)
            return
        problem = self.allocator.role_problem(msg.role)
        if problem:
            self._refuse(caller, problem, "invalid-quota", "SetQuota", role=msg.role)
            return
        clear = not msg.guarantee and msg.limit is None
        if not await self._recorded(
            self.registry.set_quota(msg.role, msg.guarantee, msg.limit), caller, "SetQuota"
        ):
            return
        if clear:
            self.allocator.remove_quota(msg.role)
        else:
            self.allocator.set_quota(msg.role, spec.quota())
        current = self.roles.roles.get(msg.role) or RoleSpec(
            weight=self.allocator.role_weight(msg.role)
        )
        self.roles.roles[msg.role] = current.model_copy(update={"quota": None if clear else spec})
        if self.config.roles is not None:  # kept in the roles file, as the issue of record
            await asyncio.to_thread(save_roles, self.config.roles, self.roles)
        unsatisfiable = self.allocator.unsatisfiable().get(msg.role)
        detail = f"{msg.role}: " + (
            "cleared" if clear else f"guarantee {msg.guarantee or '-'}, limit {msg.limit or '-'}"
        )
        if unsatisfiable:
            detail += f" (unsatisfiable: {unsatisfiable})"
            self.log.warning("quota.unsatisfiable", role=msg.role, why=unsatisfiable)
        self.log.info("quota.set", role=msg.role, by=caller.principal, detail=detail)
        self._event("quota", detail=detail)
        self.request_round()
