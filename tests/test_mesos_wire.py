"""The Mesos v1 wire shared by the scheduler, executor and operator APIs: RecordIO framing
and our messages as Mesos's JSON, as a Mesos client reads and writes them."""

from __future__ import annotations

import json

import pytest

from protocol import mesos_json as mj
from protocol import recordio
from protocol.wire.messages import (
    CommandInfo,
    ExecutorInfo,
    Offer,
    Reason,
    Source,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources
from protocol.wire.values import new_id


def test_recordio_frames_are_length_newline_bytes() -> None:
    assert recordio.encode(b'{"type":"HEARTBEAT"}') == b'20\n{"type":"HEARTBEAT"}'
    assert recordio.encode(b"") == b"0\n"


def test_recordio_decoder_reassembles_records_split_anywhere() -> None:
    records = [b'{"a":1}', b"", "é".encode() * 300, b"x" * 10]
    stream = b"".join(recordio.encode(r) for r in records)
    for size in (1, 2, 7, len(stream)):
        decoder = recordio.Decoder()
        out: list[bytes] = []
        for i in range(0, len(stream), size):
            out += decoder.feed(stream[i : i + size])
        assert out == records
        assert decoder.pending == 0


@pytest.mark.parametrize("bad", [b"x\n{}", b"-1\n", b"1" * 12])
def test_recordio_decoder_refuses_what_is_not_recordio(bad: bytes) -> None:
    with pytest.raises(recordio.RecordIOError):
        recordio.Decoder().feed(bad)


def test_recordio_decoder_refuses_a_record_over_its_bound() -> None:
    with pytest.raises(recordio.RecordIOError, match="over"):
        recordio.Decoder(max_record=10).feed(b"11\n")


def test_resources_round_trip_as_mesos_scalars() -> None:
    r = Resources(cpus=0.5, mem=512)
    wire = mj.resources_to_mesos(r, role="team-a")
    # unreserved (`role: *`, as Mesos's pre-1.9 format says it), allocated to team-a
    to_team_a = {"role": "*", "allocation_info": {"role": "team-a"}}
    assert wire == [
        {"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.5}, **to_team_a},
        {"name": "mem", "type": "SCALAR", "scalar": {"value": 512.0}, **to_team_a},
    ]
    assert mj.resources_from_mesos(wire) == r
    # Mesos may list one resource once per role: they add up
    twice = [*wire, {"name": "cpus", "type": "SCALAR", "scalar": {"value": 1}}]
    assert mj.resources_from_mesos(twice) == Resources(cpus=1.5, mem=512)


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ([{"name": "ports", "type": "RANGES", "ranges": {}}], "needs ranges.range"),
        (
            [{"name": "ports", "type": "RANGES", "ranges": {"range": [{"begin": 1, "end": 2}]}}],
            "RANGES; only SCALAR",
        ),
        ([{"name": "ports", "type": "TEXT"}], "SCALAR, RANGES and SET exist here"),
        ([{"name": "cpus", "type": "SCALAR", "scalar": {"value": -1}}], "negative"),
        ([{"name": "cpus", "type": "SCALAR"}], "scalar.value"),
        ([{"type": "SCALAR"}], "name"),
        ({"cpus": 1}, "a list"),
    ],
)
def test_resources_we_cannot_honour_are_named(items: object, says: str) -> None:
    with pytest.raises(mj.MesosJSONError, match=says):
        mj.resources_from_mesos(items)


def test_ids_are_value_objects() -> None:
    assert mj.mesos_id("f1") == {"value": "f1"}
    assert mj.id_value({"value": "f1"}) == "f1"
    with pytest.raises(mj.MesosJSONError, match="framework_id"):
        mj.id_value("f1", "framework_id")
    assert mj.optional_id({"slave_id": {"value": "s"}}, "agent_id", "slave_id") == "s"
    assert mj.optional_id({}, "agent_id") is None


def test_status_update_as_mesos_json_carries_uuid_agent_and_v1_names() -> None:
    status = TaskStatus(
        task_id="t1",
        state=TaskState.LOST,
        slave_id="s1",
        executor_id="e1",
        reason=Reason.SLAVE_REMOVED,
        source=Source.SLAVE,
        message="gone",
        timestamp=12.5,
        uuid="abc123",
        data=b"\x00\x01",
    )
    wire = mj.status_to_mesos(status)
    assert json.loads(json.dumps(wire)) == wire  # plain JSON
    assert wire["task_id"] == {"value": "t1"}
    assert wire["agent_id"] == {"value": "s1"}
    assert wire["executor_id"] == {"value": "e1"}
    assert wire["state"] == "TASK_LOST"
    assert wire["reason"] == "REASON_AGENT_REMOVED"
    assert wire["source"] == "SOURCE_AGENT"
    assert wire["timestamp"] == 12.5
    assert mj.decode_bytes(wire["data"]) == b"\x00\x01"
    # the client hands the uuid back unchanged in ACKNOWLEDGE
    assert mj.ack_uuid_from_mesos(wire["uuid"]) == "abc123"


def test_an_acknowledgement_uuid_is_16_bytes_as_mesos_sends_it() -> None:
    """Mesos clients (pymesos, the Java and Go bindings) hold a status uuid as a UUID's 16
    bytes; some parse it. Ours, 32 hex digits, travel as those bytes and come back."""
    ours = new_id()
    wire = mj.status_to_mesos(TaskStatus(task_id="t", state=TaskState.RUNNING, uuid=ours))
    assert len(mj.decode_bytes(wire["uuid"])) == 16
    assert mj.ack_uuid_from_mesos(wire["uuid"]) == ours


def test_status_without_an_ack_due_has_no_uuid() -> None:
    wire = mj.status_to_mesos(TaskStatus(task_id="t", state=TaskState.RUNNING))
    assert "uuid" not in wire
    assert "agent_id" not in wire


def test_executor_status_update_reads_back() -> None:
    wire = {
        "task_id": {"value": "t1"},
        "state": "TASK_FINISHED",
        "agent_id": {"value": "s1"},
        "source": "SOURCE_EXECUTOR",
        "reason": "REASON_AGENT_UNKNOWN",
        "uuid": mj.encode_bytes(b"0123456789abcdef"),
        "unknown_field": 1,
    }
    status = mj.status_from_mesos(wire)
    assert status.state is TaskState.FINISHED
    assert status.slave_id == "s1"
    assert status.source is Source.EXECUTOR
    assert status.reason is Reason.SLAVE_UNKNOWN
    assert status.uuid == wire["uuid"]
    with pytest.raises(mj.MesosJSONError, match="task state"):
        mj.status_from_mesos({**wire, "state": "TASK_NAPPING"})


def test_task_info_from_a_framework_accepts_agent_or_slave_id() -> None:
    base = {
        "name": "n",
        "task_id": {"value": "t1"},
        "resources": mj.resources_to_mesos(Resources(cpus=1)),
        "command": {
            "value": "echo hi",
            "environment": {"variables": [{"name": "A", "value": "1"}]},
        },
        "labels": {"labels": []},  # unused fields are ignored
    }
    for key in ("agent_id", "slave_id"):
        task = mj.task_from_mesos({**base, key: {"value": "s1"}})
        assert task.slave_id == "s1"
        assert task.command == CommandInfo(value="echo hi", environment={"A": "1"})
    with pytest.raises(mj.MesosJSONError, match="agent_id"):
        mj.task_from_mesos(base)
    argv = {"shell": False, "value": "echo", "arguments": ["echo", "a b"]}
    task = mj.task_from_mesos({**base, "agent_id": {"value": "s"}, "command": argv})
    assert task.command is not None
    assert task.command.value == "echo 'a b'"


def test_executor_task_round_trips() -> None:
    task = TaskInfo(
        task_id="t1",
        slave_id="s1",
        resources=Resources(cpus=0.5),
        executor=ExecutorInfo(
            executor_id="e1",
            command=CommandInfo(value="python -m my.executor"),
            resources=Resources(cpus=0.1),
        ),
        data=b"payload",
    )
    wire = mj.task_to_mesos(task, "f1")
    assert wire["executor"]["framework_id"] == {"value": "f1"}
    assert mj.task_from_mesos(json.loads(json.dumps(wire))).model_dump() == {
        **task.model_dump(),
        "name": "t1",
    }


def test_offer_as_mesos_json() -> None:
    offer = Offer(
        offer_id="o1",
        framework_id="f1",
        slave_id="s1",
        hostname="h",
        resources=Resources(cpus=2),
        attributes={"rack": "a"},
    )
    wire = mj.offer_to_mesos(offer, role="r")
    assert wire["id"] == {"value": "o1"}
    assert wire["agent_id"] == {"value": "s1"}
    assert wire["resources"][0]["role"] == "*"  # not reserved: allocated to r
    assert wire["resources"][0]["allocation_info"] == {"role": "r"}
    assert wire["attributes"] == [{"name": "rack", "type": "TEXT", "text": {"value": "a"}}]


def test_master_info_is_what_zookeeper_readers_expect() -> None:
    info = mj.master_info("m1", "127.0.0.1", 5050, "localhost")
    assert info["pid"] == "master@127.0.0.1:5050"
    assert info["address"] == {"ip": "127.0.0.1", "port": 5050, "hostname": "localhost"}
    assert info["ip"] == 0x0100007F  # Mesos's uint32, network byte order
    assert info["version"] == mj.MESOS_VERSION
    assert mj.version_json()["version"] == mj.MESOS_VERSION
