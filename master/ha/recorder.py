"""The registry as the call handlers write it: what must survive a failover is recorded
before the call is acknowledged (refused, nothing changed, if the registry cannot take
it); a removal, which nobody can wait for, is recorded in the background (a failure
logged)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from master.authz import Caller
from master.ha.registry import FrameworkRecord, MaintenanceRecord, RecordTooLarge, Registry
from master.outbox import Outbox
from protocol.wire.resources import Limit, Resources


class Recorder:
    def __init__(self, registry: Registry, outbox: Outbox, log: Any) -> None:
        self._registry, self._outbox, self._log = registry, outbox, log
        self._writes: set[asyncio.Task[None]] = set()  # writes nobody waits for

    # -- recorded before the answer ----------------------------------------------------------
    async def framework(
        self, framework_id: str, record: FrameworkRecord, caller: Caller, about: str = "Subscribe"
    ) -> bool:
        """A framework subscribed, or updated (True), or the call refused (False)."""
        return await self._recorded(
            self._registry.add_framework(framework_id, record), caller, about
        )

    async def quotas(
        self, quotas: dict[str, tuple[Resources, Limit | None]], caller: Caller, about: str
    ) -> bool:
        """Roles' quotas (guarantee, limit), all or none."""
        return await self._recorded(self._registry.set_quotas(quotas), caller, about)

    async def weights(self, weights: dict[str, float], caller: Caller) -> bool:
        return await self._recorded(self._registry.set_weights(weights), caller, "SetWeights")

    async def maintenance(
        self, slave_id: str, record: MaintenanceRecord | None, caller: Caller, about: str
    ) -> bool:
        """A slave deactivated or draining (`record`), or back in the offers (None)."""
        write = (
            self._registry.end_maintenance(slave_id)
            if record is None
            else self._registry.set_maintenance(slave_id, record)
        )
        return await self._recorded(write, caller, about)

    def slave_known(self, slave_id: str, principal: str, hostname: str) -> bool:
        """Whether the slave is recorded so already (admitting it again writes nothing)."""
        return self._registry.has_slave(slave_id, principal, hostname)

    async def slave(self, slave_id: str, principal: str, hostname: str, caller: Caller) -> bool:
        """A new slave admitted (True), or its Register refused (False)."""
        write = self._registry.admit_slave(slave_id, principal, hostname)
        return await self._recorded(write, caller, "Register")

    async def _recorded(self, write: Coroutine[Any, Any, None], caller: Caller, about: str) -> bool:
        try:
            await write
        except RecordTooLarge as e:  # (the sender's to shorten: saying so, not "try again")
            self._log.warning("registry.too_large", about=about, key=e.key[:240], size=e.size)
            self._outbox.refuse(caller, str(e), "too-large", about)
            return False
        except Exception as e:
            self._log.error("registry.write_failed", about=about, error=repr(e))
            why = "the registry is unavailable: try again"
            self._outbox.refuse(caller, why, "unavailable", about)
            return False
        return True

    # -- recorded in the background ----------------------------------------------------------
    def forget_framework(
        self,
        framework_id: str,
        principal: str,
        why: str,
        role: str = "",
        roles: list[str] | None = None,
    ) -> None:
        """Its record dropped, and its removal kept (a new leader refuses it too, and
        holds its tasks a slave brings back dying in its roles)."""
        write = self._registry.remove_framework(framework_id, principal, why, role, roles)
        self.in_background(write, "remove framework", framework_id=framework_id)

    def forget_slave(self, slave_id: str) -> None:
        self.in_background(self._registry.remove_slave(slave_id), "remove slave", slave_id=slave_id)

    def drained(self, slave_id: str, record: MaintenanceRecord) -> None:
        write = self._registry.set_maintenance(slave_id, record)
        self.in_background(write, "slave drained", slave_id=slave_id)

    def forget_maintenance(self, slave_id: str) -> None:
        write = self._registry.end_maintenance(slave_id)
        self.in_background(write, "end maintenance", slave_id=slave_id)

    def in_background(self, step: Coroutine[Any, Any, None], what: str, **ids: Any) -> None:
        """A step nobody waits for (a write, or what follows one): its failure logged."""

        async def guarded() -> None:
            try:
                await step
            except Exception as e:
                self._log.error("registry.write_failed", what=what, error=repr(e), **ids)

        task = asyncio.create_task(guarded())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
