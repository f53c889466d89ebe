"""The check both drivers make of the callbacks a framework author wrote, before calling any.

A driver awaits each callback by our name (`resource_offers`, `launch_task`): one written
`def` fails at every call, inside the driver, and one named as pymesos names it
(`resourceOffers`, `launchTask`) is never called. `SchedulerDriver` and `ExecutorDriver`
refuse either as they are made, saying what to write instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping


def problem(
    user: object, base: type, pymesos_names: Mapping[str, str], pymesos_way: str
) -> str | None:
    """Why a driver could not call `user`'s callbacks (those `base` defines), or None: one
    written `def`, or one named as pymesos names it (`pymesos_names`: its name -> ours)
    where ours is not overridden. `pymesos_way`: how code written for pymesos runs as it
    is (said beside the name to use)."""
    kind = type(user).__name__
    for name in vars(base):
        if not name.startswith("_") and not inspect.iscoroutinefunction(getattr(user, name)):
            return f"{kind}.{name} must be `async def`: the driver awaits each callback"
    for camel, ours in pymesos_names.items():
        if hasattr(user, camel) and getattr(type(user), ours) is getattr(base, ours):
            return (
                f"{kind} defines {camel}, pymesos's name, which the driver never calls: "
                f"name it {ours} (`async def`; {pymesos_way})"
            )
    return None
