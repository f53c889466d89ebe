"""Newcomer 88: a master restarted on the embedded broker dropped what its slave had sent
while it was away, and warned of it as of a tenant's retained call.

Sharing a cluster (docs/tutorials/sharing.md) on `drfmesos broker`, the newcomer stopped
the master and started it again: it logged 45 `bus.retained_dropped` warnings for the
slave's own call topic, and the slave's messages of the meantime were never handled.
amqtt 0.12.1 hands a persistent session the messages queued for it while it was away
with the RETAIN flag set, as if they were retained messages; the bus reads a retained
message only on the master's announcements (a tenant may leave one on its own call topic,
never to be replayed to a master that starts), so it dropped every one. MQTT gives them
as they were published ([MQTT-3.3.1-9]: RETAIN 0 when sent to an established
subscription), as mosquitto does.
"""

from __future__ import annotations

from pathlib import Path

from cluster.local.secure import as_principal, provision
from protocol.tooling.brokers import EmbeddedBroker
from protocol.transport.bus import Bus
from protocol.wire.messages import Heartbeat
from protocol.wire.topics import Topics

from harness.helpers import Inbox


async def test_what_a_slave_sent_while_its_master_was_away_reaches_the_master_back(
    tmp_path: Path,
) -> None:
    # with credentials, as the tutorial's broker: amqtt queues nothing for an anonymous
    # session (a cluster without credentials loses such messages whatever the flag)
    store = provision(tmp_path / "auth", [("master", "master"), ("node1", "slave")])
    broker = EmbeddedBroker(auth=store.path)
    await broker.start()
    calls = Topics("c").inbound("slave", "node1")
    inbox = Inbox()

    def as_(name: str, client_id: str | None = None) -> Bus:
        url = as_principal(broker.url, store, name)
        return Bus(url, name=name, client_id=client_id, persistent=client_id is not None)

    try:
        async with as_("master", "drfmesos-master-c") as master:
            await master.subscribe(calls, inbox)  # its session; then the master stops
        async with as_("node1") as slave:
            for i in range(3):
                await slave.publish(calls, Heartbeat(source=str(i)), timeout=10)
        master = as_("master", "drfmesos-master-c")  # started again
        await master.subscribe(calls, inbox)
        async with master:
            await inbox.wait_until(lambda: len(inbox.of(Heartbeat)) >= 3)
        assert [m.source for m in inbox.of(Heartbeat)] == ["0", "1", "2"]
    finally:
        await broker.stop()
