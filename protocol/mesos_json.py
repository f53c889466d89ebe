"""Our messages as Mesos's v1 JSON (include/mesos/v1/mesos.proto, in proto3's JSON form).

The vocabulary that the Mesos HTTP APIs (scheduler, executor, operator) share: ids as
`{"value": ...}`, resources as `[{name, type: SCALAR, scalar: {value}, role}]`, bytes as
base64, task states and reasons by Mesos's names (`SLAVE` is `AGENT` in v1), TaskInfo,
TaskStatus, Offer and MasterInfo. Parsing is as lenient as Mesos's: fields we do not use
are ignored; what we cannot honour (a non-scalar resource) is a MesosJSONError naming it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from protocol.mesos_reservations import identity_fields, identity_of
from protocol.wire.discrete import EMPTY as NO_VALUES
from protocol.wire.discrete import (
    MAX_ITEMS,
    MAX_RANGES,
    Discrete,
    ItemSet,
    Ranges,
    Value,
    with_counts,
)
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    ExecutorInfo,
    HealthCheck,
    KillPolicy,
    Offer,
    Reason,
    Source,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.reservations import ReservationError, is_plain
from protocol.wire.resources import ResourceError, Resources

MESOS_VERSION = "1.11.0"
"""The Mesos release whose v1 API we answer as (pymesos reads it from /version)."""

JSON = dict[str, Any]
E = TypeVar("E", Reason, Source)


class MesosJSONError(ValueError):
    """Mesos JSON we cannot read: a missing or mistyped field, named in the message."""


# A `\uD800`-`\uDFFF` escape: with a surrogate's own three bytes (which strict UTF-8
# refuses), the only way into a str that no UTF-8 text holds.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_json(body: bytes, parse_constant: Callable[[str], Any] | None = None) -> object:
    """A call's body as JSON, every string of it Unicode text: MesosJSONError for a body
    that is not UTF-8 (an optional BOM aside), or for a lone surrogate (`"\\ud800"`).
    Python's json reads one into a str that nothing can encode later, and pydantic checks
    a model's own strings for them but not those in its dicts and lists (a command's
    environment): one there raised in the master's Accept after it had taken the offer
    (attack86). Malformed JSON raises as json.loads raises it (ValueError,
    RecursionError)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MesosJSONError(f"the body is not UTF-8: {e.reason} at byte {e.start}") from None
    data = json.loads(text, parse_constant=parse_constant)
    if _SURROGATE_ESCAPE.search(text):  # (seldom: only then is every string looked at)
        _no_lone_surrogate(data)
    return data


def _no_lone_surrogate(data: object) -> None:
    todo = [data]
    while todo:  # (no recursion: json nests deeper than Python's stack)
        item = todo.pop()
        if isinstance(item, dict):
            todo += item.keys()
            todo += item.values()
        elif isinstance(item, list):
            todo += item
        elif isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                raise MesosJSONError(
                    f"{_short(item)} holds a lone surrogate: a string is Unicode text"
                ) from None


# --- ids and bytes -------------------------------------------------------------------------


def mesos_id(value: str) -> JSON:
    return {"value": value}


def id_value(obj: object, field: str = "id") -> str:
    """`{"value": "x"}` -> "x" (the only form Mesos's JSON gives an id)."""
    if isinstance(obj, Mapping):
        value = obj.get("value")
        if isinstance(value, str) and value:
            return value
    raise MesosJSONError(f'{field}: expected {{"value": "..."}}, got {_short(obj)}')


def optional_id(obj: Mapping[str, Any], *fields: str) -> str | None:
    """The first of `fields` present in `obj`, as an id value (agent_id or slave_id)."""
    for field in fields:
        if obj.get(field) is not None:
            return id_value(obj[field], field)
    return None


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: object, field: str = "data") -> bytes:
    if not isinstance(text, str):
        raise MesosJSONError(f"{field}: expected base64 text, got {_short(text)}")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise MesosJSONError(f"{field}: not base64") from None


# --- resources -----------------------------------------------------------------------------


def resources_to_mesos(
    resources: Resources, role: str = "*", discrete: Discrete = NO_VALUES
) -> list[JSON]:
    """Scalars, with their reservations and volumes (`mesos_reservations`), and the
    ranges and sets whose values `discrete` holds (`"type": "RANGES"`, `"ranges":
    {"range": [{"begin", "end"}]}`; `"type": "SET"`, `"set": {"item": [...]}`) in place of
    their counts. `role` is whom they are allocated to, Mesos's `allocation_info.role`: in
    Mesos's pre-1.9 format a resource's own `role` other than `*` claims a static
    reservation, so a client would read every offer as reserved."""
    allocated = {"allocation_info": {"role": role}} if role != "*" else {}
    out: list[JSON] = []
    for name, amount in sorted(resources.items()):
        whose = {"name": name, "role": "*"} if is_plain(name) else identity_fields(name)
        value = discrete.get(name)
        if value is None:
            out.append({**whose, "type": "SCALAR", "scalar": {"value": amount}, **allocated})
        else:
            out.append({**whose, "type": value.kind, **value.to_mesos(), **allocated})
    return out


def resources_from_mesos(items: object, field: str = "resources") -> Resources:
    """Scalars summed by identity: by name, and whose (a reservation, a volume); ranges
    and sets refused (where only quantities make sense)."""
    resources, discrete = resources_and_values_from_mesos(items, field)
    if discrete:
        name = next(iter(discrete))
        raise MesosJSONError(f"{field}: {name} is {discrete[name].kind}; only SCALAR here")
    return resources


def resize_from_mesos(kind: str, body: object, field: str) -> dict[str, Any]:
    """A GROW_VOLUME's or SHRINK_VOLUME's fields (`{"volume": Resource, "addition":
    Resource}`, `{"volume": Resource, "subtract": {"value": MB}}`) as our OfferOperation's
    (resources, addition, subtract)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("volume"), Mapping):
        raise MesosJSONError(f"{field}.volume: a Resource")
    out: dict[str, Any] = {"resources": resources_from_mesos([body["volume"]], f"{field}.volume")}
    if kind == "GROW_VOLUME":
        if not isinstance(body.get("addition"), Mapping):
            raise MesosJSONError(f"{field}.addition: a Resource")
        out["addition"] = resources_from_mesos([body["addition"]], f"{field}.addition")
    else:
        subtract = body.get("subtract")
        value = subtract.get("value") if isinstance(subtract, Mapping) else None
        out["subtract"] = _number(value, f'{field}.subtract: {{"value": a number}}')
    return out


def resources_and_values_from_mesos(
    items: object, field: str = "resources"
) -> tuple[Resources, Discrete]:
    """Scalars summed by identity (by name, and whose: a reservation, a volume), and
    ranges and sets joined by name (counted by size in the Resources): a task's
    resources, with the ports it asks for."""
    if not isinstance(items, list):
        raise MesosJSONError(f"{field}: expected a list, got {_short(items)}")
    if len(items) > 256:
        raise MesosJSONError(f"{field}: at most 256 resources, got {len(items)}")
    amounts: dict[str, float] = {}
    values: dict[str, list[Value]] = {}
    try:
        for item in items:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise MesosJSONError(f"{field}: each resource needs a name, got {_short(item)}")
            name = item["name"]
            if item.get("reservations") or item.get("role") not in (None, "*") or item.get("disk"):
                try:  # (whose it is: the identity our key names)
                    name = identity_of(item, name)
                except ReservationError as e:
                    raise MesosJSONError(f"{field}: {e}") from None
            kind = item.get("type", "SCALAR")
            if kind == "SCALAR":
                value = (item.get("scalar") or {}).get("value")
                number = _number(value, f"{field}: {name} needs scalar.value, a number")
                amounts[name] = amounts.get(name, 0.0) + number
            elif kind in ("RANGES", "SET"):
                values.setdefault(name, []).append(_value_from_mesos(item, name, kind, field))
            else:
                raise MesosJSONError(
                    f"{field}: {name} is {_short(kind)}; SCALAR, RANGES and SET exist here"
                )
        discrete = Discrete({n: vs[0].joined(vs[1:]) for n, vs in values.items()})
        clash = set(amounts) & set(discrete)
        if clash:
            raise MesosJSONError(f"{field}: {sorted(clash)[0]} is both SCALAR and not")
        return with_counts(Resources(amounts), discrete, field), discrete
    except ResourceError as e:
        raise MesosJSONError(f"{field}: {e}") from None


def _value_from_mesos(item: Mapping[str, Any], name: str, kind: str, field: str) -> Value:
    if kind == "RANGES":
        spans = (item.get("ranges") or {}).get("range")
        if not isinstance(spans, list):
            raise MesosJSONError(f"{field}: {name} needs ranges.range, a list")
        if len(spans) > MAX_RANGES:
            raise MesosJSONError(f"{field}: {name}: more than {MAX_RANGES} ranges")
        pairs: list[tuple[object, object]] = []
        for span in spans:
            if not isinstance(span, Mapping):
                raise MesosJSONError(f"{field}: {name}: a range is {{begin, end}}")
            pairs.append((span.get("begin"), span.get("end")))
        return Ranges.of(pairs, name)
    members = (item.get("set") or {}).get("item")
    if not isinstance(members, list):
        raise MesosJSONError(f"{field}: {name} needs set.item, a list")
    if len(members) > MAX_ITEMS:
        raise MesosJSONError(f"{field}: {name}: more than {MAX_ITEMS} items")
    return ItemSet.of(members, name)


def min_allocatable_from_mesos(filters: object, role: str) -> list[Resources] | None:
    """FrameworkInfo.offer_filters[role].min_allocatable_resources (Mesos 1.10) as our
    offer filters: None where it is not set (the master's minimum applies), [] for no
    quantities (anything may be offered), else the quantities, one of which an offer
    holds."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise MesosJSONError(f"offer_filters: expected an object by role, got {_short(filters)}")
    mine = filters.get(role)
    if mine is None:
        return None
    minimum = mine.get("min_allocatable_resources") if isinstance(mine, Mapping) else None
    if minimum is None:
        return None
    quantities = minimum.get("quantities", []) if isinstance(minimum, Mapping) else None
    if not isinstance(quantities, list):
        raise MesosJSONError("offer_filters: min_allocatable_resources.quantities is a list")
    out: list[Resources] = []
    for entry in quantities:
        named = entry.get("quantities") if isinstance(entry, Mapping) else None
        if not isinstance(named, Mapping):
            raise MesosJSONError(
                f"offer_filters: a quantity is {{quantities: {{...}}}}, got {_short(entry)}"
            )
        amounts: dict[str, float] = {}
        for name, scalar in named.items():
            value = scalar.get("value") if isinstance(scalar, Mapping) else None
            amounts[str(name)] = _number(
                value, f"offer_filters: {_short(name)} needs a scalar value"
            )
        try:
            out.append(Resources(amounts))
        except ResourceError as e:
            raise MesosJSONError(f"offer_filters: {e}") from None
    return out


# --- states, reasons, sources --------------------------------------------------------------

# v1 renamed every SLAVE to AGENT; our names are the v0 ones.
_REASON_TO_MESOS = {
    Reason.SLAVE_REMOVED: "REASON_AGENT_REMOVED",
    Reason.SLAVE_REMOVED_BY_OPERATOR: "REASON_AGENT_REMOVED_BY_OPERATOR",
    Reason.SLAVE_REREGISTERED: "REASON_AGENT_REREGISTERED",
    Reason.SLAVE_DRAINING: "REASON_AGENT_DRAINING",
    Reason.SLAVE_UNKNOWN: "REASON_AGENT_UNKNOWN",
}
_REASON_FROM_MESOS = {v: k for k, v in _REASON_TO_MESOS.items()}
_SOURCE_TO_MESOS = {Source.SLAVE: "SOURCE_AGENT"}
_SOURCE_FROM_MESOS = {v: k for k, v in _SOURCE_TO_MESOS.items()}


def reason_to_mesos(reason: Reason) -> str:
    """Mesos's name (REASON_RATE_LIMITED is ours: Mesos has no such reason)."""
    return _REASON_TO_MESOS.get(reason, reason.value)


def reason_from_mesos(name: str) -> Reason | None:
    """Ours for a Mesos name, or None for a reason we never give."""
    return _ours(Reason, _REASON_FROM_MESOS, name)


def source_to_mesos(source: Source) -> str:
    return _SOURCE_TO_MESOS.get(source, source.value)


def source_from_mesos(name: str) -> Source | None:
    return _ours(Source, _SOURCE_FROM_MESOS, name)


def _ours(kind: type[E], renamed: Mapping[str, E], name: str) -> E | None:
    if name in renamed:
        return renamed[name]
    try:
        return kind(name)
    except ValueError:
        return None


def state_from_mesos(name: object) -> TaskState:
    """Our task states are Mesos's names already."""
    try:
        return TaskState(str(name))
    except ValueError:
        raise MesosJSONError(f"state: {_short(name)} is not a Mesos task state") from None


# --- task status ---------------------------------------------------------------------------


def ack_uuid_to_mesos(uuid: str) -> str:
    """Our acknowledgement id as Mesos's `bytes uuid`: an id of ours is 32 hex digits,
    sent as its 16 bytes (base64), as Mesos's UUIDs are; any other text as its bytes. A
    client hands it back unchanged in ACKNOWLEDGE."""
    if len(uuid) == 32:
        try:
            return encode_bytes(bytes.fromhex(uuid))
        except ValueError:
            pass
    return encode_bytes(uuid.encode())


def ack_uuid_from_mesos(text: object) -> str:
    raw = decode_bytes(text, "uuid")
    if len(raw) == 16:
        return raw.hex()
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise MesosJSONError("uuid: not one this master gave") from None


def status_to_mesos(status: TaskStatus) -> JSON:
    """A TaskStatus as Mesos's JSON: `uuid` only when an acknowledgement is due."""
    out: JSON = {
        "task_id": mesos_id(status.task_id),
        "state": status.state.value,
        "timestamp": status.timestamp,
    }
    if status.slave_id:
        out["agent_id"] = mesos_id(status.slave_id)
    if status.executor_id:
        out["executor_id"] = mesos_id(status.executor_id)
    if status.source is not None:
        out["source"] = source_to_mesos(status.source)
    if status.reason is not None:
        out["reason"] = reason_to_mesos(status.reason)
    if status.message:
        out["message"] = status.message
    if status.uuid is not None:
        out["uuid"] = ack_uuid_to_mesos(status.uuid)
    if status.data:
        out["data"] = encode_bytes(status.data)
    if status.healthy is not None:
        out["healthy"] = status.healthy
    return out


def status_from_mesos(obj: object) -> TaskStatus:
    """Mesos's TaskStatus JSON (an executor's UPDATE) as ours; `uuid` is the executor's
    own (base64 bytes), kept as the text our acknowledgement carries."""
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"status: expected an object, got {_short(obj)}")
    source = source_from_mesos(str(obj["source"])) if obj.get("source") else None
    reason = reason_from_mesos(str(obj["reason"])) if obj.get("reason") else None
    return TaskStatus(
        task_id=id_value(obj.get("task_id"), "task_id"),
        state=state_from_mesos(obj.get("state")),
        slave_id=optional_id(obj, "agent_id", "slave_id"),
        executor_id=optional_id(obj, "executor_id"),
        source=source,
        reason=reason,
        message=str(obj.get("message") or ""),
        data=decode_bytes(obj["data"]) if obj.get("data") else b"",
        uuid=encode_bytes(decode_bytes(obj["uuid"], "uuid")) if obj.get("uuid") else None,
        healthy=obj["healthy"] if isinstance(obj.get("healthy"), bool) else None,
    )


# --- durations and kill policies -----------------------------------------------------------


def duration_to_mesos(seconds: float) -> JSON:
    """Mesos's DurationInfo: whole nanoseconds."""
    return {"nanoseconds": round(seconds * 1e9)}


def duration_from_mesos(obj: object, field: str) -> float:
    """A DurationInfo's seconds (its int64 as a number, or as proto3's JSON text)."""
    nanos = obj.get("nanoseconds") if isinstance(obj, Mapping) else None
    if isinstance(nanos, str) and nanos.lstrip("-").isdigit():
        nanos = int(nanos)
    if isinstance(nanos, bool) or not isinstance(nanos, int):
        raise MesosJSONError(f'{field}: expected {{"nanoseconds": N}}, got {_short(obj)}')
    return nanos / 1e9


def kill_policy_to_mesos(policy: KillPolicy) -> JSON:
    return {"grace_period": duration_to_mesos(policy.grace_period)}


def kill_policy_from_mesos(obj: object, field: str = "kill_policy") -> KillPolicy | None:
    """A KillPolicy (a task's, or a KILL call's); None without a grace period. One out
    of bounds (negative, over an hour) is refused, as any field out of bounds."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"{field}: expected an object, got {_short(obj)}")
    if obj.get("grace_period") is None:
        return None
    grace = duration_from_mesos(obj["grace_period"], f"{field}.grace_period")
    try:
        return KillPolicy(grace_period=grace)
    except ValueError as e:
        raise MesosJSONError(f"{field}: {_first(e)}") from None


# --- health checks -------------------------------------------------------------------------

_CHECK_TIMES = (
    "delay_seconds",
    "interval_seconds",
    "timeout_seconds",
    "grace_period_seconds",
    "consecutive_failures",
)


def health_check_to_mesos(check: HealthCheck) -> JSON:
    out: JSON = {"type": check.type.value, **{k: getattr(check, k) for k in _CHECK_TIMES}}
    if check.command is not None:
        out["command"] = command_to_mesos(CommandInfo(**check.command.model_dump()))
    if check.http is not None:
        out["http"] = {"scheme": "http", **check.http.model_dump()}
    if check.tcp is not None:
        out["tcp"] = check.tcp.model_dump()
    return out


def task_policies_to_mesos(task: TaskInfo) -> JSON:
    """What a Mesos Task carries of its TaskInfo's policies: its health check and kill
    policy (a master's views show them, as Mesos's `createTask` copies them)."""
    out: JSON = {}
    if task.health_check is not None:
        out["health_check"] = health_check_to_mesos(task.health_check)
    if task.kill_policy is not None:
        out["kill_policy"] = kill_policy_to_mesos(task.kill_policy)
    return out


def health_check_from_mesos(obj: object, field: str = "health_check") -> HealthCheck | None:
    """Mesos's HealthCheck (its `type`, or, as before Mesos 1.2, the one of command,
    http or tcp given); HTTPS and `statuses` are not served (200-399 is healthy)."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"{field}: expected an object, got {_short(obj)}")
    given = [k for k in ("command", "http", "tcp") if obj.get(k) is not None]
    kind = obj.get("type") or (given[0].upper() if len(given) == 1 else None)
    fields: JSON = {k: obj[k] for k in _CHECK_TIMES if obj.get(k) is not None}
    if obj.get("command") is not None:
        command = command_from_mesos(obj["command"], f"{field}.command")
        fields["command"] = CommandCheck(**command.model_dump())
    if isinstance(http := obj.get("http"), Mapping):
        if http.get("scheme", "http") != "http":
            raise MesosJSONError(f"{field}.http.scheme: only http is served")
        fields["http"] = {"port": http.get("port"), "path": http.get("path") or "/"}
    if isinstance(tcp := obj.get("tcp"), Mapping):
        fields["tcp"] = {"port": tcp.get("port")}
    try:
        return HealthCheck(type=kind, **fields)
    except ValueError as e:
        raise MesosJSONError(f"{field}: {_first(e)}") from None


# --- tasks and executors -------------------------------------------------------------------


def command_to_mesos(command: CommandInfo) -> JSON:
    out: JSON = {"value": command.value, "shell": True}
    if command.environment:
        variables = [{"name": k, "value": v} for k, v in sorted(command.environment.items())]
        out["environment"] = {"variables": variables}
    return out


def command_from_mesos(obj: object, field: str = "command") -> CommandInfo:
    """Shell commands only (`shell: false` with arguments is joined for `sh -c`)."""
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"{field}: expected an object, got {_short(obj)}")
    value = obj.get("value")
    if not isinstance(value, str) or not value:
        raise MesosJSONError(f"{field}.value: a command line is needed")
    if obj.get("shell") is False and obj.get("arguments"):
        value = " ".join(shlex.quote(str(a)) for a in obj["arguments"])
    environment: dict[str, str] = {}
    for variable in (obj.get("environment") or {}).get("variables") or []:
        if not isinstance(variable, Mapping) or not isinstance(variable.get("name"), str):
            raise MesosJSONError(f"{field}.environment: each variable needs a name")
        environment[variable["name"]] = str(variable.get("value", ""))
    return CommandInfo(value=value, environment=environment)


def executor_to_mesos(executor: ExecutorInfo, framework_id: str) -> JSON:
    return {
        "executor_id": mesos_id(executor.executor_id),
        "framework_id": mesos_id(framework_id),
        "type": "CUSTOM",
        "command": command_to_mesos(executor.command),
        "resources": resources_to_mesos(executor.resources),
    }


def executor_from_mesos(obj: object) -> ExecutorInfo:
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"executor: expected an object, got {_short(obj)}")
    return ExecutorInfo(
        executor_id=id_value(obj.get("executor_id"), "executor.executor_id"),
        command=command_from_mesos(obj.get("command"), "executor.command"),
        resources=resources_from_mesos(obj.get("resources") or [], "executor.resources"),
    )


def task_to_mesos(task: TaskInfo, framework_id: str) -> JSON:
    out: JSON = {
        "name": task.name or task.task_id,
        "task_id": mesos_id(task.task_id),
        "agent_id": mesos_id(task.slave_id),
        "resources": resources_to_mesos(task.resources, discrete=task.discrete),
    }
    if task.command is not None:
        out["command"] = command_to_mesos(task.command)
    if task.executor is not None:
        out["executor"] = executor_to_mesos(task.executor, framework_id)
    if task.data:
        out["data"] = encode_bytes(task.data)
    if task.kill_policy is not None:
        out["kill_policy"] = kill_policy_to_mesos(task.kill_policy)
    if task.health_check is not None:
        out["health_check"] = health_check_to_mesos(task.health_check)
    return out


def task_from_mesos(obj: object) -> TaskInfo:
    """A TaskInfo as a framework sends it: `agent_id` or the older `slave_id`."""
    if not isinstance(obj, Mapping):
        raise MesosJSONError(f"task_infos: expected objects, got {_short(obj)}")
    slave_id = optional_id(obj, "agent_id", "slave_id")
    if slave_id is None:
        raise MesosJSONError("task_infos: each task needs agent_id")
    resources, discrete = resources_and_values_from_mesos(obj.get("resources") or [])
    return TaskInfo(
        role=allocation_role(obj.get("resources") or []),
        task_id=id_value(obj.get("task_id"), "task_id"),
        name=str(obj.get("name") or ""),
        slave_id=slave_id,
        resources=resources,
        discrete=discrete,
        command=command_from_mesos(obj["command"]) if obj.get("command") else None,
        executor=executor_from_mesos(obj["executor"]) if obj.get("executor") else None,
        data=decode_bytes(obj["data"]) if obj.get("data") else b"",
        kill_policy=kill_policy_from_mesos(obj.get("kill_policy")),
        health_check=health_check_from_mesos(obj.get("health_check")),
    )


def allocation_role(items: object) -> str | None:
    """The role a task's resources say they are allocated to (Mesos's
    `allocation_info.role`, which a multi-role framework's carry): None if none says;
    MesosJSONError if they say several (a task is allocated to one role)."""
    roles: set[object] = set()
    for item in items if isinstance(items, list) else []:
        info = item.get("allocation_info") if isinstance(item, Mapping) else None
        if isinstance(info, Mapping):
            roles.add(info.get("role"))
    named = [r for r in roles if isinstance(r, str)]
    if len(roles) > 1 or len(named) != len(roles):
        raise MesosJSONError(f"resources: allocated to one role, not {sorted(map(str, roles))}")
    return named[0] if named else None


# --- offers and the master -----------------------------------------------------------------


def offer_to_mesos(offer: Offer, role: str = "*") -> JSON:
    out: JSON = {
        "id": mesos_id(offer.offer_id),
        "framework_id": mesos_id(offer.framework_id),
        "agent_id": mesos_id(offer.slave_id),
        "hostname": offer.hostname,
        "resources": resources_to_mesos(offer.resources, role, offer.discrete),
        "attributes": [
            {"name": k, "type": "TEXT", "text": {"value": v}}
            for k, v in sorted(offer.attributes.items())
        ],
        "allocation_info": {"role": role},
    }
    if offer.executor_ids:  # the framework's executors running there (Mesos's Offer field)
        out["executor_ids"] = [mesos_id(e) for e in offer.executor_ids]
    return out


def master_info(master_id: str, ip: str, port: int, hostname: str = "") -> JSON:
    """Mesos's MasterInfo, as in ZooKeeper's `json.info_` nodes and SUBSCRIBED. `ip` is
    also given packed (Mesos's uint32 in network order, read as little-endian)."""
    packed = 0
    parts = ip.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        packed = int.from_bytes(bytes(int(p) for p in parts), "little")
    host = hostname or ip
    return {
        "id": master_id,
        "ip": packed,
        "port": port,
        "pid": f"master@{ip}:{port}",
        "hostname": host,
        "version": MESOS_VERSION,
        "address": {"ip": ip, "port": port, "hostname": host},
    }


def version_json() -> JSON:
    """What Mesos's `GET /version` answers."""
    return {
        "version": MESOS_VERSION,
        "build_date": "",
        "build_time": 0,
        "build_user": "drfmesos",
        "git_sha": "",
        "git_tag": MESOS_VERSION,
    }


def _first(e: ValueError) -> str:
    """A pydantic error's first complaint, where it is, without its URL."""
    errors = getattr(e, "errors", None)
    if not callable(errors):
        return str(e)
    first = errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: object, wanted: str) -> float:
    """A JSON number as a float; MesosJSONError (`wanted`, saying what was) for anything
    else, and for an integer past a float's range (JSON has them; float() overflows)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MesosJSONError(wanted)
    try:
        return float(value)
    except OverflowError:
        raise MesosJSONError(f"{wanted}: {_short(value)} is too large") from None
