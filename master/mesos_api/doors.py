"""Mesos's HTTP APIs as doors into a master's HTTP server, and what a standby answers
Mesos's clients. Built by the composition root (master.cli), so that neither the master
nor its HTTP side imports the Mesos adapters, which reach the master's handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from master.http.api import DoorFactory
from master.mesos_api.classic import paths, redirect_to
from master.mesos_api.master_side import MasterSide
from master.mesos_api.operator import OperatorApi
from master.mesos_api.scheduler_http import SELF_AUTHENTICATED, SchedulerApi, standby_routes

if TYPE_CHECKING:
    from master.master import Master


def mesos_doors(master: Master) -> list[DoorFactory]:
    """The scheduler API (for Mesos frameworks) and the operator API with the classic
    endpoints (for Mesos's tools), into `master`'s handlers."""
    side = master_side(master)
    return [
        lambda auth: SchedulerApi(side, auth),
        lambda auth: OperatorApi(side, authenticated=auth is not None),
    ]


def master_side(master: Master) -> MasterSide:
    """The parts of `master` Mesos's APIs use."""
    views, outbox = master.views, master.outbox
    return MasterSide(
        info=master.info,
        books=master.books,
        allocator=master.allocator,
        churn=master.churn,
        tasks_ended=outbox.tasks_ended,
        changes=outbox.changes,
        rounds_run=lambda: master.offer_rounds.count,
        web_ui=lambda: views.web_ui,
        call=master.intake.call,
        connection_gone=master.connection_gone,
        sinks=outbox.sinks,
        topics=master.topics,
        why_of=views.why_of,
    )


def standby_mesos_routes(leader: Callable[[], Awaitable[str]]) -> list[web.RouteDef]:
    """A standby's answers to Mesos's clients: 307 to the leader (scheduler calls and
    /master/redirect), /version, and its own /metrics/snapshot (`master/elected` 0, as
    Mesos's standbys answer it: sent on to the leader, it read 1 from every master)."""

    async def redirect(_request: web.Request) -> web.StreamResponse:
        return redirect_to(await leader())

    async def snapshot(_request: web.Request) -> web.StreamResponse:
        return web.json_response({"master/elected": 0.0})

    return [
        *(web.get(path, redirect) for path in paths("redirect")),
        *(web.get(path, snapshot) for path in ("/metrics/snapshot", "/metrics/snapshot/")),
        *standby_routes(leader),
    ]


STANDBY_PUBLIC_PATHS = SELF_AUTHENTICATED
"""A standby leaves these to the routes above (a Mesos framework's redirect needs none)."""
