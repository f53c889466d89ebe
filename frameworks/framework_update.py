"""A framework's update of itself, as its driver makes it (`driver.update_framework()`):
an `UpdateFramework` sent, and the master's `FrameworkUpdated` (or its refusal) awaited.
One at a time: each replaces all that the framework says of itself (`update_of`: what it
subscribes with, changed as asked), its capabilities (`capabilities_of`) among it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from frameworks.calls import listed
from frameworks.errors import DriverError
from protocol.transport.aio import within
from protocol.wire.messages import (
    Error,
    FrameworkCapability,
    FrameworkUpdated,
    OfferFilters,
    Subscribe,
    UpdateFramework,
    Wire,
)
from protocol.wire.resources import Resources


class Updater:
    def __init__(self, call: Callable[[Wire], None]) -> None:
        """`call`: sends a call to the master."""
        self._call = call
        self._lock = asyncio.Lock()
        self._answer: asyncio.Future[FrameworkUpdated] | None = None

    async def update(self, msg: UpdateFramework, timeout: float) -> FrameworkUpdated:
        async with self._lock:
            self._answer = answer = asyncio.get_running_loop().create_future()
            try:
                self._call(msg)
                try:
                    return await within(answer, timeout)
                except TimeoutError:
                    raise DriverError(
                        f"no answer from the master about the update in {timeout:g}s"
                    ) from None
            finally:
                self._answer = None

    async def on_answer(self, msg: FrameworkUpdated, _reply_to: str | None) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_result(msg)

    def on_error(self, msg: Error) -> bool:
        """The master refused our update: its caller hears why (True), or the error is
        about something else (False)."""
        if msg.about != UpdateFramework.TYPE:
            return False
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(DriverError(f"{msg.code}: {msg.message}"))
        return True


def capabilities_of(
    partition_aware: bool, task_killing: bool, shared_resources: bool, multi_role: bool
) -> list[FrameworkCapability]:
    wants = {
        "PARTITION_AWARE": partition_aware,
        "TASK_KILLING_STATE": task_killing,
        "SHARED_RESOURCES": shared_resources,
        "MULTI_ROLE": multi_role,
    }
    return [FrameworkCapability(c) for c, on in wants.items() if on]


def update_of(
    subscribed: Subscribe,
    *,
    name: str | None,
    roles: Iterable[str] | None,
    failover_timeout: float | None,
    min_offer: Iterable[Resources] | None,
    partition_aware: bool | None,
    task_killing: bool | None,
    shared_resources: bool | None,
) -> UpdateFramework:
    """The update that makes a framework, as it `subscribed`, what is given (what is not
    stays); its suppressed roles that it keeps stay suppressed. Roles given to a framework
    of one role are `DriverError`."""
    call = "update_framework"
    new_roles = subscribed.roles if roles is None else listed(roles, call, "roles", f"[{roles!r}]")
    if new_roles is not None and subscribed.roles is None:
        raise DriverError("update_framework: roles are a MULTI_ROLE framework's")
    now = set(new_roles) if new_roles is not None else set(subscribed.all_roles())
    caps = {c.value for c in subscribed.capabilities}
    capabilities = capabilities_of(
        "PARTITION_AWARE" in caps if partition_aware is None else partition_aware,
        "TASK_KILLING_STATE" in caps if task_killing is None else task_killing,
        "SHARED_RESOURCES" in caps if shared_resources is None else shared_resources,
        new_roles is not None,
    )
    if min_offer is not None:
        min_offer = listed(min_offer, call, "Resources", "[r]")
    filters = subscribed.offer_filters
    was = filters.min_allocatable if filters is not None else []
    minimum = was if min_offer is None else [r for r in min_offer if r]
    return UpdateFramework(
        framework_id=subscribed.framework_id or "",
        name=name or subscribed.name,
        role=subscribed.role,
        roles=new_roles,
        failover_timeout=subscribed.failover_timeout
        if failover_timeout is None
        else failover_timeout,
        offer_filters=OfferFilters(min_allocatable=minimum) if minimum else None,
        capabilities=capabilities,
        suppressed_roles=sorted(set(subscribed.suppressed_roles) & now),
    )
