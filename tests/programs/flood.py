"""An attacker with valid credentials of its own: N calls as fast as it can, one per
MQTT message (a separate process, as a real attacker is).

    python tests/programs/flood.py URL CA TOPIC COUNT [FILE ...]  (secret in $FLOOD_SECRET)

With FILEs, each round sends each file's bytes as one payload instead of a Revive.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiomqtt

from protocol.tooling.brokers import BrokerURL
from protocol.wire.codec import encode
from protocol.wire.messages import Revive


async def main(url_text: str, ca: str, topic: str, count: int, calls: list[bytes]) -> None:
    url = BrokerURL.parse(url_text, ca=ca)
    # a Revive is charged to its rate limit (a Decline is not)
    calls = calls or [encode(Revive(framework_id="fw-nope"))]
    async with aiomqtt.Client(
        url.host,
        url.port,
        username=url.username,
        password=os.environ["FLOOD_SECRET"],
        identifier=url.username,
        tls_context=url.ssl_context(),
        max_queued_outgoing_messages=None,
    ) as client:
        for _ in range(count):
            for call in calls:
                await client.publish(topic, call, qos=0)
    print("flooded", count, flush=True)


if __name__ == "__main__":
    files = [Path(f).read_bytes() for f in sys.argv[5:]]
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), files))
