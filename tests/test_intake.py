"""A subscriber's intake (`protocol.transport.base.Intake`, the master's is
`master.intake`): the transport's one dispatch loop asks it to admit each payload,
then delivers what it admitted item by item, on both transports; a payload refused whole
delivers nothing, and a failing item does not stop the rest."""

from __future__ import annotations

from protocol.transport.base import Connector
from protocol.transport.inbound import subscribe_intake
from protocol.wire.codec import DecodeError, Envelope, decode_many, encode, encode_batch
from protocol.wire.messages import Revive

from harness.helpers import eventually
from harness.transports import connector as connector  # (the fixture: both transports)


class Recording:
    yield_every = 2

    def __init__(self) -> None:
        self.admitted: list[str] = []
        self.delivered: list[str] = []

    async def admit(self, topic: str, payload: bytes) -> list[Envelope | DecodeError] | None:
        self.admitted.append(topic)
        return None if topic.endswith("/refused") else decode_many(payload)

    async def deliver(self, topic: str, item: Envelope | DecodeError) -> None:
        assert isinstance(item, Envelope)
        assert isinstance(item.message, Revive)
        if item.message.framework_id == "boom":
            raise RuntimeError("a handler's bug")
        self.delivered.append(item.message.framework_id)


async def test_an_intake_admits_payloads_and_gets_their_items(connector: Connector) -> None:
    intake = Recording()
    bus = connector(name="intake", inbox=None, will=None)
    await bus.start()
    try:
        await subscribe_intake(bus, "in/#", intake)
        ids = ["a", "boom", "b", "c"]
        await bus.publish_raw("in/x/refused", encode(Revive(framework_id="r")))
        await bus.publish_raw(
            "in/x/ok", encode_batch([encode(Revive(framework_id=i)) for i in ids])
        )
        await eventually(lambda: intake.delivered == ["a", "b", "c"])
        assert intake.admitted == ["in/x/refused", "in/x/ok"]
        assert bus.stats["received"] == 4  # what was admitted, not what was refused
    finally:
        await bus.close()
