"""What the HTTP API's auth middleware learns of a request, for its handlers: typed keys
(aiohttp's `RequestKey`), set once the request's credentials are checked."""

from __future__ import annotations

from aiohttp import web

PRINCIPAL = web.RequestKey("principal", str)  # who asked, as its credentials said
KIND = web.RequestKey("kind", str)  # that principal's kind: operator, framework, ...
