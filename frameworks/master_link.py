"""A framework's link with the master: subscribed to the one leading, and hearing it.

The driver subscribes once its bus connects, and again after every reconnect, with its
framework id once it has one; a master not up yet, or restarting, misses the first
`Subscribe`, so it is sent again with backoff until answered (as the Mesos driver does),
and a wait that lasts is said (`framework.waiting_for_master`). It subscribes again by
itself when a new leader is announced (a newer epoch), when the leader's beat is another
master's than the one it subscribed with (one started again in the same epoch, which no
announcement tells), and when a master answers that it does not know the framework. The
master's heartbeats are counted (`protocol.master_silence`): one gone quiet is said.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.master_silence import FRAMEWORK, MasterSilence
from protocol.transport.aio import cancel_and_wait, within
from protocol.transport.base import Transport
from protocol.transport.patience import Patience
from protocol.wire.messages import Heartbeat, Leader, Subscribe, Subscribed


class MasterLink:
    def __init__(
        self,
        *,
        bus: Callable[[], Transport | None],
        to_master: str,
        subscription: Callable[[str], Subscribe],
        stopped: asyncio.Event,
        lost: Callable[[], Awaitable[None]],
        log: Callable[[], Any],
        cluster: str,
        broker: str,
    ) -> None:
        """`bus`: the driver's bus of the moment (None: closed); `subscription`: the
        `Subscribe` to send, for the bus's incarnation; `lost`: what else happens when a
        subscription is lost (the scheduler told it is disconnected); `log`: the driver's
        logger of the moment (it binds its framework id); `broker`: the broker as said."""
        self._bus, self._to_master, self._subscription = bus, to_master, subscription
        self._stopped, self._lost, self._log = stopped, lost, log
        self._cluster, self._broker = cluster, broker
        self.subscribed = asyncio.Event()
        self.master_id = ""
        self.master_epoch = 0  # the epoch of the master we subscribed with
        self._again: asyncio.Future[None] | None = None  # a subscription again, under way
        up = lambda: bool((b := bus()) and b.connected)  # noqa: E731
        self.silence = MasterSilence(log, cluster, up, FRAMEWORK)
        self._silence_watch: asyncio.Task[None] | None = None  # runs it

    def start(self) -> None:
        self._silence_watch = asyncio.create_task(self.silence.run(), name="driver-silence")

    async def close(self) -> None:
        if self._silence_watch is not None:
            await cancel_and_wait(self._silence_watch)
            self._silence_watch = None
        if self._again is not None and not self._again.done():
            self._again.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._again

    async def subscribe(self) -> None:
        """Subscribe (again, with our framework id, after any reconnect) until answered,
        with backoff."""
        if self.subscribed.is_set():
            self.subscribed.clear()
            self.silence.unsubscribed()
            await self._lost()
        delay = 0.5
        patience = Patience()  # (the bus says when it is the broker that is missing)
        while not self.subscribed.is_set() and not self._stopped.is_set():
            bus = self._bus()
            if bus is None or not bus.connected:
                return  # the next connect starts over
            if (waited := patience.due()) is not None:
                cluster = self._cluster
                self._log().warning(
                    "framework.waiting_for_master",
                    waited=round(waited, 1),
                    detail=f"connected to {self._broker}, but no master of cluster "
                    f"{cluster!r} has answered the subscription: is one running "
                    f"there (drfmesos master --cluster {cluster})?",
                )
            await bus.publish(self._to_master, self._subscription(bus.incarnation))
            with contextlib.suppress(TimeoutError):
                await within(self.subscribed.wait(), delay)
            delay = min(delay * 2, 10.0)

    def again(self) -> None:
        """Subscribe again (unless it is under way already)."""
        if self._again is None or self._again.done():
            self._again = asyncio.ensure_future(self.subscribe())

    def answered(self, msg: Subscribed, framework_id: str | None) -> bool:
        """The master's answer: now subscribed with it (True), or the answer to a retry
        that crossed the first answer (False: nothing to do)."""
        if self.subscribed.is_set() and msg.framework_id == framework_id:
            return False
        self.master_epoch = max(self.master_epoch, msg.epoch)
        self.master_id = msg.master_id
        self.subscribed.set()
        self.silence.subscribed(msg.heartbeat_interval_seconds)
        return True

    async def on_leader(self, leader: Leader) -> None:
        """A new master leads: subscribe again with our framework id (as the Mesos driver
        does on a new master detected), and our offers come back from it."""
        if self.subscribed.is_set() and leader.epoch > self.master_epoch:
            self._log().info("framework.new_leader", master_id=leader.master_id, epoch=leader.epoch)
            self.again()

    def on_beat(self, beat: Leader) -> None:
        """The leader's beat: of a master other than ours (one started again in our epoch,
        which no announcement tells), it has us subscribe again (as slave.master_link)."""
        if self.subscribed.is_set() and beat.master_id != self.master_id:
            self.again()

    async def on_heartbeat(self, msg: Heartbeat, _r: str | None) -> None:
        self.silence.heard()  # (liveness only: protocol.master_silence)
