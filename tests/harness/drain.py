"""What the drain tests share on the in-memory cluster (harness.master): an operator
principal on the bus, a task's resources, and an offer to build a task on s1 with."""

from __future__ import annotations

from protocol.transport.base import Transport
from protocol.wire.messages import Error, Offer, Wire
from protocol.wire.resources import Resources

from harness.helpers import Inbox, open_transport
from harness.master import GB, Cluster, T

SMALL = Resources(cpus=1, mem=GB)
# what a task on s1 was launched on (its TaskInfo names only the slave of it)
ANY_OFFER = Offer(offer_id="o", framework_id="f", slave_id="s1", hostname="s1", resources=SMALL)


class Operator:
    """An operator principal on the bus, and the errors it is answered with."""

    def __init__(self, bus: Transport) -> None:
        self.bus, self.answers = bus, Inbox()

    async def call(self, message: Wire) -> None:
        await self.bus.publish(T.inbound("operator", "ops"), message)

    async def refused(self, about: str) -> Error:
        return await self.answers.wait_for(Error, lambda e: e.about == about)


async def operator(c: Cluster) -> Operator:
    """Operator principal ops on a connection of its own, hearing its answers."""
    bus = await open_transport(c.stack, c.connect, "ops", inbox=T.operator("ops"))
    ops = Operator(bus)
    await bus.subscribe(T.operator("ops"), ops.answers)
    return ops
