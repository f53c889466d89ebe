"""A credentialed tenant's hostile input, generated (tests/test_fuzz.py runs it briefly in
CI, `python -m benchmarks.fuzz` for long).

mallory, a framework principal with valid credentials, writes on the one topic the
broker lets it write (its calls to the master): messages drawn by Hypothesis from the
protocol's own models with ids aimed at the victim's, launches on its real offers of
tasks with hostile ids, commands, environments and executors, the same bytes mutated,
raw bytes and msgpack of the wrong shape. And it sends hostile requests to every route
of the HTTP API, signed in as nobody, as itself, and as an operator.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgpack

from protocol.transport.base import Connector
from protocol.wire.codec import PROTOCOL_VERSION, REGISTRY
from protocol.wire.messages import (
    Decline,
    Filters,
    Offer,
    Offers,
    Revive,
    Subscribe,
    Subscribed,
    TaskState,
    Teardown,
    Wire,
)
from protocol.wire.topics import Topics

HOSTILE_IDS = [
    "..",
    ".",
    "../../../fuzz-escaped",
    "/tmp/fuzz-absolute",
    "a\0b",
    "a b",
    "tab\there",
    "x" * 201,
    "+",
    "#",
    "fw:1@x",
    "",
    "ok-id",
]
HOSTILE_COMMANDS = ["true", "echo \0", "x" * 70_000, "sleep 0.1", "exit 3"]
HOSTILE_ENVS: list[dict[str, str]] = [{}, {"A=B": "1"}, {"": "x"}, {"A": "\0"}, {"OK": "fine"}]
ROUTES = [
    "/",
    "/health",
    "/metrics",
    "/static/app.js",
    "/static/../../etc/passwd",
    "/api/v1/openapi.json",
    "/api/v1/whoami",
    "/api/v1/state",
    "/api/v1/frameworks",
    "/api/v1/slaves",
    "/api/v1/tasks",
    "/api/v1/offers",
    "/api/v1/roles",
    "/api/v1/events",
    "/api/v1/stream?x=",
    "/api/v1/tasks/{fid}/{tid}/files/stdout",
    "/api/v1/tasks/{fid}/{tid}/files/stderr",
]
ACCEPT_EVERY = 25  # messages between launches on a real offer
# at its own framework these would only cut the tenant off its own offers
SELF_HARM = ("Teardown", "Subscribe", "Suppress")
QUERY_VALUES = [
    "-1",
    "0",
    "1e30",
    "abc",
    "99999999999999999999",
    "",
    "..%2F..",
    "\u0000",
    "x" * 5000,
]


@dataclass
class Report:
    """What was sent and what came back."""

    sent: Counter[str] = field(default_factory=Counter)
    http: Counter[str] = field(default_factory=Counter)  # by status class
    http_5xx: list[str] = field(default_factory=list)

    def lines(self, errors: Counter[str], statuses: Counter[str]) -> list[str]:
        return [
            "sent: " + ", ".join(f"{k} {v}" for k, v in sorted(self.sent.items())),
            "errors back: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()),
            "task updates back: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()),
            "http: " + ", ".join(f"{k} {v}" for k, v in sorted(self.http.items())),
        ]


class Fuzzer:
    """mallory's generator; `samples` are messages drawn from the protocol's models (see
    test_trust.draw), `offers` its real offers, handed in as they come."""

    def __init__(
        self, seed: int, framework_id: str, victim: dict[str, str], samples: list[Any]
    ) -> None:
        self.rng = random.Random(seed)
        self.framework_id = framework_id
        self.victim = victim  # the victim's framework_id, slave_id, task_id
        self.samples = samples
        self.offers: list[Offer] = []
        self.launched = 0
        self.last_offer = ""

    def envelope(self, type_name: str, body: Any, reply_to: str | None) -> bytes:
        packed: bytes = msgpack.packb([PROTOCOL_VERSION, type_name, reply_to, body])
        return packed

    def hostile_task(self, offer: Offer) -> dict[str, Any]:
        rng = self.rng
        self.launched += 1
        task: dict[str, Any] = {
            "task_id": rng.choice(HOSTILE_IDS) if rng.random() < 0.7 else f"f{self.launched}",
            "slave_id": offer.slave_id,
            "resources": {"cpus": rng.choice([0.01, 0.1, 64]), "mem": rng.choice([1, 8, 1e6])},
        }
        command = {"value": rng.choice(HOSTILE_COMMANDS), "environment": rng.choice(HOSTILE_ENVS)}
        if rng.random() < 0.3:
            task["executor"] = {
                "executor_id": rng.choice(HOSTILE_IDS),
                "command": command,
                "resources": {"cpus": rng.choice([0.01, 4, 100]), "mem": rng.choice([1, 4096])},
            }
        else:
            task["command"] = command
        return task

    def accept(self, reply_to: str | None) -> tuple[str, bytes]:
        """A launch of hostile tasks on one of its real offers."""
        offer = self.offers.pop(self.rng.randrange(len(self.offers)))
        self.last_offer = offer.offer_id
        tasks = [self.hostile_task(offer) for _ in range(self.rng.randint(1, 4))]
        body = {
            "framework_id": self.framework_id,
            "offer_ids": [offer.offer_id],
            "tasks": tasks,
            "filters": {"refuse_seconds": 0},
        }
        return "accept", self.envelope("Accept", body, reply_to)

    def decline_last(self, reply_to: str | None) -> bytes:
        body = {
            "framework_id": self.framework_id,
            "offer_ids": [self.last_offer],
            "filters": {"refuse_seconds": 0},
        }
        return self.envelope("Decline", body, reply_to)

    def revive(self, reply_to: str | None) -> bytes:
        return self.envelope("Revive", {"framework_id": self.framework_id}, reply_to)

    def next(self, reply_to: str | None) -> tuple[str, bytes]:
        """(what kind of thing, its bytes)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.25 and self.offers:
            return self.accept(reply_to)
        if roll < 0.6:
            message = rng.choice(self.samples)
            body = message.model_dump(mode="python")
            for key in self.victim.keys() & body.keys():  # aimed at the victim's ids
                if rng.random() < 0.5:
                    body[key] = self.victim[key]
            if "framework_id" in body and rng.random() < 0.3 and message.TYPE not in SELF_HARM:
                body["framework_id"] = self.framework_id  # at its own, where it may act
            packed = self.envelope(message.TYPE, body, reply_to)
            if rng.random() < 0.3:
                raw = bytearray(packed)
                for _ in range(rng.randint(1, 4)):
                    raw[rng.randrange(len(raw))] = rng.randrange(256)
                return "mutated", bytes(raw)
            return "model", packed
        if roll < 0.75:
            type_name = rng.choice(list(REGISTRY))
            shapes: list[Any] = [
                [],
                {"x": 1},
                [1, 2, 3],
                "text",
                {"items": [{"a": 1}] * 3},
                {"framework_id": ["not", "a", "string"]},
                {"tasks": [{"task_id": "../x"}] * 5},
            ]
            return "wrong-shape", self.envelope(type_name, rng.choice(shapes), reply_to)
        if roll < 0.85:
            weird: list[Any] = [None, 1, "Batch", [1, "Batch", None, [b"\xc1", 5]], {1: 2}]
            return "wrong-envelope", msgpack.packb(rng.choice(weird))
        return "raw-bytes", rng.randbytes(rng.randint(0, 300))

    def http_request(self, victim_fid: str) -> tuple[str, str]:
        """(path with query, which credentials: none, tenant, operator)."""
        rng = self.rng
        path = rng.choice(ROUTES).format(
            fid=rng.choice([victim_fid, "..", "%2e%2e", "x" * 300]),
            tid=rng.choice(["victim-task", "../../etc", "%00", "t"]),
        )
        params = "&".join(
            f"{rng.choice(['offset', 'limit', 'framework', 'state', 'length'])}="
            f"{rng.choice(QUERY_VALUES)}"
            for _ in range(rng.randint(0, 3))
        )
        who = rng.choice(["none", "tenant", "operator", "garbage"])
        return (path + ("?" + params if params else "")), who


async def send_http(
    fuzzer: Fuzzer, url: str, count: int, victim_fid: str, secrets: dict[str, str], report: Report
) -> None:
    """`count` hostile requests to the HTTP API; each answer's status is counted."""

    def basic(user: str, secret: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()

    auth = {
        "tenant": basic("mallory", secrets["mallory"]),
        "operator": basic("ops", secrets["ops"]),
        "garbage": "Basic " + base64.b64encode(b"\0:\xff" * 50).decode(),
    }
    async with aiohttp.ClientSession() as http:
        for _ in range(count):
            path, who = fuzzer.http_request(victim_fid)
            headers = {"Authorization": auth[who]} if who in auth else {}
            try:
                async with http.get(
                    url.rstrip("/") + path,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(total=10),
                ) as answer:
                    report.http[f"{answer.status // 100}xx"] += 1
                    if answer.status >= 500:
                        report.http_5xx.append(f"{answer.status} {path[:120]}")
            except (aiohttp.ClientError, ValueError) as e:
                report.http[type(e).__name__] += 1


async def send_bus(
    fuzzer: Fuzzer, publish: Any, count: int, reply_to: str | None, report: Report
) -> None:
    """`count` hostile messages on mallory's one writable topic; every ACCEPT_EVERY-th
    waits (a second at most) for one of its offers, so that launches are tried often."""
    for i in range(count):
        if i % ACCEPT_EVERY == 0:
            for _ in range(50):
                if fuzzer.offers:
                    break
                await asyncio.sleep(0.01)  # (offers come each allocation round)
            if fuzzer.offers:
                kind, payload = fuzzer.accept(reply_to)
                await publish(payload)
                # and a Decline of the same offer: an Accept refused whole (an id over 200
                # characters fails its decoding) would hold it for good
                kind, payload = "decline", fuzzer.decline_last(reply_to)
                report.sent["accept"] += 1
            else:  # (a drawn Decline with a filter may have put them off)
                kind, payload = "revive", fuzzer.revive(reply_to)
        else:
            kind, payload = fuzzer.next(reply_to)
        report.sent[kind] += 1
        await publish(payload)


def statuses_of(driver_statuses: list[Any]) -> Counter[str]:
    return Counter(
        s.state.value if isinstance(s.state, TaskState) else str(s.state) for s in driver_statuses
    )


async def churn_frameworks(
    connect: Connector, topics: Topics, principal: str, count: int, seconds: float
) -> list[str]:
    """`count` frameworks of one principal at once (its --max-frameworks-per-principal),
    each declining whatever it is offered for a year and reviving at once, for `seconds`;
    their ids. (What a tenant's frameworks leave behind, once torn down, is what
    `python -m benchmarks.fuzz` measures.)"""
    answers = topics.outbox("framework", principal)
    bus = connect(name=f"{principal}-churn", inbox=f"{answers}/churn", will=None)
    await bus.start()
    to_master = topics.inbound("framework", principal)
    ids: list[str] = []
    year = Filters(refuse_seconds=365 * 86400)
    churning = True

    async def on(message: Wire, _reply_to: str | None) -> None:
        if isinstance(message, Subscribed):
            ids.append(message.framework_id)
        elif isinstance(message, Offers) and churning:
            for offer in message.offers:
                fid = offer.framework_id
                bus.post(
                    to_master, Decline(framework_id=fid, offer_ids=[offer.offer_id], filters=year)
                )
                bus.post(to_master, Revive(framework_id=fid))

    try:
        await bus.subscribe(f"{answers}/#", on)
        for n in range(count):
            subscribe = Subscribe(name=f"churn-{n}", role=principal, inbox=f"churn-{n}")
            await bus.publish(to_master, subscribe)
        await asyncio.sleep(seconds)
        churning = False  # (its teardowns wait behind no more of it)
        for fid in ids:
            await bus.publish(to_master, Teardown(framework_id=fid))
    finally:
        await bus.close()
    return ids
