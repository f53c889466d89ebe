"""A Mesos v1 scheduler client in a few lines of aiohttp, as any language's would be:
JSON calls, and the SUBSCRIBE stream read as RecordIO (the tests and benchmarks.mesos_http)."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from protocol import recordio


def basic(user: str, secret: str) -> str:
    """An HTTP Basic Authorization header's value."""
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


class MesosScheduler:
    """One framework's stream and calls. `events` yields each event as it arrives."""

    def __init__(self, master: str, auth: str | None, ssl: ssl.SSLContext | None = None) -> None:
        """`ssl`: what to trust, for a master on HTTPS (`--http-cert`)."""
        self.url = master.rstrip("/") + "/api/v1/scheduler"
        self.headers = {"Authorization": auth} if auth else {}
        connector = aiohttp.TCPConnector(ssl=ssl) if ssl is not None else None
        self.session = aiohttp.ClientSession(connector=connector)
        self.stream_id = ""
        self.framework_id = ""
        self._response: aiohttp.ClientResponse | None = None
        self._decoder = recordio.Decoder()
        self._ready: list[dict[str, Any]] = []

    async def subscribe(self, framework_info: dict[str, Any], **extra: Any) -> int:
        """SUBSCRIBE; the HTTP status (200: the stream is open and SUBSCRIBED read)."""
        body = {"type": "SUBSCRIBE", "subscribe": {"framework_info": framework_info}, **extra}
        r = await self.session.post(self.url, json=body, headers=self.headers)
        if r.status != 200:
            await r.read()
            r.release()
            return r.status
        self._response = r
        self.stream_id = r.headers["Mesos-Stream-Id"]
        first = await self.next_event()
        assert first["type"] == "SUBSCRIBED", first
        self.framework_id = first["subscribed"]["framework_id"]["value"]
        self.subscribed = first["subscribed"]
        return 200

    async def next_event(self) -> dict[str, Any]:
        """The next event; {} once the stream has ended."""
        assert self._response is not None
        while not self._ready:
            chunk = await self._response.content.readany()
            if not chunk:
                return {}
            self._ready += [json.loads(r) for r in self._decoder.feed(chunk)]
        return self._ready.pop(0)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        while event := await self.next_event():
            yield event

    async def call(self, kind: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
        """A call with this framework's id and stream id: (status, JSON body or None)."""
        call: dict[str, Any] = {"type": kind, "framework_id": {"value": self.framework_id}}
        if body is not None:
            call[kind.lower()] = body
        return await self.post(call, **kw)

    async def post(
        self, call: Any, *, stream_id: str | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        headers = {**self.headers, "Content-Type": "application/json"}
        headers["Mesos-Stream-Id"] = self.stream_id if stream_id is None else stream_id
        data = raw if raw is not None else json.dumps(call).encode()
        async with self.session.post(self.url, data=data, headers=headers) as r:
            text = await r.text()
            return r.status, json.loads(text) if text else None

    async def close(self) -> None:
        if self._response is not None:
            self._response.close()
        await self.session.close()
