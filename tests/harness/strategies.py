"""Hypothesis strategies for every wire model, built by reading the models' own fields.

Reading the fields (rather than writing a strategy per model) means a new message type
or field is covered by the property tests the moment it is added.
"""

from __future__ import annotations

import types
import typing
from enum import Enum
from typing import Any, cast

import annotated_types as at
from hypothesis import strategies as st
from pydantic import ValidationError

from protocol.wire.discrete import Discrete, ItemSet, Ranges, Value
from protocol.wire.messages import ALL_MESSAGES, CommandInfo, OfferOperation, TaskInfo, Wire
from protocol.wire.resources import Limit, Resources

NAMES = st.sampled_from(["cpus", "mem", "disk", "gpus", "ports_x", "bandwidth"])
AMOUNTS = st.integers(min_value=0, max_value=10**9).map(lambda m: m / 1000)
RESOURCES = st.dictionaries(NAMES, AMOUNTS, max_size=4).map(Resources)
LIMITS = st.dictionaries(NAMES, AMOUNTS, max_size=4).map(Limit)  # zeros kept


def as_value(value: Ranges | ItemSet) -> Value:
    return value


SPANS = st.tuples(st.integers(0, 70_000), st.integers(0, 50)).map(lambda s: (s[0], s[0] + s[1]))
RANGES = st.lists(SPANS, max_size=4).map(Ranges)
ITEM_SETS = st.lists(st.sampled_from(["a", "b", "zone-1", "eu/west"]), max_size=3).map(ItemSet)
DISCRETE = st.fixed_dictionaries(
    {}, optional={"ports": RANGES.map(as_value), "zones": ITEM_SETS.map(as_value)}
).map(Discrete)


def _text(metadata: list[Any]) -> st.SearchStrategy[str]:
    lo = next((m.min_length for m in metadata if isinstance(m, at.MinLen)), 0)
    hi = next((m.max_length for m in metadata if isinstance(m, at.MaxLen)), 40)
    return st.text(min_size=lo, max_size=min(hi, 40))


def _number(metadata: list[Any], integer: bool) -> st.SearchStrategy[Any]:
    lo: float | None = None
    hi: float | None = None
    exclude_lo = False
    for m in metadata:
        if isinstance(m, at.Ge):
            lo = float(cast("float", m.ge))
        elif isinstance(m, at.Gt):
            lo, exclude_lo = float(cast("float", m.gt)), True
        elif isinstance(m, at.Le):
            hi = float(cast("float", m.le))
    if integer:
        return st.integers(min_value=int(lo) if lo is not None else -(2**31), max_value=2**31)
    return st.floats(
        min_value=lo,
        max_value=hi if hi is not None else 1e12,
        exclude_min=exclude_lo,
        allow_nan=False,
        allow_infinity=False,
    )


def for_annotation(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(for_annotation(a, metadata) for a in args))
    if origin is typing.Annotated:
        return for_annotation(args[0], list(metadata) + list(annotation.__metadata__))
    if origin is list:
        inner = for_annotation(args[0], [])
        lo = next((m.min_length for m in metadata if isinstance(m, at.MinLen)), 0)
        return st.lists(inner, min_size=lo, max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if annotation is type(None):
        return st.none()
    if annotation is str:
        return _text(metadata)
    if annotation is bytes:
        return st.binary(max_size=64)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return _number(metadata, integer=True)
    if annotation is float:
        return _number(metadata, integer=False)
    if annotation is Resources:
        return RESOURCES
    if annotation is Limit:
        return LIMITS
    if annotation is Discrete:
        return DISCRETE
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Wire):
        return model(annotation)
    raise NotImplementedError(f"no strategy for {annotation!r}")


def _valid(cls: type[Wire], fields: dict[str, Any]) -> bool:
    try:
        cls.model_validate(fields)
    except ValidationError:
        return False
    return True


def model(cls: type[Wire]) -> st.SearchStrategy[Wire]:
    if cls is TaskInfo:  # exactly one of command or executor: draw which
        return st.builds(
            dict,
            task_id=_text([at.MinLen(1)]),
            slave_id=_text([at.MinLen(1)]),
            resources=RESOURCES,
            command=model(CommandInfo),
            data=st.binary(max_size=16),
        ).map(lambda d: TaskInfo.model_validate(d))
    if cls is OfferOperation:  # resources the operation can convert: draw the kind
        return st.sampled_from(sorted(OPERATION_EXAMPLES.items())).map(
            lambda kv: OfferOperation(type=kv[0], resources=kv[1])
        )
    parts = {
        name: for_annotation(f.annotation, list(f.metadata)) for name, f in cls.model_fields.items()
    }
    return st.fixed_dictionaries(parts).filter(lambda d: _valid(cls, d)).map(cls.model_validate)


OPERATION_EXAMPLES = {
    "RESERVE": Resources({"cpus(r,p)": 1}),
    "UNRESERVE": Resources({"cpus(r,p)": 1}),
    "CREATE": Resources({"disk(r,p)[v:data]": 8}),
    "DESTROY": Resources({"disk(r,p)[v:data]": 8}),
}


ANY_MESSAGE = st.sampled_from(ALL_MESSAGES).flatmap(model)


def example(cls: type[Wire]) -> Wire:
    """A small deterministic instance of `cls` (for tests that send one of every type)."""
    values: dict[str, Any] = {}
    for name, f in cls.model_fields.items():
        if not f.is_required():
            continue
        values[name] = _minimal(f.annotation, name)
    if cls is TaskInfo:
        values["command"] = CommandInfo(value="sleep 1")
    if cls is OfferOperation:
        values["resources"] = OPERATION_EXAMPLES[values["type"]]
    return cls.model_validate(values)


def _minimal(annotation: Any, name: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _minimal(args[0], name)
    if origin is typing.Annotated:
        return _minimal(args[0], name)
    if origin is list:
        return [_minimal(args[0], name)]
    if origin is dict:
        return {"k": "v"}
    if origin is typing.Literal:
        return args[0]
    if annotation is str:
        return f"{name}-1"
    if annotation is bytes:
        return b"\x00\x01data"
    if annotation in (int, float):
        return 1
    if annotation is bool:
        return True
    if annotation is Resources:
        return Resources(cpus=0.5, mem=512)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return next(iter(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Wire):
        return example(annotation)
    raise NotImplementedError(f"no example for {annotation!r}")
