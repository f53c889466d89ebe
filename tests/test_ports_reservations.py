"""Ports and dynamic reservations, the master's side, in process over the in-memory
transport with a fake slave and framework: a port is counted and named as one resource
(docs/how-to/ports.md: "A port is one resource whoever's it is"), so a RESERVE of ports
leaves every port of the slave offerable by its value -- none counted for a role with no
value to name, none left with a value and no count. Ports are reserved in the slave's
--resources (docs/how-to/ports.md); a RESERVE of them at run time is refused, saying so."""

from __future__ import annotations

import contextlib

from protocol.wire.discrete import parse_resources
from protocol.wire.messages import Accept, Error, Filters, OfferOperation
from protocol.wire.resources import Resources

from harness.master import Cluster


async def test_a_reserve_of_ports_leaves_every_port_of_the_slave_offered_by_its_value() -> None:
    async with contextlib.AsyncExitStack() as stack:
        c = Cluster(stack)
        await c.start_master()
        fw = await c.framework("svc", role="svc")
        resources, ports = parse_resources("cpus:2;mem:1024;ports:[31000-31001]")
        await c.slave("s1", resources, ports)
        offer = await fw.next_offer()
        assert dict(offer.discrete.by_name) == dict(ports.by_name)
        # the framework reserves one of the offer's two ports for its role (an insecure
        # cluster: no grant needed), and launches nothing
        reserve = OfferOperation(
            type="RESERVE", resources=Resources.from_millis({"ports(svc,framework)": 1000})
        )
        after = fw.offer_count()
        await fw.bus.publish(
            fw.to_master,
            Accept(
                framework_id=fw.framework_id,
                offer_ids=[offer.offer_id],
                tasks=[],
                operations=[reserve],
                filters=Filters(refuse_seconds=0),
            ),
        )
        again = await fw.next_offer(after=after)
        counted = sum(v for k, v in again.resources.millis.items() if k.startswith("ports"))
        named = sum(v.size for v in again.discrete.by_name.values())
        # both ports are free and offered to it: each counted with its value
        assert (counted // 1000, named) == (2, 2), (
            f"offered {again.resources} with values {dict(again.discrete.by_name)}: "
            "a port counted for the reservation has no value, and the other value is "
            "offered to nobody"
        )
        refused = [e for e in fw.inbox.of(Error) if "--resources" in e.message]
        assert refused, f"no error told the framework why: {fw.inbox.of(Error)}"
