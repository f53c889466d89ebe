"""Mesos v1 scheduler calls (JSON) as our protocol's messages, so that the bus's handlers
serve them (one set of handlers, two transports). Pure: no I/O, no books.

As Mesos reads them: fields we do not use are ignored; the older `framework_info.role`
is taken beside `roles`, `slave_id` beside `agent_id`. What we cannot serve (an operation
we do not know, a LAUNCH_GROUP for a custom executor, a call type we do not know) is a
SchedulerCallError naming it, which the HTTP side answers with 400.

A list over its message's bound (an ACCEPT's tasks and offers, a RECONCILE's tasks, ...)
is refused before any item of it is read, as the bus's codec refuses one (bounds.md):
reading 6,000 tasks to find them 5,000 too many was a tenant's way to spend the master's
time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from annotated_types import MaxLen
from pydantic import BaseModel, ConfigDict, ValidationError

from protocol import mesos_json as mj
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    CommandInfo,
    Decline,
    Filters,
    FrameworkCapability,
    Kill,
    Message,
    OfferFilters,
    OfferOperation,
    Reconcile,
    ReconcileTask,
    Request,
    Revive,
    Subscribe,
    Suppress,
    TaskGroup,
    TaskInfo,
    TaskRequest,
    Teardown,
    UpdateFramework,
    Wire,
)
from protocol.wire.values import MAX_REFUSE_SECONDS

W = TypeVar("W", bound=Wire)
P = ParamSpec("P")
R = TypeVar("R")

# Our extensions, named so that no Mesos call or capability can clash with them.
DEMAND_CALL = "DRFMESOS_DEMAND"  # {"drfmesos_demand": {"requests": [{resources, count}]}}
PREEMPTION_CAPABILITY = "DRFMESOS_PREEMPTION_NOTICES"  # opt in to the PREEMPTING event
MESOS_EXECUTOR_ADAPTER = '"$DRFMESOS_PYTHON" -m frameworks.mesos_executor'

CALL_TYPES = (
    "SUBSCRIBE",
    "TEARDOWN",
    "ACCEPT",
    "DECLINE",
    "REVIVE",
    "SUPPRESS",
    "KILL",
    "ACKNOWLEDGE",
    "RECONCILE",
    "MESSAGE",
    "REQUEST",
    "UPDATE_FRAMEWORK",
    DEMAND_CALL,
)
# Mesos calls we know and do not serve, and why (docs/reference/mesos-api.md says the same)
NOT_SERVED = {
    "ACCEPT_INVERSE_OFFERS": "drfmesos has no maintenance windows, so no inverse offers",
    "DECLINE_INVERSE_OFFERS": "drfmesos has no maintenance windows, so no inverse offers",
    "SHUTDOWN": "executors end with their framework or their tasks here",
    "ACKNOWLEDGE_OPERATION_STATUS": "drfmesos sends no operation feedback (offers show it)",
    "RECONCILE_OPERATIONS": "drfmesos sends no operation feedback (offers show it)",
}


class SchedulerCallError(ValueError):
    """A call we cannot serve, or one Mesos would refuse too: 400, with this message."""


class MesosCall(BaseModel):
    """The envelope of every call: `type`, the framework it is for, and the call's own
    object under its type's name in lower case (kept as given: each is read below)."""

    model_config = ConfigDict(extra="allow")

    type: str
    framework_id: dict[str, Any] | None = None

    def body(self) -> Mapping[str, Any]:
        body = (self.model_extra or {}).get(self.type.lower()) or {}
        if not isinstance(body, Mapping):
            raise SchedulerCallError(f"{self.type.lower()}: expected an object")
        return body

    def framework(self) -> str:
        if self.framework_id is None:
            raise SchedulerCallError(f"{self.type} needs framework_id")
        return mj.id_value(self.framework_id, "framework_id")


def _no_constant(name: str) -> Any:
    raise SchedulerCallError(f"{name} is not JSON")


def loads(body: bytes) -> object:
    """JSON as Mesos reads it: no NaN or Infinity, UTF-8 with no lone surrogate
    (`mj.read_json`), and nesting too deep is a bad call (Python's parser would raise
    RecursionError), not the server's trouble."""
    try:
        return mj.read_json(body, parse_constant=_no_constant)
    except RecursionError:
        raise SchedulerCallError("JSON nested too deeply") from None


def _read(parse: Callable[P, R]) -> Callable[P, R]:
    """A field of the wrong JSON type (a number where a list or object is read, a count
    that no integer holds) is a bad call, not the server's trouble."""

    @functools.wraps(parse)
    def read(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return parse(*args, **kwargs)
        except (TypeError, AttributeError, OverflowError, RecursionError) as e:
            why = f"{parse.__name__}: a field has the wrong type ({e})"
            raise SchedulerCallError(why) from None

    return read


def parse_call(data: object) -> MesosCall:
    if not isinstance(data, Mapping):
        raise SchedulerCallError("a call is a JSON object with a type")
    try:
        call = MesosCall.model_validate(data)
    except ValidationError as e:
        raise SchedulerCallError(_first_error(e)) from None
    if call.type in NOT_SERVED:
        raise SchedulerCallError(f"{call.type} is not served: {NOT_SERVED[call.type]}")
    if call.type not in CALL_TYPES:
        raise SchedulerCallError(f"unknown call type {call.type!r}")
    return call


@_read
def subscribe_of(
    call: MesosCall, principal: str, inbox: str, incarnation: str, default_role: str = "*"
) -> Subscribe:
    """A SUBSCRIBE as ours: `inbox` names where the master's answers go (the stream);
    `default_role`, the role of a framework_info that names none (Mesos's is `*`)."""
    info = call.body().get("framework_info")
    if not isinstance(info, Mapping):
        raise SchedulerCallError("subscribe.framework_info is needed")
    framework_id = None
    for given in (call.framework_id, info.get("id")):
        if given is not None:
            framework_id = mj.id_value(given, "framework_id")
    return _wire(
        Subscribe,
        framework_id=framework_id,
        inbox=inbox,
        incarnation=incarnation,
        suppressed_roles=_roles(call.body(), "suppressed_roles"),
        **_framework_fields(info, principal, default_role),
    )


@_read
def update_of(call: MesosCall, principal: str) -> UpdateFramework:
    """An UPDATE_FRAMEWORK as ours: its framework_info (whose id, if it names one, is the
    call's framework's) and suppressed_roles."""
    info = call.body().get("framework_info")
    if not isinstance(info, Mapping):
        raise SchedulerCallError("update_framework.framework_info is needed")
    framework_id = call.framework()
    if info.get("id") is not None and mj.id_value(info["id"], "framework_id") != framework_id:
        raise SchedulerCallError("update_framework.framework_info.id is not the call's framework")
    return _wire(
        UpdateFramework,
        framework_id=framework_id,
        suppressed_roles=_roles(call.body(), "suppressed_roles"),
        **_framework_fields(info, principal, "*"),  # (no role named: it keeps its own)
    )


def _framework_fields(info: Mapping[str, Any], principal: str, default_role: str) -> dict[str, Any]:
    """What a FrameworkInfo says of its framework, as our Subscribe's and UpdateFramework's
    fields: its name, role (`default_role` if it names none) or roles, failover timeout,
    capabilities and offer filters."""
    claimed = info.get("principal")
    if claimed is not None and claimed != principal:
        raise PrincipalMismatch(
            f"framework_info.principal {claimed!r} is not the authenticated principal"
        )
    capabilities = {c.get("type") for c in info.get("capabilities") or [] if isinstance(c, Mapping)}
    multi = FrameworkCapability.MULTI_ROLE.value in capabilities
    roles = info.get("roles") or [info.get("role") or ("*" if multi else default_role)]
    if not isinstance(roles, list):
        raise SchedulerCallError("framework_info.roles: a list of role names")
    _at_most(roles, Subscribe, "roles", "framework_info.roles")
    if not all(isinstance(r, str) for r in roles):
        raise SchedulerCallError("framework_info.roles: a list of role names")
    if len(roles) != 1 and not multi:
        raise SchedulerCallError("framework_info.roles: several roles need MULTI_ROLE")
    filters = info.get("offer_filters")  # (by role: each role's own)
    by_role = {r: m for r in roles if (m := mj.min_allocatable_from_mesos(filters, r)) is not None}
    offer_filters = None
    if multi and by_role:
        offer_filters = _wire(OfferFilters, by_role=by_role)
    elif by_role:
        offer_filters = _wire(OfferFilters, min_allocatable=by_role[roles[0]])
    return {
        "offer_filters": offer_filters,
        "name": info.get("name") or "mesos-framework",
        "role": "*" if multi else roles[0],
        "roles": roles if multi else None,
        # (validated as ours: a value of another type is refused, not read as none)
        "failover_timeout": info.get("failover_timeout", 0.0),
        "capabilities": [c for c in FrameworkCapability if c.value in capabilities],
    }


RESOURCE_OPERATIONS = {
    "RESERVE": ("reserve", "resources"),
    "UNRESERVE": ("unreserve", "resources"),
    "CREATE": ("create", "volumes"),
    "DESTROY": ("destroy", "volumes"),
}
"""Mesos's offer operations on whose resources are, and where each names them."""
RESIZE_OPERATIONS = {"GROW_VOLUME": "grow_volume", "SHRINK_VOLUME": "shrink_volume"}
"""Mesos's operations that resize a persistent volume, and the field of each."""


class PrincipalMismatch(SchedulerCallError):
    """framework_info.principal is not who authenticated: 403."""


@_read
def message_of(call: MesosCall) -> Wire:
    """Every call but SUBSCRIBE, as ours."""
    fid = call.framework()
    body = call.body()
    kind = call.type
    if kind == "TEARDOWN":
        return _wire(Teardown, framework_id=fid)
    if kind == "ACCEPT":
        tasks: list[TaskInfo] = []
        groups: list[TaskGroup] = []
        operations: list[OfferOperation] = []
        offer_ids = _ids(body.get("offer_ids"), "offer_ids", Accept)
        for operation in _accept_operations(body):
            op_type = operation.get("type") if isinstance(operation, Mapping) else None
            if op_type in RESOURCE_OPERATIONS:
                if tasks or groups:  # (ours are applied before the Accept's launches)
                    raise SchedulerCallError(f"{op_type} after LAUNCH: operations come first")
                field, inner = RESOURCE_OPERATIONS[op_type]
                given = (operation.get(field) or {}).get(inner) or []
                resources = mj.resources_from_mesos(given, f"{field}.{inner}")
                operations.append(_wire(OfferOperation, type=op_type, resources=resources))
                continue
            if op_type in RESIZE_OPERATIONS:
                if tasks or groups:
                    raise SchedulerCallError(f"{op_type} after LAUNCH: operations come first")
                field = RESIZE_OPERATIONS[op_type]
                fields = mj.resize_from_mesos(op_type, operation.get(field), field)
                operations.append(_wire(OfferOperation, type=op_type, **fields))
                continue
            if op_type == "LAUNCH_GROUP":
                groups.append(_group_of(operation.get("launch_group")))
                continue
            if op_type != "LAUNCH":
                served = ", ".join(["LAUNCH_GROUP", *RESOURCE_OPERATIONS, *RESIZE_OPERATIONS])
                raise SchedulerCallError(f"operation {op_type} is not served: LAUNCH, {served}")
            launch = operation.get("launch") or {}
            tasks += [_adapted(mj.task_from_mesos(t)) for t in launch.get("task_infos") or []]
        return _wire(
            Accept,
            framework_id=fid,
            offer_ids=offer_ids,
            tasks=tasks,
            filters=_filters(body),
            operations=operations,
            groups=groups,
        )
    if kind == "DECLINE":
        offer_ids = _ids(body.get("offer_ids"), "offer_ids", Decline)
        return _wire(Decline, framework_id=fid, offer_ids=offer_ids, filters=_filters(body))
    if kind == "REVIVE":  # (roles: a multi-role framework's; none, every one)
        return _wire(Revive, framework_id=fid, roles=_roles(body))
    if kind == "SUPPRESS":
        return _wire(Suppress, framework_id=fid, roles=_roles(body))
    if kind == "KILL":
        return _wire(
            Kill,
            framework_id=fid,
            task_id=mj.id_value(body.get("task_id"), "kill.task_id"),
            slave_id=mj.optional_id(body, "agent_id", "slave_id"),
            kill_policy=mj.kill_policy_from_mesos(body.get("kill_policy"), "kill.kill_policy"),
        )
    if kind == "ACKNOWLEDGE":
        return _wire(
            Acknowledge,
            framework_id=fid,
            slave_id=mj.optional_id(body, "agent_id", "slave_id"),
            task_id=mj.id_value(body.get("task_id"), "acknowledge.task_id"),
            uuid=mj.ack_uuid_from_mesos(body.get("uuid")),
        )
    if kind == "RECONCILE":
        asked = [
            ReconcileTask(
                task_id=mj.id_value(t.get("task_id"), "reconcile.task_id"),
                slave_id=mj.optional_id(t, "agent_id", "slave_id"),
            )
            for t in _at_most(body.get("tasks") or [], Reconcile, "tasks", "reconcile.tasks")
            if isinstance(t, Mapping)
        ]
        return _wire(Reconcile, framework_id=fid, tasks=asked)
    if kind == "MESSAGE":
        return _wire(
            Message,
            framework_id=fid,
            slave_id=mj.id_value(body.get("agent_id") or body.get("slave_id"), "agent_id"),
            executor_id=mj.id_value(body.get("executor_id"), "executor_id"),
            data=mj.decode_bytes(body.get("data", "")),
        )
    if kind in ("REQUEST", DEMAND_CALL):
        requests = [
            TaskRequest(
                resources=mj.resources_from_mesos(r.get("resources") or []),
                count=int(r.get("count", 1)) if kind == DEMAND_CALL else 1,
            )
            for r in _at_most(body.get("requests") or [], Request, "requests", "requests")
            if isinstance(r, Mapping)
        ]
        return _wire(Request, framework_id=fid, requests=requests)
    raise SchedulerCallError(f"{kind} is not a call with a framework")  # (SUBSCRIBE)


def _group_of(launch: object) -> TaskGroup:
    """A LAUNCH_GROUP as ours: its executor (the default executor, which the slave plays:
    its id and resources) and its task group's tasks, each a command task."""
    if not isinstance(launch, Mapping):
        raise SchedulerCallError("launch_group: expected an object with executor and task_group")
    executor, group = launch.get("executor"), launch.get("task_group")
    if not isinstance(executor, Mapping) or not isinstance(group, Mapping):
        raise SchedulerCallError("launch_group: executor and task_group are needed")
    if executor.get("type") != "DEFAULT":
        raise SchedulerCallError(
            f"launch_group.executor.type {executor.get('type')!r} is not served: a task group "
            "runs under the DEFAULT executor here (a custom executor's tasks: LAUNCH)"
        )
    for field in ("command", "container"):
        if executor.get(field) is not None:
            raise SchedulerCallError(f"launch_group.executor.{field}: not set for DEFAULT")
    given = group.get("tasks") or []
    if not isinstance(given, list):
        raise SchedulerCallError("launch_group.task_group.tasks: expected a list")
    return _wire(
        TaskGroup,
        executor_id=mj.id_value(executor.get("executor_id"), "launch_group.executor.executor_id"),
        executor_resources=mj.resources_from_mesos(
            executor.get("resources") or [], "launch_group.executor.resources"
        ),
        tasks=[mj.task_from_mesos(t) for t in given],
    )


def _adapted(task: TaskInfo) -> TaskInfo:
    """A Mesos executor speaks Mesos's executor API: the slave starts it under our adapter
    (frameworks.mesos_executor), in the slave's own Python, which runs its command."""
    if task.executor is None:
        return task
    command = task.executor.command
    adapter = CommandInfo(
        value=MESOS_EXECUTOR_ADAPTER,
        environment={**command.environment, "MESOS_EXECUTOR_COMMAND": command.value},
    )
    executor = task.executor.model_copy(update={"command": adapter})
    return task.model_copy(update={"executor": executor})


def _accept_operations(body: Mapping[str, Any]) -> list[Any]:
    """An ACCEPT's operations, once their number and their LAUNCHes' tasks are found
    within an Accept's bounds (before any of them is read)."""
    operations = body.get("operations") or []
    if not isinstance(operations, list):
        raise SchedulerCallError("accept.operations: expected a list")
    tasks = _most(Accept, "tasks")
    _at_most(operations, Accept, "operations", "accept.operations", more=tasks)
    launched = others = 0
    for operation in operations:
        kind = operation.get("type") if isinstance(operation, Mapping) else None
        if kind == "LAUNCH_GROUP":  # (its tasks count with the LAUNCHes')
            launch = operation.get("launch_group")
            group = launch.get("task_group") if isinstance(launch, Mapping) else None
            infos = group.get("tasks") if isinstance(group, Mapping) else None
            launched += len(infos) if isinstance(infos, list) else 0
            continue
        if kind != "LAUNCH":
            others += 1  # (a resource operation, or one refused as it is read)
            continue
        launch = operation.get("launch")
        infos = launch.get("task_infos") if isinstance(launch, Mapping) else None
        launched += len(infos) if isinstance(infos, list) else 0
    if launched > tasks:
        raise SchedulerCallError(f"accept: at most {tasks} tasks are launched, not {launched}")
    most = _most(Accept, "operations")
    if others > most:  # (the LAUNCHes become the Accept's tasks, the rest its operations)
        raise SchedulerCallError(f"accept: at most {most} operations but LAUNCH, not {others}")
    return operations


def _most(cls: type[Wire], field: str) -> int:
    """How many items `cls`'s list `field` holds at most (its bound on the wire)."""
    return next(m.max_length for m in cls.model_fields[field].metadata if isinstance(m, MaxLen))


def _at_most(items: object, cls: type[Wire], field: str, what: str, more: int = 0) -> Any:
    """`items`, if they are no more than `cls.field` holds (and `more`); else refused
    before any of them is read."""
    most = _most(cls, field) + more
    if isinstance(items, list) and len(items) > most:
        raise SchedulerCallError(f"{what}: at most {most} items, not {len(items)}")
    return items


def _ids(items: object, field: str, cls: type[Wire]) -> list[str]:
    if not isinstance(items, list):
        raise SchedulerCallError(f"{field}: expected a list of ids")
    return [mj.id_value(i, field) for i in _at_most(items, cls, field, field)]


def _filters(body: Mapping[str, Any]) -> Filters:
    """An ACCEPT's or DECLINE's filter, as Mesos's allocator reads it: one longer than a
    year is a year, a negative one (or NaN) the default 5 s; the call goes through
    either way (refused, a DECLINE left its offer outstanding, an ACCEPT its tasks
    unlaunched). A value that is no number is a 400, as Mesos's JSON parse refuses it."""
    filters = body.get("filters")
    if not isinstance(filters, Mapping) or filters.get("refuse_seconds") is None:
        return Filters()
    seconds = filters["refuse_seconds"]
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        if seconds > MAX_REFUSE_SECONDS:
            return Filters(refuse_seconds=MAX_REFUSE_SECONDS)
        if not seconds >= 0:  # (negative, or NaN)
            return Filters()
    return _wire(Filters, refuse_seconds=seconds)


def _wire(cls: type[W], **fields: Any) -> W:
    try:
        return cls(**fields)
    except ValidationError as e:
        raise SchedulerCallError(_first_error(e)) from None


def _first_error(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def _roles(body: Mapping[str, Any], field: str = "roles") -> list[str]:
    """A SUPPRESS's or REVIVE's roles (Mesos's `repeated string roles`), or a SUBSCRIBE's
    `suppressed_roles`."""
    roles = _at_most(body.get(field) or [], Revive, "roles", field)
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise SchedulerCallError(f"{field}: a list of role names")
    return roles
