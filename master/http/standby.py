"""What a standby master serves: `/health`, `/metrics`, and Mesos's `/master/redirect`
and `/metrics/snapshot` (master.mesos_api.doors); any other GET is sent on to the leader
(307, as a Mesos master not leading does).

A standby holds no books, so it answers only that it is alive, that it does not lead
(`elected` 0, as Mesos's master/elected) and who does, so that a tool can tell a standby
from a dead master. It listens where the master's HTTP API would, and gives the port
back when it is elected (see master.cli: the leader's own API takes over), and takes it
again when its term ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from master.http.auth import PrincipalAuth
from master.http.config import HttpConfig, PortTaken
from master.http.metrics import elected_metric
from master.http.models import Health
from master.http.responses import (
    json_response,
    metrics_response,
    problem,
    secure_headers,
    serve_site,
    unauthenticated,
)
from protocol import logs

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Standby(Collector):
    def collect(self) -> Iterator[Metric]:
        yield elected_metric(0)


class StandbyHttp:
    def __init__(
        self,
        config: HttpConfig,
        master_id: str,
        leader: Callable[[], Awaitable[str]],
        routes: Sequence[web.RouteDef] = (),
        public_paths: Sequence[str] = (),
    ) -> None:
        """`leader`: the leading master's HTTP address, as the election knows it;
        `routes`: what else a standby answers (Mesos's clients: master.mesos_api.doors),
        of which `public_paths` check their callers themselves."""
        self.config = config
        self.routes, self.public_paths = list(routes), frozenset(public_paths)
        self.master_id = master_id
        self.leader = leader
        self.auth = PrincipalAuth(config.credentials) if config.credentials else None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Standby())
        self.runner: web.AppRunner | None = None
        self.log = logs.get("master.http.standby", master_id=master_id)

    async def start(self, *, first: bool = False) -> None:
        """Serve. A port in use at the process's `first` start stops it (`PortTaken`);
        after a term (the port taken meanwhile) it is said in the log, and the standby
        goes on without."""
        app = web.Application(middlewares=[self._guard])
        app.on_response_prepare.append(secure_headers)
        app.add_routes([web.get("/health", self._health), web.get("/metrics", self._metrics)])
        app.add_routes(self.routes)
        app.add_routes([web.get("/{tail:.*}", self._to_leader)])  # (last: the rest)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        try:
            url = await serve_site(self.runner, self.config, self.log)
        except OSError as e:
            await self.stop()
            if first:
                where = f"{self.config.host}:{self.config.port}"
                raise PortTaken(f"--http {where}: {e.strerror or e}") from None
            self.log.error("standby_http.failed", error=str(e), port=self.config.port)
            return
        self.log.info("standby_http.started", url=url)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """As the leader's API: an operator's credentials, unless these are left open."""
        public = self.config.open_metrics or request.path in self.public_paths
        if self.auth is not None and not public:
            who = await self.auth.principal(request.headers.get("Authorization"), request.remote)
            if who is None:
                said = unauthenticated(request.headers.get("Authorization"), "operator")
                return problem(said, 401)
            if who.kind != "operator":
                return problem("operator credentials needed", 401)
        return await handler(request)

    async def _health(self, request: web.Request) -> web.StreamResponse:
        return json_response(
            Health(
                status="standby",
                master_id=self.master_id,
                elected=False,
                leader=await self.leader(),
            )
        )

    async def _to_leader(self, request: web.Request) -> web.StreamResponse:
        """What the leader answers (its /state, its web UI, ...): 307 there, as Mesos's
        masters that do not lead redirect; 503 saying so while nobody leads."""
        address = (await self.leader()).split("//")[-1].rstrip("/")
        if not address:
            return problem(
                "this master is a standby and no master leads now: "
                "ask again once one is elected (/health says who leads)",
                503,
            )
        return web.Response(status=307, headers={"Location": f"//{address}{request.path_qs}"})

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        return metrics_response(self.registry)
