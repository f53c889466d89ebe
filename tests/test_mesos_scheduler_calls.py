"""Mesos scheduler calls as our messages, and our messages as Mesos events: what a Mesos
client sends is read as Mesos reads it, and what we cannot serve is refused by name."""

from __future__ import annotations

import math
from typing import Any

import pytest

from master.mesos_api import scheduler_events as events
from master.mesos_api.scheduler_calls import (
    MESOS_EXECUTOR_ADAPTER,
    PrincipalMismatch,
    SchedulerCallError,
    message_of,
    parse_call,
    subscribe_of,
)
from protocol import mesos_json as mj
from protocol.wire.messages import (
    Accept,
    Acknowledge,
    Decline,
    Error,
    FrameworkCapability,
    Heartbeat,
    Kill,
    PreemptedTask,
    Preempting,
    Request,
    Subscribe,
    Suppress,
)
from protocol.wire.resources import Resources

FID = {"value": "fw-1"}
CPUS = [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}]
VOLUME = mj.resources_to_mesos(Resources.parse("disk(r,p)[v1:data]:512"))[0]


def call(kind: str, body: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"type": kind, "framework_id": FID, **more}
    if body is not None:
        c[kind.lower()] = body
    return c


def test_subscribe_takes_role_or_roles_and_ignores_what_it_does_not_use() -> None:
    info: dict[str, Any]
    for info in ({"name": "a", "role": "r"}, {"name": "a", "roles": ["r"]}):
        info = {**info, "user": "u", "hostname": "h", "webui_url": "", "checkpoint": True}
        sub = subscribe_of(parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info":
                           info}}), "team", "inbox", "inc")  # fmt: skip
        assert isinstance(sub, Subscribe)
        assert (sub.role, sub.inbox, sub.framework_id) == ("r", "inbox", None)
    info = {"name": "a", "id": FID, "principal": "team", "failover_timeout": 9,
            "capabilities": [{"type": "PARTITION_AWARE"}, {"type": "GPU_RESOURCES"}]}  # fmt: skip
    sub = subscribe_of(parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}}),
                       "team", "inbox", "inc")  # fmt: skip
    assert sub.framework_id == "fw-1"
    assert sub.failover_timeout == 9
    assert sub.capabilities == [FrameworkCapability.PARTITION_AWARE]


def test_subscribe_reads_the_roles_offer_filters_as_mesos_defines_them() -> None:
    """FrameworkInfo.offer_filters[role].min_allocatable_resources: its quantities; none
    for the role or no min_allocatable_resources is the master's minimum (None); an
    empty list of quantities, anything ([])."""

    def minimum(filters: Any) -> list[Resources] | None:
        info = {"name": "a", "roles": ["r"], "offer_filters": filters}
        sub = subscribe_of(parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info":
                           info}}), "team", "inbox", "inc")  # fmt: skip
        return sub.offer_filters.min_allocatable if sub.offer_filters else None

    quantities = [{"quantities": {"cpus": {"value": 1}, "mem": {"value": 64}}},
                  {"quantities": {"gpus": {"value": 1}}}]  # fmt: skip
    assert minimum({"r": {"min_allocatable_resources": {"quantities": quantities}}}) == [
        Resources(cpus=1, mem=64),
        Resources(gpus=1),
    ]
    assert minimum({"r": {"min_allocatable_resources": {}}}) == []
    assert minimum({"r": {}}) is None
    assert minimum({"other": {"min_allocatable_resources": {}}}) is None
    assert minimum(None) is None
    bad = {"r": {"min_allocatable_resources": {"quantities": [{"quantities": {"cpus": 1}}]}}}
    with pytest.raises(ValueError, match="offer_filters"):
        minimum(bad)
    # past the bound: said in one line of ours, not pydantic's report (try 85)
    many = {"r": {"min_allocatable_resources": {"quantities": quantities * 50}}}
    with pytest.raises(SchedulerCallError, match=r"^min_allocatable: List should have at most"):
        minimum(many)


def test_subscribe_as_another_principal_or_with_two_roles_without_multi_role_is_refused() -> None:
    def subscribe(info: dict[str, Any]) -> Subscribe:
        c = parse_call({"type": "SUBSCRIBE", "subscribe": {"framework_info": info}})
        return subscribe_of(c, "team", "inbox", "inc")

    with pytest.raises(PrincipalMismatch):
        subscribe({"name": "a", "principal": "other"})
    with pytest.raises(SchedulerCallError, match="several roles need MULTI_ROLE"):
        subscribe({"name": "a", "roles": ["x", "y"]})
    multi = [{"type": "MULTI_ROLE"}]
    both = subscribe({"name": "a", "roles": ["x", "y"], "capabilities": multi})
    assert (both.role, both.roles) == ("*", ["x", "y"])
    assert FrameworkCapability.MULTI_ROLE in both.capabilities
    one = subscribe({"name": "a", "role": "x"})
    assert (one.role, one.roles) == ("x", None)
    suppress = message_of(
        parse_call(
            {"type": "SUPPRESS", "framework_id": {"value": "f"}, "suppress": {"roles": ["x"]}}
        )
    )
    assert isinstance(suppress, Suppress)
    assert suppress.roles == ["x"]
    with pytest.raises(SchedulerCallError, match="roles"):
        message_of(
            parse_call({"type": "REVIVE", "framework_id": {"value": "f"}, "revive": {"roles": "x"}})
        )
    with pytest.raises(SchedulerCallError, match="framework_info"):
        subscribe_of(parse_call({"type": "SUBSCRIBE"}), "team", "inbox", "inc")
    for timeout in (math.inf, math.nan, 1e308, "inf", "soon"):  # (a 400 each, with why)
        with pytest.raises(SchedulerCallError, match="failover_timeout"):
            subscribe({"name": "a", "failover_timeout": timeout})


def test_accept_launches_command_and_executor_tasks() -> None:
    command = {"name": "t", "task_id": {"value": "t1"}, "slave_id": {"value": "s1"},
               "resources": CPUS, "command": {"value": "true"}}  # fmt: skip
    executor = {"name": "e", "task_id": {"value": "t2"}, "agent_id": {"value": "s1"},
                "resources": CPUS, "executor": {"executor_id": {"value": "x"},
                "command": {"value": "./my-executor"}}}  # fmt: skip
    launch = {"type": "LAUNCH", "launch": {"task_infos": [command, executor]}}
    body = {"offer_ids": [{"value": "o1"}], "operations": [launch],
            "filters": {"refuse_seconds": 2}}  # fmt: skip
    msg = message_of(parse_call(call("ACCEPT", body)))
    assert isinstance(msg, Accept)
    assert (msg.offer_ids, msg.filters.refuse_seconds) == (["o1"], 2)
    assert [t.slave_id for t in msg.tasks] == ["s1", "s1"]
    # a Mesos executor runs under our adapter, which is given its command
    adapted = msg.tasks[1].executor
    assert adapted is not None
    assert adapted.command.value == MESOS_EXECUTOR_ADAPTER
    assert adapted.command.environment["MESOS_EXECUTOR_COMMAND"] == "./my-executor"


def test_an_accept_with_launch_group_is_our_accept_with_a_task_group() -> None:
    """Mesos's LAUNCH_GROUP (the default executor, its resources, the task group's tasks)
    as ours; beside a LAUNCH, whose tasks stay the Accept's own."""
    executor = {"type": "DEFAULT", "executor_id": {"value": "pod"},
                "framework_id": FID, "resources": CPUS}  # fmt: skip
    grouped = [{"name": n, "task_id": {"value": n}, "agent_id": {"value": "s1"},
                "resources": CPUS, "command": {"value": f"./{n}"}}
               for n in ("web", "sidecar")]  # fmt: skip
    alone = {**grouped[0], "task_id": {"value": "alone"}}
    body = {"offer_ids": [{"value": "o1"}], "operations": [
        {"type": "LAUNCH", "launch": {"task_infos": [alone]}},
        {"type": "LAUNCH_GROUP", "launch_group": {
            "executor": executor, "task_group": {"tasks": grouped}}}]}  # fmt: skip
    msg = message_of(parse_call(call("ACCEPT", body)))
    assert isinstance(msg, Accept)
    assert [t.task_id for t in msg.tasks] == ["alone"]
    (group,) = msg.groups
    assert (group.executor_id, group.executor_resources) == ("pod", Resources(cpus=1))
    assert [(t.task_id, t.slave_id) for t in group.tasks] == [("web", "s1"), ("sidecar", "s1")]
    assert [t.command.value for t in group.tasks if t.command] == ["./web", "./sidecar"]
    assert all(t.executor is None for t in group.tasks)


def test_an_accept_counts_its_groups_tasks_within_its_bound() -> None:
    """1,001 tasks in all, some grouped: refused before any is read, as 1,001 LAUNCHed."""
    task = {"task_id": {"value": "t"}, "agent_id": {"value": "s"}, "resources": CPUS,
            "command": {"value": "true"}}  # fmt: skip
    group = {"type": "LAUNCH_GROUP", "launch_group": {
        "executor": {"type": "DEFAULT", "executor_id": {"value": "x"}},
        "task_group": {"tasks": [task] * 501}}}  # fmt: skip
    launch = {"type": "LAUNCH", "launch": {"task_infos": [task] * 500}}
    body = {"offer_ids": [{"value": "o"}], "operations": [launch, group]}
    with pytest.raises(SchedulerCallError, match="at most 1000 tasks are launched, not 1001"):
        message_of(parse_call(call("ACCEPT", body)))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [{"type": "RESERVE"}]}),
         "RESERVE names no resources"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [{"type": "CREATE_DISK"}]}),
         "operation CREATE_DISK is not served: LAUNCH, LAUNCH_GROUP"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [{"type": "LAUNCH_GROUP"}]}),
         "launch_group: expected an object"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "LAUNCH_GROUP", "launch_group": {
                "executor": {"type": "CUSTOM", "executor_id": {"value": "x"},
                             "command": {"value": "./my-executor"}},
                "task_group": {"tasks": []}}}]}),
         "launch_group.executor.type 'CUSTOM' is not served"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "LAUNCH_GROUP", "launch_group": {
                "executor": {"type": "DEFAULT", "executor_id": {"value": "x"}},
                "task_group": {"tasks": []}}}]}),
         "tasks: List should have at least 1 item"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "LAUNCH_GROUP", "launch_group": {
                "executor": {"type": "DEFAULT", "executor_id": {"value": "x"}},
                "task_group": {"tasks": [{"task_id": {"value": "t"}, "agent_id": {"value": "s"},
                                          "resources": CPUS, "command": {"value": "true"}}]}}},
            {"type": "RESERVE", "reserve": {"resources": CPUS}}]}),
         "RESERVE after LAUNCH: operations come first"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "SHRINK_VOLUME", "shrink_volume": {"volume": VOLUME}}]}),
         "shrink_volume.subtract"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "GROW_VOLUME", "grow_volume": {"volume": VOLUME, "addition": CPUS[0]}}]}),
         "its addition is disk of the volume's reservation"),
        (call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": [
            {"type": "SHRINK_VOLUME", "shrink_volume": {"volume": VOLUME,
                                                        "subtract": {"value": 512}}}]}),
         "less than the volume's size"),
        ({"type": "ACCEPT_INVERSE_OFFERS"}, "inverse offers"),
        ({"type": "NAP"}, "unknown call type"),
        ({"framework_id": FID}, "type"),
        (["SUBSCRIBE"], "JSON object"),
        ({"type": "REVIVE"}, "framework_id"),
        (call("KILL", {"task_id": "t1"}), "kill.task_id"),
        (call("DECLINE", {"offer_ids": []}), "offer_ids"),
        (call("ACKNOWLEDGE", {"task_id": {"value": "t"}, "uuid": "%%%"}), "base64"),
    ],
)  # fmt: skip
def test_calls_we_cannot_read_or_serve_are_named(data: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        message_of(parse_call(data))


def test_an_accept_grows_and_shrinks_volumes() -> None:
    grow = {
        "volume": VOLUME,
        "addition": mj.resources_to_mesos(Resources.parse("disk(r,p):256"))[0],
    }
    shrink = {"volume": VOLUME, "subtract": {"value": 128}}
    ops = [{"type": "GROW_VOLUME", "grow_volume": grow},
           {"type": "SHRINK_VOLUME", "shrink_volume": shrink}]  # fmt: skip
    msg = message_of(parse_call(call("ACCEPT", {"offer_ids": [{"value": "o"}], "operations": ops})))
    assert isinstance(msg, Accept)
    grown, shrunk = msg.operations
    assert grown.conversion() == (
        {"disk(r,p)[v1:data]": 512_000, "disk(r,p)": 256_000},
        {"disk(r,p)[v1:data]": 768_000},
    )
    assert shrunk.subtract == 128


def test_the_other_calls_become_ours() -> None:
    decline = message_of(parse_call(call("DECLINE", {"offer_ids": [{"value": "o"}]})))
    assert isinstance(decline, Decline)
    assert decline.filters.refuse_seconds == 5  # Mesos's default
    kill = message_of(parse_call(call("KILL", {"task_id": {"value": "t"},
                                                "agent_id": {"value": "s"}})))  # fmt: skip
    assert kill == Kill(framework_id="fw-1", task_id="t", slave_id="s")
    uuid = mj.ack_uuid_to_mesos("abc")
    acknowledge = {"task_id": {"value": "t"}, "agent_id": {"value": "s"}, "uuid": uuid}
    ack = message_of(parse_call(call("ACKNOWLEDGE", acknowledge)))
    assert ack == Acknowledge(framework_id="fw-1", slave_id="s", task_id="t", uuid="abc")
    request = message_of(parse_call(call("REQUEST", {"requests": [{"resources": CPUS}]})))
    assert isinstance(request, Request)
    assert [(r.resources, r.count) for r in request.requests] == [(Resources(cpus=1), 1)]
    wanted = {"requests": [{"resources": CPUS, "count": 7}]}
    demand = message_of(parse_call(call("DRFMESOS_DEMAND", wanted)))
    assert isinstance(demand, Request)
    assert demand.requests[0].count == 7


def test_preemption_notices_go_only_to_frameworks_that_asked() -> None:
    notice = Preempting(framework_id="f", tasks=[PreemptedTask(task_id="t", slave_id="s")],
                        deadline_seconds=2)  # fmt: skip
    assert events.event_of(notice, preemption_notices=False) is None
    event = events.event_of(notice, preemption_notices=True)
    assert event is not None
    assert event["type"] == events.PREEMPTING_EVENT
    assert event["drfmesos_preempting"]["tasks"] == [
        {"task_id": {"value": "t"}, "agent_id": {"value": "s"}}
    ]
    assert events.event_of(Heartbeat(), False) == {"type": "HEARTBEAT"}
    removed = Error(message="Framework has been removed", code="framework-removed")
    assert events.ends_stream(removed)
    assert not events.ends_stream(Error(message="no"))


def test_a_dropped_offer_operation_is_no_error_event_on_the_mesos_stream() -> None:
    """Our SDK's framework is told why its RESERVE was dropped; a Mesos scheduler is not
    sent ERROR for it (an ERROR ends it; Mesos drops such an operation unsaid)."""
    dropped = Error(message="RESERVE refused: not yours", code="invalid-operation")
    assert events.event_of(dropped, preemption_notices=False) is None
    other = events.event_of(Error(message="no", code="rate-limited"), preemption_notices=False)
    assert other == {"type": "ERROR", "error": {"message": "no"}}
