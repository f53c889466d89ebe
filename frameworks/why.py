"""Why a framework is offered nothing, as its driver hears it: asked (`driver.why()`, a
question with an id of its own, answered by the master's `Why`), and unasked -- once, when
it has wanted offers for `NO_OFFER_WARNING` seconds and none came, the driver logs the
master's first reason (`NoOfferWatch`), so a framework that waits says why at the default
log level."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from frameworks.errors import DriverError
from protocol.transport.aio import within
from protocol.wire.messages import Error, Wire
from protocol.wire.why import AskWhy, Why

NO_OFFER_WARNING = 30.0  # seconds wanting offers with none coming before the driver says why


class WhyAsker:
    def __init__(self, call: Callable[[Wire], None]) -> None:
        """`call`: sends a call to the master."""
        self._call = call
        self._asks: dict[str, asyncio.Future[Why]] = {}

    async def ask(self, framework_id: str, timeout: float) -> Why:
        request_id = uuid.uuid4().hex
        answer: asyncio.Future[Why] = asyncio.get_running_loop().create_future()
        self._asks[request_id] = answer
        try:
            self._call(AskWhy(framework=framework_id, request_id=request_id))
            try:
                return await within(answer, timeout)
            except TimeoutError:
                raise DriverError(f"no answer from the master about why in {timeout:g}s") from None
        finally:
            self._asks.pop(request_id, None)

    async def on_answer(self, msg: Why, _reply_to: str | None) -> None:
        answer = self._asks.get(msg.request_id)
        if answer is not None and not answer.done():
            answer.set_result(msg)

    def on_error(self, msg: Error) -> bool:
        """The master refused a question of ours: its askers hear why (True), or the
        error is about something else (False). (An error names the call's type, not its
        id: a driver asks only about itself, so every question waiting has this answer.)"""
        if msg.about != AskWhy.TYPE:
            return False
        for answer in self._asks.values():
            if not answer.done():
                answer.set_exception(DriverError(f"{msg.code}: {msg.message}"))
        return True


class NoOfferWatch:
    """Watches for a drought: subscribed, wanting offers (not suppressed, and any demand it
    declared not empty), and none for `after` seconds. Then it asks the master why and
    logs it, once a drought."""

    def __init__(
        self,
        ask: Callable[[], Awaitable[Why]],
        log: Callable[[], Any],
        after: float = NO_OFFER_WARNING,
    ) -> None:
        self._ask = ask
        self._log = log  # (the driver's logger of the moment: it binds its framework id)
        self.after = after
        self._subscribed = False
        self._suppressed = False
        self._demand = True  # (until it declares none)
        self._since = 0.0  # when the drought began (the last offer, or wanting again)
        self._warned = False
        self._changed = asyncio.Event()

    @property
    def wanting(self) -> bool:
        return self._subscribed and not self._suppressed and self._demand

    def subscribed(self, yes: bool = True) -> None:
        self._set(subscribed=yes)

    def suppressed(self, yes: bool) -> None:
        self._set(suppressed=yes)

    def demand(self, declared: bool) -> None:
        self._set(demand=declared)

    def offered(self) -> None:
        self._since, self._warned = _now(), False
        self._changed.set()

    def _set(self, **changes: bool) -> None:
        was = self.wanting
        self._subscribed = changes.get("subscribed", self._subscribed)
        self._suppressed = changes.get("suppressed", self._suppressed)
        self._demand = changes.get("demand", self._demand)
        if self.wanting and not was:  # a drought starts now, if none comes
            self._since, self._warned = _now(), False
        self._changed.set()

    async def run(self) -> None:
        """Until cancelled: wait for a drought's `after` seconds, then say why."""
        while True:
            self._changed.clear()
            if not self.wanting or self._warned:
                await self._changed.wait()
                continue
            left = self._since + self.after - _now()
            if left > 0:
                # (woken early when something changes: an offer came, say)
                with contextlib.suppress(TimeoutError):
                    await within(self._changed.wait(), left)
                continue
            self._warned = True
            await self._say_why()

    async def _say_why(self) -> None:
        waited = round(_now() - self._since, 1)
        try:
            why = await self._ask()
        except DriverError as e:
            self._log().warning("framework.no_offers", seconds=waited, reason="unknown", why=str(e))
            return
        top = why.top
        self._log().warning(
            "framework.no_offers",
            seconds=waited,
            reason=str(top.code) if top else "none",
            why=top.message if top else "the master gives no reason",
        )


def _now() -> float:
    return asyncio.get_running_loop().time()
