"""Review 73: a principal's frameworks that lose their connections together are not all
noticed gone.

`CallIntake.arrive_gone` drops a Last Will past WILLS_WAITING (4) of one principal's
waiting in its queue. But a principal is not one party: a tenant runs several frameworks
under its one principal (Mesos's principal is per team, not per scheduler), and every
slave of a rack may share one. When the host they run on dies, or its link to the broker,
the broker publishes all their wills at once; they wait in the principal's queue together
(behind whatever calls those frameworks sent before they went), and the fifth and later
are dropped. A will is the master's only word that a framework over the bus is gone: the
dropped ones stay `connected` for ever, their failover timeouts never start, and their
tasks and resources are held until someone tears them down by hand.

What a tenant and an operator rely on: each party's connection lost is noticed (Mesos
notices each framework's disconnection on its own connection).
"""

from __future__ import annotations

import asyncio
import contextlib

from protocol.wire.messages import Gone

from harness.helpers import eventually
from harness.master import Cluster, T
from harness.master import cluster as cluster

FRAMEWORKS = 6  # one tenant's schedulers on one host (more than WILLS_WAITING)


async def test_every_framework_of_a_principal_lost_at_once_is_noticed(cluster: Cluster) -> None:
    fws = [await cluster.framework(f"F{i}", failover_timeout=3600) for i in range(FRAMEWORKS)]
    books = cluster.master.books
    assert all(books.frameworks[f.framework_id].connected for f in fws)
    # their host is gone: the broker publishes each connection's will at once
    topic = T.gone("framework", "framework")
    await asyncio.gather(
        *(
            f.bus.publish(topic, Gone(kind="framework", id=f"F{i}", incarnation=f.bus.incarnation))
            for i, f in enumerate(fws)
        )
    )
    with contextlib.suppress(AssertionError):  # (the assertion below says which)
        await eventually(
            lambda: not any(books.frameworks[f.framework_id].connected for f in fws), timeout=5
        )
    still = [f.framework_id for f in fws if books.frameworks[f.framework_id].connected]
    assert still == [], (
        f"{len(still)} of {FRAMEWORKS} frameworks of one principal whose connections were "
        f"lost together are still connected: their wills were dropped, their failover "
        f"timeouts never start"
    )
