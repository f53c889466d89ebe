"""The master's HTTP side: the JSON API, Prometheus metrics, the live feed and the web UI.

One aiohttp server in the master's own event loop (aiohttp: maintained, asyncio-native,
streams server-sent events). Everything but the static page needs an operator's
credentials (HTTP Basic, checked against the credentials store's password hashes); a
framework principal's may read its own frameworks' tasks' files and nothing else.
`/metrics` and `/health` may be left open for scrapers and probes. A cluster without a
credentials store (`--insecure`) serves everything openly, as its broker does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources as package_files
from pathlib import Path
from typing import Protocol

from aiohttp import web

from master.calls.files import FileReadError, FileReadsBusy
from master.http.auth import PrincipalAuth
from master.http.config import HttpConfig, address_of
from master.http.log import ClientErrors, RefusedLines
from master.http.metrics import registry_for
from master.http.models import (
    Events,
    Frameworks,
    Health,
    Limit,
    Limits,
    Offers,
    PrincipalLimit,
    Roles,
    SlaveChurnView,
    Slaves,
    TaskFile,
    Tasks,
)
from master.http.openapi import openapi
from master.http.reader import BookCounts, MasterReader
from master.http.request_keys import KIND, PRINCIPAL
from master.http.responses import (
    json_response,
    metrics_response,
    problem,
    secure_headers,
    serve_site,
    unauthenticated,
)
from master.http.snapshot import SLAVE_SORTS, TASK_SORTS
from master.http.turns import take_turn
from master.why_answers import REFUSED_STATUS, Refusal
from protocol import logs
from protocol.transport.aio import within
from protocol.wire.messages import TaskState

MAX_LIMIT = 1000
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    b'<rect width="16" height="16" rx="3" fill="#23395d"/>'
    b'<rect x="3" y="8" width="3" height="5" fill="#fff"/>'
    b'<rect x="7" y="5" width="3" height="8" fill="#fff"/>'
    b'<rect x="11" y="3" width="2" height="10" fill="#fff"/></svg>'
)


def _int(request: web.Request, name: str, default: int, lo: int = 0, hi: int = 2**62) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"{name} must be an integer"}),
            content_type="application/json",
        ) from None
    if not lo <= value <= hi:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"{name} must be between {lo} and {hi}"}),
            content_type="application/json",
        )
    return value


def churn_view(m: MasterReader, counts: BookCounts) -> SlaveChurnView:
    return SlaveChurnView(
        connected=counts.slaves_connected,
        disconnected=counts.slaves - counts.slaves_connected,
        registrations=m.churn.registrations,
        reregistrations=m.churn.reregistrations,
        disconnects=m.churn.disconnects,
        removals=dict(m.churn.removals),
    )


class Door(Protocol):
    """Another API served on the same address (Mesos's, in master.mesos_api): its routes,
    and what it closes when the server stops."""

    @property
    def public_paths(self) -> Sequence[str]:
        """Paths that check their own callers (a Mesos framework's)."""

    def routes(self) -> list[web.RouteDef]: ...

    def close(self) -> None: ...


DoorFactory = Callable[[PrincipalAuth | None], Door]


class HttpApi:
    def __init__(
        self, master: MasterReader, config: HttpConfig, doors: Sequence[DoorFactory] = ()
    ) -> None:
        self.master = master
        self.config = config
        self.auth = PrincipalAuth(config.credentials) if config.credentials else None
        self.registry = registry_for(master)
        # what /metrics shows a scraper without credentials (--http-open-metrics)
        self.open_registry = registry_for(master, tenants=False)
        # the doors reach the master's handlers themselves; the HTTP side only serves them
        self.doors = [door(self.auth) for door in doors]
        self.public_paths = {path for door in self.doors for path in door.public_paths}
        self.log = logs.get("master.http", master_id=master.master_id)
        self.refused_lines = RefusedLines(self.log)  # (sampled, cut: master.http.log)
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._static = package_files.files("master.http") / "webui"

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> str:
        app = web.Application(middlewares=[self._errors_as_json, self._guard])
        app.on_response_prepare.append(secure_headers)
        app.add_routes(
            [
                web.get("/", self._index),
                web.get("/favicon.ico", self._favicon),
                web.get("/static/{name}", self._static_file),
                web.get("/health", self._health),
                web.get("/metrics", self._metrics),
                web.get("/api/v1/openapi.json", self._openapi),
                web.get("/api/v1/whoami", self._whoami),
                web.get("/api/v1/state", self._state),
                web.get("/api/v1/frameworks", self._frameworks),
                web.get("/api/v1/slaves", self._slaves),
                web.get("/api/v1/tasks", self._tasks),
                web.get("/api/v1/offers", self._offers),
                web.get("/api/v1/roles", self._roles),
                web.get("/api/v1/limits", self._limits),
                web.get("/api/v1/events", self._events),
                web.get("/api/v1/stream", self._stream),
                web.get("/api/v1/tasks/{framework_id}/{task_id}/files/{name}", self._file),
                web.get("/api/v1/frameworks/{framework}/why", self._why),
            ]
        )
        for door in self.doors:
            app.add_routes(door.routes())
        self.runner = web.AppRunner(
            app, access_log=None, handle_signals=False, logger=ClientErrors(self.log)
        )
        self.url = await serve_site(self.runner, self.config, self.log)
        self.log.info("http.started", url=self.url, authenticated=self.auth is not None)
        return self.url

    async def stop(self) -> None:
        self.refused_lines.close()
        for door in self.doors:
            door.close()
        for page in list(self.master.feed.pages):
            self.master.feed.close(page)
            with contextlib.suppress(asyncio.QueueFull):
                page.put_nowait("")
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    # -- who may ask --------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        public = path in ("/", "/favicon.ico") or path.startswith("/static/")
        public = public or path in self.public_paths  # (checked there, for frameworks)
        if self.config.open_metrics and path == "/health":
            public = True  # (it names no tenant: open to all, credentials or none)
        elif self.config.open_metrics and path == "/metrics":
            # open to a request without credentials (one with them is checked: an
            # operator's /metrics is the whole page, the open one aggregates only)
            public = public or "Authorization" not in request.headers
        if self.auth is not None and not public:
            who = await self.auth.principal(request.headers.get("Authorization"), request.remote)
            if who is None:
                # no WWW-Authenticate for the page's own calls, so the browser does not pop
                # up its dialog: the page asks for credentials itself
                headers = {} if request.headers.get("X-Requested-With") else {
                    "WWW-Authenticate": 'Basic realm="drfmesos"'}  # fmt: skip
                self.refused_lines.refused("http.unauthorized", remote=request.remote, path=path)
                said = unauthenticated(request.headers.get("Authorization"), "operator")
                return web.Response(
                    status=401,
                    text=json.dumps({"error": said}),
                    content_type="application/json",
                    headers=headers,
                )
            if who.kind != "operator" and handler not in (self._file, self._why):
                self.refused_lines.refused(
                    "http.forbidden", principal=who.principal, remote=request.remote, path=path
                )
                return problem(
                    "operator credentials needed (a framework principal may read only "
                    "its own tasks' files and why its own frameworks get no offers)",
                    403,
                )
            request[PRINCIPAL], request[KIND] = who.principal, who.kind
        return await handler(request)

    @web.middleware
    async def _errors_as_json(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """No route, or not that method: JSON, as every other error is (aiohttp's own
        answers are plain text)."""
        try:
            return await handler(request)
        except web.HTTPException as e:
            if e.status not in (404, 405) or e.content_type == "application/json":
                raise
            message = "no such path" if e.status == 404 else f"{request.method} not allowed"
            response = problem(message, e.status)
            if "Allow" in e.headers:
                response.headers["Allow"] = e.headers["Allow"]
            return response

    # -- pages --------------------------------------------------------------------------------
    async def _favicon(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=FAVICON, content_type="image/svg+xml")

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("index.html")

    async def _static_file(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request.match_info["name"])

    async def _serve(self, name: str) -> web.StreamResponse:
        types = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
        suffix = Path(name).suffix
        if "/" in name or suffix not in types:
            raise web.HTTPNotFound()
        item = self._static / name
        try:
            body = await asyncio.to_thread(item.read_bytes)
        except (FileNotFoundError, IsADirectoryError):
            raise web.HTTPNotFound() from None
        return web.Response(body=body, content_type=types[suffix], charset="utf-8")

    # -- the API ------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.StreamResponse:
        m = self.master
        backlog, counts = m.backlog(), m.counts()
        limit = self.config.max_backlog_age
        # behind: the oldest message waiting, or the last one handled, waited too long
        behind = max(backlog.oldest_wait, backlog.last_wait)
        # 200 either way: a probe that restarted a master for being behind would bring on a
        # failover, whose re-registrations are the very storm that put it behind
        return json_response(
            Health(
                status="behind" if limit is not None and behind > limit else "ok",
                master_id=m.master_id,
                slaves=counts.slaves,
                frameworks=counts.frameworks,
                leader=address_of(m.web_ui),
                backlog=backlog.messages,
                oldest_wait_seconds=round(backlog.oldest_wait, 3),
                last_wait_seconds=round(backlog.last_wait, 3),
                max_backlog_age=limit,
                slave_churn=churn_view(m, counts),
            )
        )

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        """The whole page to an operator (and to anybody on a master without credentials,
        whose HTTP side is all open); to a scraper without credentials
        (--http-open-metrics), the cluster's aggregates: no series labelled by tenant."""
        whole = self.auth is None or request.get(KIND) == "operator"
        return metrics_response(self.registry if whole else self.open_registry)

    async def _openapi(self, request: web.Request) -> web.StreamResponse:
        return json_response(openapi())

    async def _whoami(self, request: web.Request) -> web.StreamResponse:
        return json_response(
            {"principal": request.get(PRINCIPAL, ""), "master_id": self.master.master_id}
        )

    async def _state(self, request: web.Request) -> web.StreamResponse:
        return json_response(self.master.state(include_tasks=True))

    async def _frameworks(self, request: web.Request) -> web.StreamResponse:
        registered, completed = self.master.framework_views()
        return json_response(Frameworks(frameworks=registered, completed_frameworks=completed))

    async def _slaves(self, request: web.Request) -> web.StreamResponse:
        offset = _int(request, "offset", 0)
        limit = _int(request, "limit", 100, 1, MAX_LIMIT)
        sort = request.query.get("sort", "")
        if sort and sort.lstrip("-") not in SLAVE_SORTS:
            return problem(f"sort by one of {', '.join(SLAVE_SORTS)} (- before: reversed)", 400)
        m = self.master
        ids, total = m.slave_page(sort, offset, limit, request.query.get("search", ""))
        page = [m.slave_view(s) for s in ids]
        return json_response(Slaves(slaves=page, total=total, offset=offset, limit=limit))

    async def _tasks(self, request: web.Request) -> web.StreamResponse:
        offset = _int(request, "offset", 0)
        limit = _int(request, "limit", 100, 1, MAX_LIMIT)
        framework = request.query.get("framework") or None
        state = request.query.get("state") or None
        if state is not None and state not in {s.value for s in TaskState}:
            near = f"TASK_{state.upper().removeprefix('TASK_')}"
            hint = f"did you mean {near}?" if near in {s.value for s in TaskState} else ""
            known = ", ".join(s.value for s in TaskState)
            return problem(f"unknown state {state!r}: {hint or 'one of ' + known}", 400)
        search, sort = request.query.get("search", ""), request.query.get("sort", "")
        if sort and sort.lstrip("-") not in TASK_SORTS:
            return problem(f"sort by one of {', '.join(TASK_SORTS)} (- before: descending)", 400)
        page, total = self.master.task_views(framework, state, offset, limit, search, sort)
        return json_response(Tasks(tasks=page, total=total, offset=offset, limit=limit))

    async def _offers(self, request: web.Request) -> web.StreamResponse:
        offset = _int(request, "offset", 0)
        limit = _int(request, "limit", 100, 1, MAX_LIMIT)
        page, total = self.master.offer_views(offset, limit)
        return json_response(Offers(offers=page, total=total, offset=offset, limit=limit))

    async def _roles(self, request: web.Request) -> web.StreamResponse:
        policy, roles = self.master.role_views()
        return json_response(Roles(policy=policy, roles=roles))

    async def _limits(self, request: web.Request) -> web.StreamResponse:
        queues = self.master.queues
        limits = queues.limits
        seen = dict.fromkeys([*limits.listed(), *queues.counts])
        rows = []
        for principal in seen:
            queue, limit = limits.for_principal(principal)
            counts = queues.counts.get(principal)
            rows.append(
                PrincipalLimit(
                    principal=principal,
                    queue=queue,
                    qps=limit.qps,
                    capacity=limit.capacity,
                    handled=counts.handled if counts else 0,
                    throttled=counts.throttled if counts else 0,
                    refused=counts.refused if counts else 0,
                    queued=counts.queued if counts else 0,
                )
            )
        aggregate = limits.aggregate
        return json_response(
            Limits(
                default=Limit(qps=limits.default.qps, capacity=limits.default.capacity),
                aggregate_default=Limit(qps=aggregate.qps, capacity=aggregate.capacity)
                if aggregate
                else None,
                principals=rows,
            )
        )

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """The most recent events, oldest first: `limit` of them (all the master keeps)."""
        kept = self.master.recent_events
        limit = _int(request, "limit", len(kept) or 1, 1, MAX_LIMIT)
        return json_response(Events(events=list(kept)[-limit:]))

    async def _file(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        if info["name"] not in ("stdout", "stderr"):
            return problem("a task has a stdout and a stderr", 404)
        owner = self.master.framework_principal(info["framework_id"])
        if request.get(KIND) == "framework" and owner != request[PRINCIPAL]:
            # its own frameworks' tasks, nobody else's
            self.refused_lines.refused(
                "http.forbidden",
                principal=request[PRINCIPAL],
                remote=request.remote,
                path=request.path,
            )
            return problem("not a task of one of your frameworks", 403)
        offset = _int(request, "offset", 0)
        length = _int(request, "length", 65536, 0, 1_048_576)
        principal = request.get(PRINCIPAL, "")
        refused = await self._turn(request)
        if refused:
            return problem(refused, 429)
        try:
            got = await self.master.read_task_file(
                principal, info["framework_id"], info["task_id"], info["name"], offset, length
            )
        except FileReadsBusy as e:
            return problem(str(e), 429)
        except FileReadError as e:
            return problem(str(e), 404)
        self.log.info(
            "http.file",
            principal=request.get(PRINCIPAL, ""),
            framework_id=info["framework_id"],
            task_id=info["task_id"],
            name=info["name"],
        )
        return json_response(
            TaskFile(
                framework_id=info["framework_id"],
                task_id=info["task_id"],
                name=info["name"],
                offset=got.offset,
                size=got.size,
                data=got.data.decode("utf-8", errors="replace"),
            )
        )

    async def _why(self, request: web.Request) -> web.StreamResponse:
        """Why a framework (its id, or its name) is offered nothing. A framework principal
        reads its own frameworks' reasons only: another's is not found, as an unknown one."""
        asked = request.match_info["framework"]
        refused = await self._turn(request)
        if refused:
            return problem(refused, 429)
        found = self.master.why_of(asked, request.get(KIND, "operator"), request.get(PRINCIPAL, ""))
        if isinstance(found, Refusal):
            return problem(found.message, REFUSED_STATUS.get(found.code, 409))
        return json_response(found)

    async def _turn(self, request: web.Request) -> str:
        """A question that costs the master work, as a call of its asker's: "" in its
        turn, or why it is refused (master.http.turns)."""
        kind, principal = request.get(KIND, "operator"), request.get(PRINCIPAL, "")
        refused = await take_turn(self.master.queues, kind, principal)
        if refused:
            self.refused_lines.refused(
                "http.rate_limited", principal=principal, remote=request.remote, path=request.path
            )
        return refused

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the whole view, then what changes, tick by tick."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        feed = self.master.feed
        page = feed.open()
        try:
            while True:
                try:
                    message = await within(page.get(), 15.0)
                except TimeoutError:
                    message = ": keep-alive\n\n"
                if not message or page not in feed.pages:
                    break
                await response.write(message.encode())
        except ConnectionError:  # (aiohttp's "Connection lost" mid-write is one too)
            pass  # the page went away
        finally:
            feed.close(page)
        return response
