"""What the master tells a framework, as Mesos v1 scheduler events (JSON). Pure.

`event_of` gives the event for one of our messages, or None for what a Mesos framework
is not told (answers to our own SDK's calls). Our preemption notice is an extension,
`DRFMESOS_PREEMPTING`, sent only to frameworks that opted in: a Mesos client that reads
every event type it is sent would not know it.
"""

from __future__ import annotations

from typing import Any

from protocol import mesos_json as mj
from protocol.wire.messages import (
    Error,
    Failure,
    FrameworkMessage,
    Heartbeat,
    Offers,
    Preempting,
    Rescind,
    Subscribed,
    Update,
    Wire,
)

PREEMPTING_EVENT = "DRFMESOS_PREEMPTING"
REMOVED_CODE = "framework-removed"  # the master's Error when it forgets a framework
# an Accept's operation dropped: Mesos drops it unsaid (without an operation id), and an
# ERROR event would end a Mesos scheduler, so the stream leaves it out
UNSAID_CODES = ("invalid-operation",)
PRINCIPAL_REMOVED_CODE = "principal-removed"  # and when it cuts off a removed principal's
ROLE_REFUSED_CODE = "role-refused"  # or one whose principal lost its role
FAILED_OVER_CODE = "failed-over"  # or another stream (or process) took its framework over

JSON = dict[str, Any]


def event(kind: str, body: JSON | None = None) -> JSON:
    """`{"type": KIND, "kind": {...}}`, as Mesos nests each event's fields."""
    return {"type": kind} if body is None else {"type": kind, kind.lower(): body}


def subscribed(msg: Subscribed, heartbeat: float, master_info: JSON) -> JSON:
    return event(
        "SUBSCRIBED",
        {
            "framework_id": mj.mesos_id(msg.framework_id),
            "heartbeat_interval_seconds": heartbeat,
            "master_info": master_info,
        },
    )


def event_of(msg: Wire, preemption_notices: bool) -> JSON | None:
    if isinstance(msg, Offers):  # (each allocated to its role: a multi-role framework's)
        return event("OFFERS", {"offers": [mj.offer_to_mesos(o, o.role) for o in msg.offers]})
    if isinstance(msg, Rescind):
        return event("RESCIND", {"offer_id": mj.mesos_id(msg.offer_id)})
    if isinstance(msg, Update):
        return event("UPDATE", {"status": mj.status_to_mesos(msg.status)})
    if isinstance(msg, FrameworkMessage):
        return event(
            "MESSAGE",
            {
                "agent_id": mj.mesos_id(msg.slave_id),
                "executor_id": mj.mesos_id(msg.executor_id),
                "data": mj.encode_bytes(msg.data),
            },
        )
    if isinstance(msg, Failure):
        failure: JSON = {"agent_id": mj.mesos_id(msg.slave_id)}
        if msg.executor_id is not None:
            failure["executor_id"] = mj.mesos_id(msg.executor_id)
            failure["status"] = msg.status if msg.status is not None else -1
        return event("FAILURE", failure)
    if isinstance(msg, Error):
        if msg.code in UNSAID_CODES:
            return None
        return event("ERROR", {"message": msg.message})
    if isinstance(msg, Heartbeat):
        return event("HEARTBEAT")
    if isinstance(msg, Preempting) and preemption_notices:
        return event(
            PREEMPTING_EVENT,
            {
                "tasks": [
                    {"task_id": mj.mesos_id(t.task_id), "agent_id": mj.mesos_id(t.slave_id)}
                    for t in msg.tasks
                ],
                "deadline_seconds": msg.deadline_seconds,
                "message": msg.message,
            },
        )
    return None


def ends_stream(msg: Wire) -> bool:
    """The master forgot the framework, or its principal was removed from the cluster
    or lost the framework's role, or another scheduler took it over: its stream closes
    after this (as Mesos's)."""
    return isinstance(msg, Error) and msg.code in (
        REMOVED_CODE,
        PRINCIPAL_REMOVED_CODE,
        ROLE_REFUSED_CODE,
        FAILED_OVER_CODE,
    )
