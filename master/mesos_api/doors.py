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
from master.mesos_api.operator import OperatorApi
from master.mesos_api.scheduler_http import SELF_AUTHENTICATED, SchedulerApi, standby_routes

if TYPE_CHECKING:
    from master.master import Master


def mesos_doors(master: Master) -> list[DoorFactory]:
    """The scheduler API (for Mesos frameworks) and the operator API with the classic
    endpoints (for Mesos's tools), into `master`'s handlers."""
    return [
        lambda auth: SchedulerApi(master, auth),
        lambda auth: OperatorApi(master, authenticated=auth is not None),
    ]


def standby_mesos_routes(leader: Callable[[], Awaitable[str]]) -> list[web.RouteDef]:
    """A standby's answers to Mesos's clients: 307 to the leader (scheduler calls and
    /master/redirect), and /version."""

    async def redirect(_request: web.Request) -> web.StreamResponse:
        return redirect_to(await leader())

    return [web.get(path, redirect) for path in paths("redirect")] + standby_routes(leader)


STANDBY_PUBLIC_PATHS = SELF_AUTHENTICATED
"""A standby leaves these to the routes above (a Mesos framework's redirect needs none)."""
