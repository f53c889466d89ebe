"""The wire format: msgpack envelopes carrying a protocol version and a type tag.

An envelope is the msgpack array `[version, type, reply_to, body]` or
`[version, type, reply_to, body, epoch]`:

- `version` is `PROTOCOL_VERSION`; anything else is refused;
- `type` is the message class name (`Offers`, `Accept`, ...);
- `reply_to` is the sender's inbox topic, or nil: where errors about this message go;
- `body` is the model's fields as a map (a `LEAN` message's without those that hold
  their defaults: its reader's validation fills them in);
- `epoch`, on what a master sends, is its leadership epoch (see `protocol.wire.messages.Leader`):
  receivers drop what a master with an older epoch than one they have seen sends.

A *batch* (`[version, "Batch", reply_to, [encoded, ...]]`) carries several encoded messages
for one topic in one MQTT message; the bus makes them under load and takes them apart on
arrival, so nothing above the bus sees them. A *list* (`StatusUpdates`, `Updates`, ... in
`protocol.wire.messages.LISTS`) is an ordinary message whose items are messages of one kind:
encoded and validated in one pass, not one a message. `decode_many` hands its items on
one by one, as if each had come alone; when the list as a whole is invalid, each item is
validated on its own, so one bad item spoils only itself.

`decode` takes untrusted bytes and either returns a validated message or raises
`DecodeError`, and nothing else: truncated input, garbage, an unknown type, a wrong
version and a failed validation (with the field named) all become a `DecodeError` whose
`reason` says which. When the envelope itself was readable, `reply_to` is kept on the
error so the receiver can tell the sender what was wrong.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
import msgpack
from pydantic import BaseModel, TypeAdapter, ValidationError

from protocol.wire.messages import ALL_MESSAGES, ITEM_OF, LISTS, MAX_LIST_ITEMS, Wire

PROTOCOL_VERSION = 1
MAX_PAYLOAD_ITEMS = 4096  # calls and list items in one payload the bus sends (a master
# reads no more in a framework's or operator's: master.intake)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_BATCH = MAX_LIST_ITEMS  # messages in one batch (the bus sends no more in one payload)

REGISTRY: dict[str, type[Wire]] = {cls.TYPE: cls for cls in ALL_MESSAGES}


class DecodeError(Exception):
    """Bytes that are not a valid message. `reason` is one of REASONS; `detail` says more."""

    REASONS = (
        "truncated",
        "malformed",
        "too-large",
        "too-many",
        "wrong-version",
        "unknown-type",
        "invalid",
    )

    def __init__(
        self, reason: str, detail: str, *, reply_to: str | None = None, type_name: str | None = None
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.reply_to = reply_to
        self.type_name = type_name
        self.size = 0  # the bytes that were not a message, where the reader counted them


@dataclass(frozen=True, slots=True)
class Envelope:
    message: Wire
    reply_to: str | None
    epoch: int = 0


# One packer for every message (`msgpack.packb` makes one a call: a third of a small
# message's packing). Safe to share: packing a message's plain values runs no Python
# code, so nothing can use it meanwhile, and a pack that fails leaves it empty.
_PACKER = msgpack.Packer(use_bin_type=True)


def encode(message: Wire, reply_to: str | None = None, epoch: int = 0) -> bytes:
    body = message.wire_dump()
    envelope = [PROTOCOL_VERSION, message.TYPE, reply_to, body]
    if epoch:
        envelope.append(epoch)
    packed: bytes = _PACKER.pack(envelope)
    return packed


def encode_list(messages: Sequence[Wire], reply_to: str | None = None, epoch: int = 0) -> bytes:
    """Messages of one kind that travels in lists (`LISTS`) as one list message, in order:
    the list's body is its items dumped in one pass, as its model would dump them (no
    list model made for it: `model_construct` was a third of a short list's encoding)."""
    kind = type(messages[0])
    items = messages if isinstance(messages, list) else list(messages)
    body = {"items": _items(kind).dump_python(items, mode="python", exclude_defaults=kind.LEAN)}
    envelope = [PROTOCOL_VERSION, LISTS[kind].TYPE, reply_to, body]
    if epoch:
        envelope.append(epoch)
    packed: bytes = _PACKER.pack(envelope)
    return packed


@cache
def _items(kind: type[Wire]) -> TypeAdapter[list[Wire]]:
    """How a list of `kind` dumps (the `items` of its list message)."""
    return TypeAdapter(list[kind])  # type: ignore[valid-type]


BATCH = "Batch"
_BATCH_HEAD = msgpack.packb([PROTOCOL_VERSION, BATCH, None, []])[:8]  # array, version, type


def encode_batch(encoded: list[bytes], reply_to: str | None = None) -> bytes:
    """Several already-encoded messages for one topic as one payload (in order)."""
    packed: bytes = _PACKER.pack([PROTOCOL_VERSION, BATCH, reply_to, encoded])
    return packed


def peek_types(data: bytes) -> list[str] | None:
    """The type names a payload holds (a batch's items in order), nothing validated: to
    refuse cheaply what is refused whatever it says. None if it does not tell."""
    try:
        raw = _unpack(data)
        if isinstance(raw, list) and len(raw) == 4 and raw[1] == BATCH:
            if not isinstance(raw[3], list):
                return None
            names: list[Any] = [_peek_name(i) for i in raw[3] if isinstance(i, bytes)]
            if len(names) != len(raw[3]):
                return None
        else:
            names = [raw[1] if isinstance(raw, list) and len(raw) >= 4 else None]
    except DecodeError:
        return None
    if not all(isinstance(n, str) for n in names):
        return None
    return names


def _peek_name(item: bytes) -> Any:
    """A message's type name: read in place when it is encoded as ours are (an array of 4
    or 5, a small version, a short name), else from the message unpacked."""
    if len(item) > 3 and item[0] in (0x94, 0x95) and item[1] < 0x80 and 0xA0 <= item[2] < 0xC0:
        name = item[3 : 3 + item[2] - 0xA0]
        try:
            return name.decode()
        except UnicodeDecodeError:
            return None
    raw = _unpack(item)
    return raw[1] if isinstance(raw, list) and len(raw) >= 4 else None


def count_messages(data: bytes) -> int:
    """How many messages a payload holds (a batch's length, else 1), read from its headers
    alone: what a queue counts before anything is decoded."""
    unpacker = _past_batch_head(data)
    if unpacker is not None:
        try:
            unpacker.skip()  # reply_to
            return max(1, int(unpacker.read_array_header()))
        except Exception:  # not a batch of ours: it is refused as one message when decoded
            pass
    return 1


def batch_reply_to(data: bytes) -> str | None:
    """Where a batch's sender asks for answers, read from its headers alone (None: it
    names none, or it is no batch of ours)."""
    unpacker = _past_batch_head(data)
    try:
        reply_to = unpacker.unpack() if unpacker is not None else None
    except Exception:
        return None
    return reply_to if isinstance(reply_to, str) else None


def _past_batch_head(data: bytes) -> msgpack.Unpacker | None:
    """An unpacker at a batch's reply_to, its version and type read; None if the payload is
    no batch of ours."""
    if data[:8] != _BATCH_HEAD:
        return None  # (a lone message, or not ours: refused as one when decoded)
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=len(data))
    unpacker.feed(data)
    try:
        head = unpacker.read_array_header(), unpacker.unpack(), unpacker.unpack()
    except Exception:
        return None
    return unpacker if head == (4, PROTOCOL_VERSION, BATCH) else None


def decode_many(
    data: bytes, max_message: int = MAX_MESSAGE_BYTES, max_items: int | None = None
) -> list[Envelope | DecodeError]:
    """Decode a payload that is one message or a batch of them (of at most MAX_BATCH),
    each message of at most `max_message` bytes, and of at most `max_items` calls and
    list items in all (a message counts its lists' items, or 1): what is over is refused
    unvalidated, so what one payload costs is bounded.

    Each item is a message or the DecodeError saying why it is not; one bad message in a
    batch does not spoil the others. Raises nothing.
    """
    try:
        raw = _unpack(data, max_message if data[:8] != _BATCH_HEAD else MAX_MESSAGE_BYTES)
    except DecodeError as e:
        return [e]
    budget = [max_items if max_items is not None else len(data)]  # (a byte holds no item)
    if isinstance(raw, list) and len(raw) == 4 and raw[1] == BATCH:
        if raw[0] != PROTOCOL_VERSION:
            return [
                DecodeError(
                    "wrong-version", f"protocol version {raw[0]!r}, expected {PROTOCOL_VERSION}"
                )
            ]
        if not isinstance(raw[3], list):
            return [DecodeError("malformed", "a batch must hold a list of messages")]
        if len(raw[3]) > MAX_BATCH:
            return [DecodeError("too-many", f"a batch holds at most {MAX_BATCH} messages")]
        out: list[Envelope | DecodeError] = []
        for item in raw[3]:
            if not isinstance(item, bytes):
                out.append(DecodeError("malformed", "a batch item must be an encoded message"))
                continue
            try:
                out.extend(_within(_unpack(item, max_message), budget, max_items))
            except DecodeError as e:
                out.append(e)
        return out
    try:
        return _within(raw, budget, max_items)
    except DecodeError as e:
        return [e]


def _within(raw: Any, budget: list[int], max_items: int | None) -> list[Envelope | DecodeError]:
    """`_each`, if what is left of the payload's `budget` of items holds this message."""
    weight = _weight(raw)
    if weight > budget[0]:
        budget[0] = 0  # (and nothing after it: the payload is refused from here on)
        type_name = raw[1] if isinstance(raw, list) and len(raw) > 1 else None
        raise DecodeError(
            "too-many",
            f"a payload holds at most {max_items} calls and list items",
            reply_to=raw[2] if isinstance(raw, list) and len(raw) > 2 and raw[2] else None,
            type_name=type_name if isinstance(type_name, str) else None,
        )
    budget[0] -= weight
    return _each(raw)


def _weight(raw: Any) -> int:
    """How many calls and list items an unpacked message holds (1 at least)."""
    if not isinstance(raw, list) or len(raw) < 4 or not isinstance(raw[3], dict):
        return 1
    cls = REGISTRY.get(raw[1]) if isinstance(raw[1], str) else None
    if cls is None:
        return 1
    body = raw[3]
    return max(1, sum(len(v) for f in _list_bounds(cls) if isinstance(v := body.get(f), list)))


def _each(raw: Any) -> list[Envelope | DecodeError]:
    """An unpacked envelope's message, or a list's items one by one."""
    try:
        envelope = _from_envelope(raw)
    except DecodeError as e:
        if e.reason == "invalid" and e.type_name is not None:
            item_type = ITEM_OF.get(REGISTRY[e.type_name])
            if item_type is not None:
                return _each_alone(raw, item_type, e)
        raise
    if type(envelope.message) not in ITEM_OF:
        return [envelope]
    items: list[Wire] = envelope.message.items  # type: ignore[attr-defined]
    return [Envelope(item, envelope.reply_to, envelope.epoch) for item in items]


def _each_alone(
    raw: list[Any], item_type: type[Wire], error: DecodeError
) -> list[Envelope | DecodeError]:
    """An invalid list, item by item: the good ones pass, each bad one is its own error."""
    items = raw[3].get("items")
    if not isinstance(items, list) or not items or len(raw[3]) != 1 or error.reason != "invalid":
        return [error]  # not a list of items at all (or too long): the list's error says why
    out: list[Envelope | DecodeError] = []
    for item in items:
        try:
            out.append(_from_envelope([*raw[:1], item_type.TYPE, *raw[2:3], item, *raw[4:]]))
        except DecodeError as e:
            out.append(e)
    return out


def decode(data: bytes) -> Envelope:
    """Decode untrusted bytes. Raises only DecodeError."""
    return _from_envelope(_unpack(data))


def _unpack(data: bytes, limit: int = MAX_MESSAGE_BYTES) -> Any:
    if len(data) > limit:
        raise DecodeError("too-large", f"{len(data)} bytes exceeds {limit}")
    try:
        raw = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except msgpack.OutOfData:
        raise DecodeError("truncated", "message ends early") from None
    except msgpack.ExtraData:
        raise DecodeError("malformed", "trailing bytes after the message") from None
    except ValueError as e:
        # unpackb reports a cut-off message as ValueError("... incomplete input")
        if "incomplete" in str(e):
            raise DecodeError("truncated", "message ends early") from None
        raise DecodeError("malformed", f"not msgpack ({e})") from None
    except Exception as e:  # msgpack raises many types on garbage; all mean the same here
        raise DecodeError("malformed", f"not msgpack ({type(e).__name__}: {e})") from None
    return raw


def _from_envelope(raw: Any) -> Envelope:
    if not isinstance(raw, list) or len(raw) not in (4, 5):
        raise DecodeError(
            "malformed", "expected the array [version, type, reply_to, body(, epoch)]"
        )
    version, type_name, reply_to, body = raw[:4]
    if not isinstance(reply_to, str) or not reply_to:
        reply_to = None
    epoch = raw[4] if len(raw) == 5 else 0
    if type(epoch) is not int or epoch < 0:
        raise DecodeError("malformed", "the epoch must be a non-negative integer")
    if version != PROTOCOL_VERSION:
        raise DecodeError(
            "wrong-version",
            f"protocol version {version!r}, expected {PROTOCOL_VERSION}",
            reply_to=reply_to,
        )
    if not isinstance(type_name, str) or type_name not in REGISTRY:
        raise DecodeError("unknown-type", f"unknown message type {type_name!r}", reply_to=reply_to)
    if not isinstance(body, dict):
        raise DecodeError(
            "malformed", f"{type_name} body must be a map", reply_to=reply_to, type_name=type_name
        )
    for field_name, most in _list_bounds(REGISTRY[type_name]).items():
        value = body.get(field_name)
        if isinstance(value, list) and len(value) > most:  # before validating any item
            raise DecodeError(
                "too-many",
                f"{type_name}: {field_name} holds at most {most} items, not {len(value)}",
                reply_to=reply_to,
                type_name=type_name,
            )
    try:
        message = REGISTRY[type_name].model_validate(body)
    except ValidationError as e:
        raise DecodeError(
            "invalid",
            f"{type_name}: {describe_validation(e)}",
            reply_to=reply_to,
            type_name=type_name,
        ) from None
    except Exception as e:  # a validator hit something unforeseen: still just bad input
        raise DecodeError(
            "invalid",
            f"{type_name}: {type(e).__name__}: {e}",
            reply_to=reply_to,
            type_name=type_name,
        ) from None
    return Envelope(message, reply_to, epoch)


def items_of(message: Wire) -> int:
    """How many calls and list items a message counts for, as `decode_many` weighs it."""
    bounds = _list_bounds(type(message))
    if not bounds:
        return 1
    return max(1, sum(len(v) for n in bounds if isinstance(v := getattr(message, n), list)))


@cache
def _list_bounds(cls: type[Wire]) -> dict[str, int]:
    """The most items each of a message's list fields may hold (its `max_length`)."""
    bounds = {}
    for name, info in cls.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, annotated_types.MaxLen):  # (checked of lists only)
                bounds[name] = meta.max_length
    return bounds


def describe_validation(error: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line per failed field: `offer_ids.0: Input should be a valid string`. Given
    the `model` validated (a file a person wrote), a field it does not know is named with
    the nearest one it knows: `frameworks.0.duraton: unknown field: did you mean
    duration?`."""
    parts = []
    for err in error.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"])
        said = err["msg"]
        if err["type"] == "value_error":  # (our own words, raised by a validator)
            said = said.removeprefix("Value error, ")
        elif err["type"] == "extra_forbidden" and model is not None and err["loc"]:
            here = _fields_at(model, err["loc"][:-1])
            said = _unknown_field(str(err["loc"][-1]), here, _field_names(model))
        parts.append(f"{loc}: {said}" if loc else said)
    more = error.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def _unknown_field(name: str, here: frozenset[str] | None, known: frozenset[str]) -> str:
    """What to say of field `name`, written where the fields `here` are (None: a place
    not found), in a file whose models know `known` in all."""
    near = difflib.get_close_matches(name, sorted(known if here is None else here), n=1)
    if near and (here is not None or name not in known):
        return f"unknown field: did you mean {near[0]}?"
    if name in known:
        return "not a field here (it is one elsewhere in the file)"
    return "unknown field"


def _fields_at(model: type[BaseModel], loc: Sequence[int | str]) -> frozenset[str] | None:
    """The field names of the model at `loc` within `model` (a list's index or a dict's
    key steps to its item), or None if `loc` is not a model's place."""
    held: Any = model
    for part in loc:
        held = _one(held)
        if isinstance(held, type) and issubclass(held, BaseModel):
            fields = {f.alias or n: f.annotation for n, f in held.model_fields.items()}
            if part not in fields:
                return None
            held = fields[str(part)]
        else:
            args = get_args(held)
            if get_origin(held) not in (list, dict) or not args:
                return None
            held = args[-1]  # a list's item, a dict's value
    held = _one(held)
    if isinstance(held, type) and issubclass(held, BaseModel):
        return frozenset(f.alias or n for n, f in held.model_fields.items())
    return None


def _one(held: Any) -> Any:
    """`held` without Annotated's metadata, nor an Optional's None."""
    while True:
        if get_origin(held) is Annotated:
            held = get_args(held)[0]
            continue
        arms = [a for a in get_args(held) if a is not type(None)]
        if get_origin(held) in (Union, UnionType) and len(arms) == 1:
            held = arms[0]
            continue
        return held


@cache
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """Every field name of `model` and of the models its fields hold, however deep."""
    names: set[str] = set()
    seen: set[type[BaseModel]] = set()
    todo: list[Any] = [model]
    while todo:
        held = todo.pop()
        if isinstance(held, type) and issubclass(held, BaseModel):
            if held not in seen:
                seen.add(held)
                for name, field in held.model_fields.items():
                    names.add(field.alias or name)
                    todo.append(field.annotation)
        else:
            todo.extend(get_args(held))  # a list's item, a dict's value, a union's arms
    return frozenset(names)
