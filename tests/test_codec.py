"""The codec: every message round-trips; untrusted bytes only ever raise DecodeError."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.wire.codec import (
    PROTOCOL_VERSION,
    DecodeError,
    Envelope,
    decode,
    decode_many,
    encode,
    encode_batch,
    encode_list,
)
from protocol.wire.messages import (
    ALL_MESSAGES,
    ITEM_OF,
    Accept,
    Acknowledge,
    Offers,
    Revive,
    RunTasks,
    StatusAcks,
    TaskState,
    TaskStatus,
    Update,
    Wire,
)

from harness.strategies import ANY_MESSAGE, example, model

FAST = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(ANY_MESSAGE, st.one_of(st.none(), st.text(min_size=1, max_size=30)))
def test_every_model_round_trips_unchanged(message: Wire, reply_to: str | None) -> None:
    envelope = decode(encode(message, reply_to))
    assert envelope.message == message
    assert type(envelope.message) is type(message)
    assert envelope.reply_to == reply_to


@pytest.mark.parametrize("cls", ALL_MESSAGES, ids=lambda c: c.TYPE)
def test_one_of_every_type_round_trips(cls: type[Wire]) -> None:
    message = example(cls)
    assert decode(encode(message)).message == message


@FAST
@given(st.binary(max_size=512))
def test_random_bytes_only_raise_decode_error(data: bytes) -> None:
    try:
        decode(data)
    except DecodeError as e:
        assert e.reason in DecodeError.REASONS


@FAST
@given(ANY_MESSAGE, st.data())
def test_mutated_messages_only_raise_decode_error(message: Wire, data: st.DataObject) -> None:
    raw = bytearray(encode(message, "inbox"))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        decode(bytes(raw[:cut]))
    except DecodeError as e:
        assert e.reason in DecodeError.REASONS


def test_errors_name_the_reason_and_the_field() -> None:
    good = encode(Revive(framework_id="f1"))
    with pytest.raises(DecodeError) as e:
        decode(good[:-2])
    assert e.value.reason == "truncated"

    with pytest.raises(DecodeError) as e:
        decode(msgpack.packb([PROTOCOL_VERSION + 1, "Revive", None, {"framework_id": "f"}]))
    assert e.value.reason == "wrong-version"

    with pytest.raises(DecodeError) as e:
        decode(msgpack.packb([PROTOCOL_VERSION, "Launch", "me/inbox", {}]))
    assert e.value.reason == "unknown-type"
    assert e.value.reply_to == "me/inbox"

    bad_accept = {"framework_id": "f", "offer_ids": []}
    with pytest.raises(DecodeError) as e:
        decode(msgpack.packb([PROTOCOL_VERSION, "Accept", "me/inbox", bad_accept]))
    assert e.value.reason == "invalid"
    assert "offer_ids" in e.value.detail
    assert e.value.type_name == "Accept"

    negative = example(Offers).model_dump()
    negative["offers"][0]["resources"] = {"cpus": -2}
    with pytest.raises(DecodeError, match=r"offers\.0\.resources.*negative"):
        decode(msgpack.packb([PROTOCOL_VERSION, "Offers", None, negative]))


def test_unknown_fields_are_refused_not_ignored() -> None:
    body = {"framework_id": "f", "offer_ids": ["o"], "taks": []}
    with pytest.raises(DecodeError, match="taks"):
        decode(msgpack.packb([PROTOCOL_VERSION, Accept.TYPE, None, body]))


@FAST
@given(st.lists(ANY_MESSAGE, min_size=1, max_size=5))
def test_a_batch_carries_its_messages_in_order(messages: list[Wire]) -> None:
    items = decode_many(encode_batch([encode(m, "me") for m in messages]))
    assert all(isinstance(i, Envelope) for i in items)
    # (a list message among them arrives as its items)
    expected = [i for m in messages for i in (m.items if type(m) in ITEM_OF else [m])]  # type: ignore[attr-defined]
    assert [i.message for i in items if isinstance(i, Envelope)] == expected


def _update(n: int) -> Update:
    return Update(status=TaskStatus(task_id=f"t{n}", state=TaskState.RUNNING, uuid=f"u{n}"))


def test_a_list_arrives_as_its_items_in_order_each_with_the_sender_and_epoch() -> None:
    updates = [_update(n) for n in range(5)]
    items = decode_many(encode_list(updates, "master/in", epoch=3))
    assert [i.message for i in items if isinstance(i, Envelope)] == updates
    assert {(i.reply_to, i.epoch) for i in items if isinstance(i, Envelope)} == {("master/in", 3)}
    # one encoded list is smaller than its items each in its own envelope
    assert len(encode_list(updates)) < len(encode_batch([encode(u) for u in updates]))


@FAST
@given(ANY_MESSAGE)
def test_items_encode_as_their_list_message_would(message: Wire) -> None:
    """(encode_list dumps the items without making the list's model)"""
    if type(message) in ITEM_OF:
        items = message.items  # type: ignore[attr-defined]
        assert encode_list(items, "me", epoch=2) == encode(message, "me", epoch=2)


def test_one_bad_item_in_a_list_spoils_only_itself() -> None:
    good = _update(1).model_dump(mode="python")
    bad = {"status": {"task_id": "t2", "state": "TASK_NOT_A_STATE"}}
    raw = msgpack.packb([PROTOCOL_VERSION, "Updates", "fw/in", {"items": [good, bad, good]}])
    items = decode_many(raw)
    assert [type(i) for i in items] == [Envelope, DecodeError, Envelope]
    error = items[1]
    assert isinstance(error, DecodeError)
    assert error.reason == "invalid"
    assert "state" in error.detail
    assert (error.reply_to, error.type_name) == ("fw/in", "Update")


@pytest.mark.parametrize(
    "body",
    [{"items": []}, {"items": "no"}, {"items": [{}], "more": 1}, {}],
    ids=["empty", "not-a-list", "unknown-field", "no-items"],
)
def test_a_list_that_is_not_a_list_of_items_is_one_error(body: object) -> None:
    items = decode_many(msgpack.packb([PROTOCOL_VERSION, "StatusAcks", "s/in", body]))
    assert len(items) == 1
    assert isinstance(items[0], DecodeError)
    assert items[0].type_name == StatusAcks.TYPE


def test_a_list_of_another_kind_is_refused_item_by_item() -> None:
    # an Acknowledges holding an Update: each item is checked as what the list says it is
    ack = Acknowledge(framework_id="f", task_id="t", uuid="u").model_dump(mode="python")
    update = _update(1).model_dump(mode="python")
    raw = msgpack.packb([PROTOCOL_VERSION, "Acknowledges", None, {"items": [ack, update]}])
    items = decode_many(raw)
    assert [type(i) for i in items] == [Envelope, DecodeError]
    assert isinstance(items[0], Envelope)
    assert type(items[0].message) is Acknowledge


def test_one_bad_message_in_a_batch_spoils_only_itself() -> None:
    good = encode(Revive(framework_id="f1"))
    items = decode_many(encode_batch([good, b"\xc1junk", good]))
    assert [type(i) for i in items] == [Envelope, DecodeError, Envelope]


@FAST
@given(st.binary(max_size=512))
def test_decode_many_never_raises(data: bytes) -> None:
    for item in decode_many(data):
        assert isinstance(item, Envelope | DecodeError)


@FAST
@given(model(Accept), st.sampled_from([None, "ops"]))
def test_a_launch_sent_as_its_accept_carried_its_tasks_arrives_as_one_dumped(
    accept: Wire, role: str | None
) -> None:
    """The master sends a launch's tasks as the framework's Accept carried them (its maps
    from the wire, a role it filled in added): the slave reads what it would have read
    from the tasks' models dumped again."""
    assert isinstance(accept, Accept)
    read = decode(encode(accept)).message
    assert isinstance(read, Accept)
    if not read.tasks:
        return
    tasks = [t if role is None else t.model_copy(update={"role": role}) for t in read.tasks]
    maps = [m if role is None or m is None else {**m, "role": role} for m in read.task_maps()]
    assert None not in maps  # (read from the wire: each task's map kept)

    def launch() -> RunTasks:
        return RunTasks(framework_id="f", tasks=tasks, launch_id="l", proofs=["p"] * len(tasks))

    as_carried, dumped = launch().with_wire_tasks(maps), launch()
    sent = as_carried.wire_dump()["tasks"]
    assert all(a is b for a, b in zip(sent, maps, strict=True))  # (the maps, not a dump)
    assert decode(encode(as_carried)).message == decode(encode(dumped)).message == dumped
    # a copy with other tasks is sent as they are, not as the maps of the first's
    other = [t.model_copy(update={"task_id": f"other-{i}"}) for i, t in enumerate(tasks)]
    copied = as_carried.model_copy(update={"tasks": other})
    arrived = decode(encode(copied)).message
    assert isinstance(arrived, RunTasks)
    assert [t.task_id for t in arrived.tasks] == [t.task_id for t in other]
