"""What every answer of the master's HTTP side (the leader's API or a standby's) is
made of: JSON bodies and problems, the security headers, `/metrics`, and the listening."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from master.http.config import CertificateUnusable, HttpConfig
from master.http.connections import BoundedSite
from master.http.metrics import exposition

# What every answer carries: the page runs only its own script and styles, is never framed,
# and no type is guessed; and the server says its name, not its versions.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Server": "drfmesos",
}


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)


def json_response(model: BaseModel | dict[str, Any], status: int = 200) -> web.Response:
    body = model.model_dump_json() if isinstance(model, BaseModel) else json.dumps(model)
    return web.Response(text=body, status=status, content_type="application/json")


def metrics_response(registry: CollectorRegistry) -> web.Response:
    return web.Response(
        body=exposition(registry),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def problem(message: str, status: int) -> web.Response:
    return json_response({"error": message}, status)


def unauthenticated(authorization: str | None, kind: str) -> str:
    """Why a 401: no credentials, or credentials given and refused (a wrong secret, or a
    principal the store does not know: one answer for both, which tells no one which
    principals exist). `kind`: the principal's kind the page takes."""
    if not authorization:
        return f"{kind} credentials needed (HTTP Basic)"
    return (
        "the credentials given were refused: a wrong secret, or a principal the "
        f"credentials store does not know ({kind} credentials needed, HTTP Basic)"
    )


async def serve_site(runner: web.AppRunner, config: HttpConfig, log: Any) -> str:
    """Listen where `config` says (HTTPS with its certificate), each client's connections
    bounded (master.http.connections, whose refusals `log` says); the URL served."""
    await runner.setup()
    ssl = None
    if config.cert is not None and config.key is not None:
        import ssl as ssl_module

        ssl = ssl_module.create_default_context(ssl_module.Purpose.CLIENT_AUTH)
        try:
            ssl.load_cert_chain(config.cert, config.key)
        except (OSError, ValueError) as e:  # (ssl.SSLError is an OSError: not the port's)
            where = f"--http-cert {config.cert} / --http-key {config.key}"
            raise CertificateUnusable(f"{where}: {e}") from None
    site = BoundedSite(
        runner,
        config.host,
        config.port,
        ssl_context=ssl,
        log=log,
        per_address=config.connections_per_address,
    )
    await site.start()
    port = config.port
    for address in runner.addresses:  # the port asked for, or the one given (0)
        port = address[1]
        break
    scheme = "https" if ssl else "http"
    return f"{scheme}://{config.host}:{port}/"
