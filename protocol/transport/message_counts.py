"""Messages received, by type, and what became of each: handled, refused (with the
Error's code), dropped, or failed (a handler bug). The master counts its calls with it
(master.http.metrics serves them, as Mesos's master/messages_*); every `Bus` counts what its
handlers are given (a slave's, a framework driver's) in `Bus.messages`.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

# The call being handled: set around a route, so that a refusal inside it (see
# master.outbox.Outbox.refuse) is the call's outcome. None outside a route.
_CURRENT: contextvars.ContextVar[_Outcome | None] = contextvars.ContextVar(
    "drfmesos_call_outcome", default=None
)


class _Outcome:
    __slots__ = ("code",)

    def __init__(self) -> None:
        self.code = ""  # the last refusal's code; "" if the call was handled


Route = Callable[[Any, Any], Awaitable[None]]


@dataclass
class MessageCounts:
    """Messages received by type, and their outcomes by (type, outcome, code): outcome
    is `handled`, `refused` (code: the Error's code), `dropped` (nobody to answer, or a
    principal the topic does not name) or `failed` (a handler bug, logged)."""

    received: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # each route's counted wrapper, made once (a party's routes are few and live as long)
    _counted: dict[tuple[Route, str], Route] = field(
        default_factory=dict, repr=False, compare=False
    )

    def refused(self, kind: str, code: str) -> None:
        """A refusal: the current call's outcome, or one of its own outside a route."""
        current = _CURRENT.get()
        if current is not None:
            current.code = code
        else:
            self.outcomes[(kind, "refused", code)] += 1

    def counted(self, route: Route, kind: str) -> Route:
        """`route`, its outcome counted when it runs (at once, or later by the throttle):
        made once a route and kind, not once a message."""
        made = self._counted.get((route, kind))
        if made is None:
            made = self._counted[route, kind] = self._count(route, kind)
        return made

    def _count(self, route: Route, kind: str) -> Route:
        async def run(message: Any, caller: Any) -> None:
            outcome = _Outcome()
            token = _CURRENT.set(outcome)
            try:
                await route(message, caller)
            except Exception:
                self.outcomes[(kind, "failed", "")] += 1
                raise
            finally:
                _CURRENT.reset(token)
            if outcome.code:
                self.outcomes[(kind, "refused", outcome.code)] += 1
            else:
                self.outcomes[(kind, "handled", "")] += 1

        return run
