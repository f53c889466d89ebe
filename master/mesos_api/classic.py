"""Mesos's classic (v0) JSON endpoints, read-only, for tools written before the v1 API.

`/master/state` (`/state`, `/state.json`), `/master/frameworks`, `/master/slaves`,
`/master/tasks` (`limit`, `offset`, `order`, `framework_id`, `task_id`), `/master/roles`,
`/master/weights`, `/master/quota`, `/master/health`, `/master/redirect`, and
`/metrics/snapshot` with Mesos's metric names for what we have. Each answers with and
without `/master` and with or without a trailing slash, as Mesos does; a query string such
as `?_ts=` is ignored. `/health` without the prefix stays drfmesos's own (200 with JSON;
Mesos's is 200 with no body). Field names are Mesos's v0 ones; resources are `{name: amount}` there.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from aiohttp import web

from master import slave_values
from master.books import Framework, Slave, Task
from master.mesos_api.json_stream import Lazy, stream_json
from master.mesos_api.operator_state import (
    agent_pid,
    get_quota,
    isolation_warning,
    maintenance_json,
    offered,
    offered_values,
    roles_held,
    this_master_info,
)
from master.orphans import Orphan
from protocol.mesos_json import JSON, MESOS_VERSION, resources_to_mesos, task_policies_to_mesos
from protocol.wire.discrete import EMPTY, Discrete
from protocol.wire.reservations import by_role
from protocol.wire.resources import Resources

if TYPE_CHECKING:
    from master.mesos_api.master_side import MasterSide

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TASK_STATES_COUNTED = (
    "TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING", "TASK_UNREACHABLE",
)  # fmt: skip
TASKS_ENDED = (
    "TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_ERROR",
    "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR",
)  # fmt: skip


def paths(name: str, prefixed_only: bool = False) -> list[str]:
    """`/master/NAME` and `/NAME`, each with and without a trailing slash."""
    bases = [f"/master/{name}"] if prefixed_only else [f"/master/{name}", f"/{name}"]
    return [p for base in bases for p in (base, base + "/")]


def _resources(r: Resources, values: Discrete = EMPTY) -> dict[str, float | str]:
    """Mesos's v0 form: amounts by name, whoever's (reservations: `_by_role`); a range's
    or set's text (`"[31000-31001]"`)."""
    return {
        name: str(values[name]) if name in values else a
        for name, a in sorted(r.quantities().items())
    }


def _by_role(r: Resources) -> dict[str, Resources]:
    """What of `r` is reserved for each role ("*": unreserved)."""
    return {role: Resources.from_millis(m) for role, m in by_role(r.millis).items()}


def task_v0(task: Task, role: str) -> JSON:
    statuses = []
    if task.status is not None:
        statuses.append({"state": task.status.state.value, "timestamp": task.status.timestamp})
    executor = task.info.executor
    return {
        "id": task.task_id,
        "name": task.info.name or task.task_id,
        "framework_id": task.framework_id,
        "executor_id": executor.executor_id if executor else "",
        "slave_id": task.slave_id,
        "state": task.state.value,
        "resources": _resources(task.resources, task.info.discrete),
        "role": role,
        "statuses": statuses,
        **task_policies_to_mesos(task.info),
    }


def orphan_v0(orphan: Orphan) -> JSON:
    """A task a slave runs for a framework that is not registered (yet), as Mesos's state
    lists it: an operator sees what runs and whose it is before its framework is back."""
    executor = orphan.task.executor
    return {
        "id": orphan.task.task_id,
        "name": orphan.task.name or orphan.task.task_id,
        "framework_id": orphan.framework_id,
        "executor_id": executor.executor_id if executor else "",
        "slave_id": orphan.slave_id,
        "state": orphan.state.value,
        "resources": _resources(orphan.task.resources),
        "statuses": [],
    }


def framework_v0(m: MasterSide, fw: Framework) -> JSON:
    live = fw.framework_id in m.books.frameworks
    offers = offered(m, fw.offers)
    held = m.allocator.allocation(fw.framework_id) if live else Resources()
    used = held.subtract_clamped(offers)
    fw_values = Discrete.union(t.info.discrete for t in fw.tasks.values() if not t.terminal)
    return {
        "id": fw.framework_id,
        "name": fw.name,
        "principal": fw.principal,
        "role": fw.role if fw.roles is None else "*",  # (a multi-role one's are its roles)
        "roles": fw.all_roles(),
        "user": "",
        "hostname": "",
        "webui_url": "",
        "active": fw.connected,
        "connected": fw.connected,
        "recovered": live and not fw.inbox,
        "failover_timeout": fw.failover_timeout,
        "checkpoint": True,
        "capabilities": [c.value for c in fw.capabilities()],
        "registered_time": fw.registered_at,
        "unregistered_time": fw.removed_at or 0,
        "resources": _resources(used, fw_values),
        "used_resources": _resources(used, fw_values),
        "offered_resources": _resources(offers, offered_values(m, fw.offers)),
        # (built as the answer is written: master.mesos_api.json_stream)
        "tasks": Lazy(
            task_v0(t, fw.task_role(t.info)) for t in [*fw.tasks.values(), *fw.unreachable.values()]
        ),
        "completed_tasks": Lazy(task_v0(t, fw.task_role(t.info)) for t in [*fw.ended.values()]),
        "offers": [
            {
                "id": o,
                "framework_id": fw.framework_id,
                "slave_id": m.books.offers[o].slave_id,
                "resources": _resources(m.books.offers[o].resources, m.books.offers[o].discrete),
            }
            for o in fw.offers
            if o in m.books.offers
        ],
        "executors": [],
    }


def slave_v0(m: MasterSide, slave: Slave) -> JSON:
    offers = offered(m, slave.offers)
    held = slave.total.subtract_clamped(m.allocator.free(slave.slave_id))
    owned = _by_role(slave.total)
    return {
        "id": slave.slave_id,
        "pid": agent_pid(slave),
        "hostname": slave.hostname,
        "resources": _resources(slave.total, slave.discrete),
        "used_resources": _resources(
            held.subtract_clamped(offers), slave_values.in_use(m.books, slave)
        ),
        "offered_resources": _resources(offers, offered_values(m, slave.offers)),
        "reserved_resources": {
            role: _resources(r) for role, r in sorted(owned.items()) if role != "*"
        },
        "reserved_resources_full": {
            role: resources_to_mesos(r) for role, r in sorted(owned.items()) if role != "*"
        },
        "unreserved_resources": _resources(owned.get("*", Resources()), slave.discrete),
        "attributes": dict(slave.attributes),
        **maintenance_json(m, slave),
        "version": MESOS_VERSION,
        **isolation_warning(slave),
    }


def _counted(
    tasks: Iterable[Task], states: tuple[str, ...] = (*TASK_STATES_COUNTED, *TASKS_ENDED)
) -> dict[str, int]:
    """Tasks by state, each of `states` named (every live state and end, as Mesos's
    summary counts them, by default)."""
    counts = dict.fromkeys(states, 0)
    for task in tasks:
        counts[task.state.value] = counts.get(task.state.value, 0) + 1
    return counts


def summary_v0(m: MasterSide) -> JSON:
    """Mesos's `/master/state-summary`: each slave and framework with counts of their
    tasks by state, and which frameworks run on which slave; no task itself."""
    frameworks = [*m.books.frameworks.values()]
    live: dict[str, list[Task]] = {}  # each slave's live tasks
    on: dict[str, set[str]] = {}  # each slave's frameworks with a live task there
    for fw in frameworks:
        for task in (*fw.tasks.values(), *fw.unreachable.values()):
            live.setdefault(task.slave_id, []).append(task)
            on.setdefault(task.slave_id, set()).add(fw.framework_id)
    slaves = [
        {
            **slave_v0(m, slave),
            "active": slave.connected,
            **_counted(live.get(slave.slave_id, ())),
            "framework_ids": sorted(on.get(slave.slave_id, ())),
        }
        for slave in [*m.books.slaves.values()]
    ]
    summaries = []
    for fw in frameworks:
        whole = framework_v0(m, fw)
        for key in ("tasks", "completed_tasks", "offers", "executors"):
            whole.pop(key)
        tasks = [*fw.tasks.values(), *fw.unreachable.values(), *fw.ended.values()]
        summaries.append(
            {
                **whole,
                **_counted(tasks),
                "slave_ids": sorted({t.slave_id for t in tasks if not t.terminal}),
            }
        )
    return {"slaves": slaves, "frameworks": summaries}


def slaves_v0(m: MasterSide) -> Lazy:
    """Every slave, each built when the answer reaches it (one gone by then is left out)."""
    slaves = [*m.books.slaves.values()]
    return Lazy(slave_v0(m, s) for s in slaves if m.books.slaves.get(s.slave_id) is s)


def frameworks_v0(m: MasterSide, frameworks: Mapping[str, Framework]) -> Lazy:
    """These frameworks, each built when the answer reaches it."""
    return Lazy(framework_v0(m, f) for f in [*frameworks.values()])


def metrics_snapshot(m: MasterSide, started: float) -> dict[str, float]:
    """Mesos's metric names (`/metrics/snapshot`) for what this master counts."""
    a = m.allocator
    total, held = a.total, a.allocated_total()
    out: dict[str, float] = {
        "master/elected": 1.0,
        "master/uptime_secs": round(time.time() - started, 3),
    }
    for name in sorted(set(total) | {"cpus", "mem", "disk", "gpus"}):
        t, u = total.get(name, 0.0), held.get(name, 0.0)
        out[f"master/{name}_total"] = t
        out[f"master/{name}_used"] = u
        out[f"master/{name}_percent"] = u / t if t else 0.0
        out[f"allocator/mesos/resources/{name}/total"] = t
        out[f"allocator/mesos/resources/{name}/offered_or_allocated"] = u
    frameworks = m.books.frameworks.values()
    live = _counted(
        (t for fw in frameworks for t in (*fw.tasks.values(), *fw.unreachable.values())),
        TASK_STATES_COUNTED,
    )
    for state, n in (*live.items(), *((s, m.tasks_ended[s]) for s in TASKS_ENDED)):
        out["master/" + state.lower().replace("task_", "tasks_")] = n  # master/tasks_running
    slaves = m.books.slaves.values()
    connected = sum(1 for s in slaves if s.connected)
    in_use = sum(1 for s in slaves if s.connected and s.slave_id not in m.books.maintenance)
    active = sum(1 for f in frameworks if f.connected)
    out |= {
        "master/slaves_active": in_use,
        "master/slaves_inactive": len(m.books.slaves) - in_use,
        "master/slaves_connected": connected,
        "master/slaves_disconnected": len(m.books.slaves) - connected,
        "master/slaves_unreachable": len(m.books.removed_slaves),
        "master/slave_registrations": m.churn.registrations,
        "master/slave_reregistrations": m.churn.reregistrations,
        "master/slave_removals": sum(m.churn.removals.values()),
        "master/frameworks_active": active,
        "master/frameworks_inactive": len(m.books.frameworks) - active,
        "master/frameworks_connected": active,
        "master/frameworks_disconnected": len(m.books.frameworks) - active,
        "master/outstanding_offers": len(m.books.offers),
        "allocator/mesos/allocation_runs": m.rounds_run(),
        "allocator/mesos/offer_filters/roles/*/active": 0,
    }
    for view in a.roles.views():
        out[f"allocator/mesos/roles/{view.role}/shares/dominant"] = view.share
    for fw in frameworks:
        out[f"allocator/mesos/frameworks/{fw.framework_id}/shares/dominant"] = a.dominant_share(
            fw.framework_id
        )
    return out


class ClassicEndpoints:
    def __init__(self, master: MasterSide, started: float) -> None:
        self.master = master
        self.started = started

    def routes(self) -> list[web.RouteDef]:
        table: list[tuple[list[str], Handler]] = [
            ([*paths("state"), *paths("state.json")], self.state),
            (paths("state-summary"), self.summary),
            (paths("frameworks"), self.frameworks),
            (paths("slaves"), self.slaves),
            (paths("tasks"), self.tasks),
            (paths("roles"), self.roles),
            (paths("weights"), self.weights),
            (paths("quota"), self.quota),
            (paths("health", prefixed_only=True), self.health),
            (paths("redirect"), self.redirect),
            (["/metrics/snapshot", "/metrics/snapshot/"], self.metrics),
        ]
        return [web.get(path, handler) for paths_, handler in table for path in paths_]

    def _pid(self) -> str:
        return "master@" + self.master.web_ui().split("//")[-1].rstrip("/")

    async def state(self, request: web.Request) -> web.StreamResponse:
        m = self.master
        connected = sum(1 for s in m.books.slaves.values() if s.connected)
        return await stream_json(
            request,
            {
                "version": MESOS_VERSION,
                "id": m.info.master_id,
                "pid": self._pid(),
                "hostname": m.web_ui().split("//")[-1].rsplit(":", 1)[0],
                "leader": self._pid(),
                "leader_info": this_master_info(m),
                "start_time": self.started,
                "elected_time": self.started,
                "activated_slaves": connected,
                "deactivated_slaves": len(m.books.slaves) - connected,
                "unreachable_slaves": len(m.books.removed_slaves),
                "slaves": slaves_v0(m),
                "frameworks": frameworks_v0(m, m.books.frameworks),
                "completed_frameworks": frameworks_v0(m, m.books.completed_frameworks),
                "orphan_tasks": [orphan_v0(o) for o in m.books.orphans],
                "unregistered_frameworks": sorted(m.books.orphans.frameworks()),
            },
        )

    async def summary(self, request: web.Request) -> web.StreamResponse:
        m = self.master
        hostname = m.web_ui().split("//")[-1].rsplit(":", 1)[0]
        return await stream_json(request, {"hostname": hostname, **summary_v0(m)})

    async def frameworks(self, request: web.Request) -> web.StreamResponse:
        m = self.master
        return await stream_json(
            request,
            {
                "frameworks": frameworks_v0(m, m.books.frameworks),
                "completed_frameworks": frameworks_v0(m, m.books.completed_frameworks),
                "unregistered_frameworks": sorted(m.books.orphans.frameworks()),
            },
        )

    async def slaves(self, request: web.Request) -> web.StreamResponse:
        return await stream_json(
            request, {"slaves": slaves_v0(self.master), "recovered_slaves": []}
        )

    async def tasks(self, request: web.Request) -> web.StreamResponse:
        """As Mesos: by the time of each task's first status, newest first, or oldest
        first with `order=asc` (any other order is `des`); `limit` (100; -1 is all) from
        `offset` (0); a value that is not an integer is its default, as Mesos reads it;
        `framework_id` and `task_id` filter."""
        limit = _mesos_int(request, "limit", 100)
        offset = max(0, _mesos_int(request, "offset", 0))
        ascending = request.query.get("order") == "asc"
        framework_id = request.query.get("framework_id")
        task_id = request.query.get("task_id")
        m = self.master
        everyone = [*m.books.frameworks.values(), *m.books.completed_frameworks.values()]
        found = [
            (t.launched_wall, task_v0(t, fw.task_role(t.info)))
            for fw in everyone
            if framework_id is None or fw.framework_id == framework_id
            for t in (*fw.tasks.values(), *fw.unreachable.values(), *fw.ended.values())
            if task_id is None or t.task_id == task_id
        ]
        found.sort(key=lambda pair: pair[0], reverse=not ascending)
        end = None if limit < 0 else offset + limit  # Mesos's -1, cast to size_t: all
        return web.json_response({"tasks": [t for _, t in found[offset:end]]})

    async def roles(self, request: web.Request) -> web.StreamResponse:
        roles = [
            {
                "name": role.view.role,
                "weight": role.view.weight,
                "frameworks": [f.framework_id for f in role.frameworks],
                "resources": _resources(role.held),
            }
            for role in roles_held(self.master)
        ]
        return web.json_response({"roles": roles})

    async def weights(self, request: web.Request) -> web.StreamResponse:
        views = self.master.allocator.roles.views()
        return web.json_response([{"role": v.role, "weight": v.weight} for v in views])

    async def quota(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(get_quota(self.master)["status"])

    async def health(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=200)

    async def redirect(self, request: web.Request) -> web.StreamResponse:
        """The leader is this master: here (a standby answers with the leader's)."""
        return redirect_to(self.master.web_ui())

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(metrics_snapshot(self.master, self.started))


def redirect_to(leader_url: str) -> web.StreamResponse:
    """Mesos's /master/redirect: 307 to `//HOST:PORT` of the leading master."""
    address = leader_url.split("//")[-1].rstrip("/")
    if not address:
        return web.json_response({"error": "no master leads now"}, status=503)
    return web.Response(status=307, headers={"Location": f"//{address}"})


def _mesos_int(request: web.Request, name: str, default: int) -> int:
    """A query integer as Mesos's `numify<int>` reads it: anything else is the default."""
    raw = request.query.get(name, "")
    try:
        return int(raw) if raw.strip() == raw and len(raw) <= 20 else default
    except ValueError:
        return default
