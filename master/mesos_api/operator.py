"""Mesos's v1 operator API on the master: `POST /api/v1`, JSON, operator principals only.

Served: GET_HEALTH, GET_VERSION, GET_STATE, GET_FRAMEWORKS, GET_AGENTS, GET_EXECUTORS,
GET_TASKS, GET_METRICS, GET_ROLES, GET_WEIGHTS, UPDATE_WEIGHTS, GET_QUOTA, UPDATE_QUOTA, SET_QUOTA,
REMOVE_QUOTA, GET_MASTER, TEARDOWN, DRAIN_AGENT, DEACTIVATE_AGENT, REACTIVATE_AGENT,
MARK_AGENT_GONE, RESERVE_RESOURCES, UNRESERVE_RESOURCES, CREATE_VOLUMES, DESTROY_VOLUMES,
GROW_VOLUME, SHRINK_VOLUME (our OperateResources), and SUBSCRIBE (the event stream,
master.mesos_api.events); and one call of drfmesos's own beside them, GET_FRAMEWORK_WHY
(`{"type": "GET_FRAMEWORK_WHY", "get_framework_why": {"framework_id": {"value": ID}}}`):
why a framework is offered nothing, as `drfmesos why` says it (GET_FRAMEWORKS is Mesos's,
unchanged). Each call that changes something goes through the handler of the operator
message the bus would carry (UPDATE_WEIGHTS: `SetWeights`; the quota calls: `SetQuotas`,
all or none; TEARDOWN: `Teardown`; the agent calls: `DrainSlave`, `DeactivateSlave`,
`ReactivateSlave`, `MarkSlaveGone`), answered once the registry has it. Every other Mesos
call type is answered 501, saying it is not served here; anything else is a 400 that says
what is wrong, and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import ValidationError

from master.authz import Caller
from master.http.request_keys import KIND, PRINCIPAL
from master.mesos_api import operator_state as views
from master.mesos_api.classic import ClassicEndpoints, metrics_snapshot
from master.mesos_api.events import MAX_SUBSCRIBERS, OperatorEvents
from master.mesos_api.json_stream import stream_json
from master.why_answers import REFUSED_STATUS, Refusal
from protocol import logs
from protocol import mesos_json as mj
from protocol.mesos_json import JSON, version_json
from protocol.wire.codec import describe_validation
from protocol.wire.messages import (
    DeactivateSlave,
    DrainSlave,
    MarkSlaveGone,
    OfferOperation,
    OperateResources,
    ReactivateSlave,
    SetQuotas,
    SetWeights,
    Teardown,
    Wire,
)

if TYPE_CHECKING:
    from master.mesos_api.master_side import MasterSide

MAX_BODY = 1024 * 1024  # bytes of one call (a Mesos operator call is a few hundred)

# Mesos's other master calls (master.proto's Call.Type): known, and not served here
NOT_SERVED = frozenset(
    {
        "GET_FLAGS", "GET_LOGGING_LEVEL", "SET_LOGGING_LEVEL", "LIST_FILES",
        "READ_FILE", "GET_OPERATIONS",
        "GET_MAINTENANCE_STATUS", "GET_MAINTENANCE_SCHEDULE", "UPDATE_MAINTENANCE_SCHEDULE",
        "START_MAINTENANCE", "STOP_MAINTENANCE",
    }
)  # fmt: skip


# Mesos's operator calls on whose resources are: our operation, and where each names them
RESOURCE_CALLS = {
    "RESERVE_RESOURCES": ("RESERVE", "reserve_resources", "resources"),
    "UNRESERVE_RESOURCES": ("UNRESERVE", "unreserve_resources", "resources"),
    "CREATE_VOLUMES": ("CREATE", "create_volumes", "volumes"),
    "DESTROY_VOLUMES": ("DESTROY", "destroy_volumes", "volumes"),
    "GROW_VOLUME": ("GROW_VOLUME", "grow_volume", "volume"),
    "SHRINK_VOLUME": ("SHRINK_VOLUME", "shrink_volume", "volume"),
}


class CallError(Exception):
    """A call answered with an error: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def read_call(request: web.Request) -> dict[str, Any]:
    """The call's JSON object, read at most MAX_BODY bytes far."""
    kind = request.content_type
    if request.headers.get("Content-Type") and kind != "application/json":
        raise CallError(415, f"Content-Type {kind} is not served: send application/json")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise CallError(413, f"a call is at most {MAX_BODY} bytes")
    body = bytearray()
    while chunk := await request.content.read(MAX_BODY + 1 - len(body)):
        body += chunk
        if len(body) > MAX_BODY:  # (read no further: the rest is never buffered)
            raise CallError(413, f"a call is at most {MAX_BODY} bytes")
    try:
        call = mj.read_json(bytes(body))  # (UTF-8, no lone surrogate)
    except ValueError as e:
        raise CallError(400, f"malformed JSON: {e}") from None
    except RecursionError:
        raise CallError(400, "malformed JSON: nested too deeply") from None
    if not isinstance(call, dict) or not isinstance(call.get("type"), str):
        raise CallError(400, 'a call is a JSON object with a "type", e.g. {"type": "GET_STATE"}')
    return call


class OperatorApi:
    public_paths: tuple[str, ...] = ()  # operators only, checked by the API's guard

    def __init__(self, master: MasterSide, authenticated: bool) -> None:
        self.master = master
        self.authenticated = authenticated
        self.events = OperatorEvents(master)
        self.started = time.time()
        self.log = logs.get("master.operator_api", master_id=master.info.master_id)
        m = master
        self.calls: dict[str, Callable[[], JSON]] = {
            "GET_HEALTH": lambda: {"get_health": {"healthy": True}},
            "GET_VERSION": lambda: {"get_version": {"version_info": version_json()}},
            "GET_STATE": lambda: {"get_state": views.get_state(m)},
            "GET_FRAMEWORKS": lambda: {"get_frameworks": views.get_frameworks(m)},
            "GET_AGENTS": lambda: {"get_agents": views.get_agents(m)},
            "GET_EXECUTORS": lambda: {"get_executors": views.get_executors(m)},
            "GET_TASKS": lambda: {"get_tasks": views.get_tasks(m)},
            "GET_ROLES": lambda: {"get_roles": views.get_roles(m)},
            "GET_WEIGHTS": lambda: {"get_weights": views.get_weights(m)},
            "GET_QUOTA": lambda: {"get_quota": views.get_quota(m)},
            "GET_MASTER": lambda: {"get_master": {"master_info": views.this_master_info(m)}},
            "GET_METRICS": lambda: {"get_metrics": self._metrics()},
        }
        self.changes: dict[str, Callable[[dict[str, Any], Caller], Awaitable[None]]] = {
            "UPDATE_WEIGHTS": self._update_weights,
            "DRAIN_AGENT": self._drain_agent,
            "DEACTIVATE_AGENT": self._deactivate_agent,
            "REACTIVATE_AGENT": self._reactivate_agent,
            "MARK_AGENT_GONE": self._mark_agent_gone,
            "TEARDOWN": self._teardown,
            "UPDATE_QUOTA": self._update_quota,
            "SET_QUOTA": self._set_quota,
            "REMOVE_QUOTA": self._remove_quota,
            **{kind: self._operate for kind in RESOURCE_CALLS},
        }

    def routes(self) -> list[web.RouteDef]:
        """`POST /api/v1`, and the classic endpoints (master.mesos_api.classic)."""
        classic = ClassicEndpoints(self.master, self.started)
        return [
            web.post("/api/v1", self.handle),
            web.post("/api/v1/", self.handle),
            *classic.routes(),
        ]

    def close(self) -> None:
        """End every operator stream (the master is stopping)."""
        self.events.close_all()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        principal = request.get(PRINCIPAL, "")
        if self.authenticated and request.get(KIND) != "operator":
            return self._refused(request, 403, "the operator API is for operator principals")
        try:
            call = await read_call(request)
            kind = call["type"]
            if kind == "SUBSCRIBE":
                if len(self.events.subscribers) >= MAX_SUBSCRIBERS:
                    raise CallError(503, f"{MAX_SUBSCRIBERS} operator streams are open already")
                return await self.events.serve(request, principal)
            if kind in self.calls:  # (GET_STATE's lists built as they are written)
                return await stream_json(request, {"type": kind, **self.calls[kind]()})
            if kind == "GET_FRAMEWORK_WHY":
                return web.json_response({"type": kind, "get_framework_why": self._why(call)})
            if kind in self.changes:
                refusals: list[tuple[str, str]] = []
                caller = Caller("operator", principal, None, refused=lambda *r: refusals.append(r))
                await self.changes[kind](call, caller)
                for code, message in refusals[:1]:  # as the bus's Error would have said
                    raise CallError(503 if code == "unavailable" else 400, message)
                return web.Response(status=200)
            if kind in NOT_SERVED:
                raise CallError(501, f"{kind} is not served by drfmesos (docs: mesos-api)")
            raise CallError(400, f"unknown call type {logs.clip(kind, 60)!r}")
        except CallError as e:
            return self._refused(request, e.status, str(e))

    def _refused(self, request: web.Request, status: int, message: str) -> web.Response:
        self.log.info(
            "operator_api.refused",
            principal=request.get(PRINCIPAL, ""),
            status=status,
            reason=logs.clip(message),
        )
        return error(status, message)

    def _metrics(self) -> JSON:
        """`/metrics/snapshot`'s, as Mesos's GET_METRICS lists them (its `timeout` is not
        needed: the master's counters are read at once)."""
        snapshot = metrics_snapshot(self.master, self.started)
        return {"metrics": [{"name": name, "value": value} for name, value in snapshot.items()]}

    def _why(self, call: dict[str, Any]) -> JSON:
        asked = (call.get("get_framework_why") or {}).get("framework_id")
        framework = asked.get("value") if isinstance(asked, dict) else asked
        if not isinstance(framework, str) or not framework:
            raise CallError(400, 'get_framework_why.framework_id: {"value": a framework id}')
        found = self.master.why_of(framework, "operator", "")
        if isinstance(found, Refusal):
            raise CallError(REFUSED_STATUS.get(found.code, 409), found.message)
        answer: JSON = found.model_dump(mode="json")
        return answer

    async def _operate(self, call: dict[str, Any], caller: Caller) -> None:
        """RESERVE_RESOURCES and the like: `{"type": ..., "reserve_resources": {"agent_id":
        {"value": ID}, "resources": [...]}}`, as our OperateResources over the bus."""
        kind = call["type"]
        op_type, field, inner = RESOURCE_CALLS[kind]
        body = call.get(field)
        if not isinstance(body, dict):
            raise CallError(400, f"{field}: an object with agent_id and {inner}")
        try:
            slave_id = mj.id_value(body.get("agent_id") or body.get("slave_id"), "agent_id")
            if inner == "volume":  # (GROW_VOLUME, SHRINK_VOLUME: one volume, resized)
                fields = mj.resize_from_mesos(op_type, body, field)
            else:
                given = body.get(inner) or []
                fields = {"resources": mj.resources_from_mesos(given, f"{field}.{inner}")}
            operation = OfferOperation(type=op_type, **fields)
            msg = OperateResources(slave_id=slave_id, operation=operation)
        except mj.MesosJSONError as e:
            raise CallError(400, str(e)) from None
        except ValidationError as e:
            raise CallError(400, describe_validation(e)) from None
        except (TypeError, AttributeError, OverflowError, RecursionError) as e:
            # a field of the wrong JSON type the reading missed: a bad call, as the
            # scheduler API's ACCEPT answers the same resources (its `_read`)
            raise CallError(400, f"{field}: a field has the wrong type ({e})") from None
        await self.master.call(msg, caller)

    async def _update_weights(self, call: dict[str, Any], caller: Caller) -> None:
        infos = (call.get("update_weights") or {}).get("weight_infos")
        if not isinstance(infos, list) or not infos:
            raise CallError(400, "update_weights.weight_infos: a list of {role, weight}")
        weights: dict[str, float] = {}
        for info in infos:
            if not isinstance(info, dict) or not isinstance(info.get("role"), str):
                raise CallError(400, "update_weights.weight_infos: each needs a role")
            weights[info["role"]] = info.get("weight", 1.0)
        try:
            msg = SetWeights(weights=weights)
        except ValidationError as e:
            raise CallError(400, describe_validation(e)) from None
        # the operators' own route for SetWeights, as a call over the bus takes it
        await self.master.call(msg, caller)

    async def _drain_agent(self, call: dict[str, Any], caller: Caller) -> None:
        """`{"agent_id": {"value": ID}, "max_grace_period": {"nanoseconds": N},
        "mark_gone": false}`, as Mesos 1.9's DrainAgent."""
        body = _body(call, "drain_agent")
        grace = body.get("max_grace_period")
        seconds = None
        if grace is not None:
            nanos = grace.get("nanoseconds") if isinstance(grace, dict) else None
            if isinstance(nanos, bool) or not isinstance(nanos, int):
                raise CallError(400, 'drain_agent.max_grace_period: {"nanoseconds": N}')
            seconds = nanos / 1e9
        gone = body.get("mark_gone", False)
        if not isinstance(gone, bool):
            raise CallError(400, "drain_agent.mark_gone: true or false")
        fields = {"max_grace_period": seconds, "mark_gone": gone}
        await self._operator_call(DrainSlave, _agent(body, "drain_agent"), fields, caller)

    async def _deactivate_agent(self, call: dict[str, Any], caller: Caller) -> None:
        agent = _agent(_body(call, "deactivate_agent"), "deactivate_agent")
        await self._operator_call(DeactivateSlave, agent, {}, caller)

    async def _reactivate_agent(self, call: dict[str, Any], caller: Caller) -> None:
        agent = _agent(_body(call, "reactivate_agent"), "reactivate_agent")
        await self._operator_call(ReactivateSlave, agent, {}, caller)

    async def _mark_agent_gone(self, call: dict[str, Any], caller: Caller) -> None:
        agent = _agent(_body(call, "mark_agent_gone"), "mark_agent_gone")
        await self._operator_call(MarkSlaveGone, agent, {}, caller)

    async def _teardown(self, call: dict[str, Any], caller: Caller) -> None:
        """`{"teardown": {"framework_id": {"value": ID}}}`: as `drfmesos teardown`."""
        body = call.get("teardown")
        framework = body.get("framework_id") if isinstance(body, dict) else None
        value = framework.get("value") if isinstance(framework, dict) else None
        if not isinstance(value, str) or not value:
            raise CallError(400, 'teardown.framework_id: {"value": a framework id}')
        await self._call(Teardown, {"framework_id": value}, caller)

    async def _update_quota(self, call: dict[str, Any], caller: Caller) -> None:
        """Mesos 1.9's `{"update_quota": {"force": false, "quota_configs": [{"role": R,
        "guarantees": {"cpus": {"value": 1}}, "limits": {...}}]}}`: all or none, each
        role's guarantees and limits replaced (neither: cleared). `force` is read and
        changes nothing: no capacity check refuses a quota here (one beyond the cluster is
        set, and said unsatisfiable in the master's log and events)."""
        body = call.get("update_quota")
        configs = body.get("quota_configs") if isinstance(body, dict) else None
        if not isinstance(configs, list) or not configs:
            raise CallError(400, "update_quota.quota_configs: a list of {role, guarantees, limits}")
        quotas = []
        for config in configs:
            if not isinstance(config, dict) or not isinstance(config.get("role"), str):
                raise CallError(400, "update_quota.quota_configs: each needs a role")
            guarantee = _scalars(config.get("guarantees"), "guarantees")
            limits = config.get("limits")  # (none, or {}: no limit, as Mesos's empty map)
            limit = _scalars(limits, "limits") or None
            quotas.append({"role": config["role"], "guarantee": guarantee, "limit": limit})
        await self._call(SetQuotas, {"quotas": quotas}, caller)

    async def _set_quota(self, call: dict[str, Any], caller: Caller) -> None:
        """The older `{"set_quota": {"quota_request": {"role": R, "guarantee": [resources],
        "force": false}}}`, for a role that has no quota: as Mesos since 1.9 reads it, its
        guarantee is its limit too."""
        body = call.get("set_quota")
        request = body.get("quota_request") if isinstance(body, dict) else None
        if not isinstance(request, dict) or not isinstance(request.get("role"), str):
            raise CallError(400, "set_quota.quota_request: an object with a role and a guarantee")
        role = request["role"]
        if role in self.master.allocator.quotas:
            raise CallError(400, f"role {logs.clip(role, 200)} has a quota already: UPDATE_QUOTA")
        try:
            guarantee = mj.resources_from_mesos(
                request.get("guarantee") or [], "set_quota.quota_request.guarantee"
            )
        except mj.MesosJSONError as e:
            raise CallError(400, str(e)) from None
        if not guarantee:
            raise CallError(400, "set_quota.quota_request.guarantee: at least one resource")
        quota = {"role": role, "guarantee": guarantee, "limit": dict(guarantee.items())}
        await self._call(SetQuotas, {"quotas": [quota]}, caller)

    async def _remove_quota(self, call: dict[str, Any], caller: Caller) -> None:
        body = call.get("remove_quota")
        role = body.get("role") if isinstance(body, dict) else None
        if not isinstance(role, str) or not role:
            raise CallError(400, "remove_quota.role: a role")
        if role not in self.master.allocator.quotas:
            raise CallError(400, f"role {logs.clip(role, 200)} has no quota to remove")
        await self._call(SetQuotas, {"quotas": [{"role": role}]}, caller)

    async def _call(self, kind: type[Wire], fields: dict[str, Any], caller: Caller) -> None:
        """The operators' own route for the message, as a call over the bus takes it."""
        try:
            msg = kind.model_validate(fields)
        except ValidationError as e:
            raise CallError(400, describe_validation(e)) from None
        await self.master.call(msg, caller)

    async def _operator_call(
        self, kind: type[Wire], slave_id: str, fields: dict[str, Any], caller: Caller
    ) -> None:
        await self._call(kind, {"slave_id": slave_id, **fields}, caller)


def _body(call: dict[str, Any], name: str) -> dict[str, Any]:
    body = call.get(name)
    if not isinstance(body, dict):
        raise CallError(400, f'{name}: an object with an "agent_id"')
    return body


def _agent(body: dict[str, Any], name: str) -> str:
    agent = body.get("agent_id")
    value = agent.get("value") if isinstance(agent, dict) else None
    if not isinstance(value, str) or not value:
        raise CallError(400, f'{name}.agent_id: {{"value": an agent id}}')
    return value


def _scalars(named: object, field: str) -> dict[str, float]:
    """A QuotaConfig's `guarantees` or `limits`: `{"cpus": {"value": 1.5}, ...}`."""
    if named is None:
        return {}
    if not isinstance(named, dict):
        raise CallError(400, f'update_quota: {field} is a map of {{"value": N}} by name')
    out: dict[str, float] = {}
    for name, scalar in named.items():
        value = scalar.get("value") if isinstance(scalar, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise CallError(
                400, f'update_quota: {field}.{logs.clip(name, 60)}: {{"value": N >= 0}}'
            )
        out[name] = float(value)
    return out
