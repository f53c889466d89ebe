"""Ranges and sets: resources whose values are picked one by one (ports, zones), beside
the scalars of a `Resources`.

A `Resources` stays the quantity the allocator counts (a range or a set counted by its
size: `ports:[31000-32000]` is `ports: 1001`), so DRF's hot path is unchanged; the
concrete values travel beside it as a `Discrete`: on a slave's registration, in an
offer (the slave's free values), in a task (the values it asked for, out of its offer).

The text form is Mesos's (src/common/values.cpp): `[31000-32000]`, `[8000-8010,9000-9100]`
(spaces ignored, overlapping or touching ranges coalesced), `{a,b}`. The wire carries the
same text, one string a resource, parsed and bounded on arrival.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from protocol.wire.reservations import base_of
from protocol.wire.resources import PORTS, SCALE, ResourceError, Resources, split_text

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import core_schema

DEFAULT_PORTS = "[31000-32000]"
"""What a slave offers unless its --resources names ports (as a Mesos agent does)."""

MAX_RANGES = 1024
"""Ranges in one value, as written (before coalescing): more is refused, not merged."""
MAX_ITEMS = 1024
"""Items of one set."""
MAX_ITEM = 64
"""Characters of one set item."""
MAX_TEXT = 32 * 1024
"""Characters of one value's text, refused before it is read."""
MAX_VALUE = 2**53 - 1
"""The largest bound of a range (a JSON number stays exact up to here)."""
MAX_SIZE = 2**62 // SCALE
"""The most values one resource may count (its size, kept in fixed point)."""

_ITEM = re.compile(r"[A-Za-z0-9_.:/@+-]+")


_V = TypeVar("_V", "Ranges", "ItemSet")


class Value(Protocol):
    """What a range or a set can do: the one interface the books and the wire use."""

    kind: str  # Mesos's Value.Type: RANGES or SET

    @property
    def size(self) -> int:
        """How many values: what DRF and quota count."""

    def contains(self, other: Any) -> bool: ...
    def overlaps(self, other: Any) -> bool: ...
    def add(self, other: Any) -> Value: ...
    def subtract(self, other: Any) -> Value: ...
    def take(self, n: int) -> Value: ...
    def joined(self, others: Iterable[Any]) -> Value: ...
    def to_mesos(self) -> dict[str, Any]: ...
    def members(self, most: int) -> list[str]: ...


class Ranges:
    """Sorted, disjoint, non-touching closed ranges of non-negative integers."""

    __slots__ = ("size", "spans")

    kind = "RANGES"

    def __init__(self, spans: Iterable[tuple[int, int]] = ()) -> None:
        """Trusted spans (the books'); `of` checks what comes from outside."""
        merged: list[tuple[int, int]] = []
        for begin, end in sorted(spans):
            if merged and begin <= merged[-1][1] + 1:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((begin, end))
        self.spans = tuple(merged)
        self.size = sum(e - b + 1 for b, e in merged)

    @classmethod
    def _sorted(cls, spans: tuple[tuple[int, int], ...], size: int) -> Ranges:
        """Spans already sorted, disjoint and apart, and their size (the books' own)."""
        out = cls.__new__(cls)
        out.spans, out.size = spans, size
        return out

    @classmethod
    def of(cls, spans: Iterable[tuple[object, object]], name: str = PORTS) -> Ranges:
        """Ranges from outside (a user, a framework): each bound an integer in
        [0, MAX_VALUE], begin <= end, at most MAX_RANGES of them."""
        checked: list[tuple[int, int]] = []
        for begin, end in spans:
            if len(checked) >= MAX_RANGES:
                raise ResourceError(f"resource {name!r}: more than {MAX_RANGES} ranges")
            for bound in (begin, end):
                if isinstance(bound, bool) or not isinstance(bound, int):
                    raise ResourceError(
                        f"resource {name!r}: a range's bounds are integers, got {bound!r}"
                    )
                if not 0 <= bound <= MAX_VALUE:
                    raise ResourceError(
                        f"resource {name!r}: range bound {bound} is outside [0, {MAX_VALUE}]"
                    )
            if begin > end:  # type: ignore[operator]
                raise ResourceError(f"resource {name!r}: range [{begin}-{end}] is inverted")
            checked.append((begin, end))  # type: ignore[arg-type]
        out = cls(checked)
        if out.size > MAX_SIZE:
            raise ResourceError(f"resource {name!r}: {out.size} values are too many")
        return out

    @classmethod
    def parse(cls, text: str, name: str = PORTS) -> Ranges:
        """Mesos's text: `[31000-32000]`, `[8000-8010, 9000-9100]`, `[]`."""
        body = _bracketed(text, "[", "]", name)
        spans: list[tuple[object, object]] = []
        for part in filter(None, body.split(",")):
            begin, sep, end = part.partition("-")
            if not sep or not begin.isdigit() or not end.isdigit():
                raise ResourceError(
                    f"resource {name!r}: expected ranges like [31000-32000], got {part!r}"
                )
            spans.append((int(begin), int(end)))
            if len(spans) > MAX_RANGES:
                raise ResourceError(f"resource {name!r}: more than {MAX_RANGES} ranges")
        return cls.of(spans, name)

    def __str__(self) -> str:
        return "[" + ",".join(f"{b}-{e}" for b, e in self.spans) + "]"

    def __repr__(self) -> str:
        return f"Ranges({self})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ranges) and self.spans == other.spans

    def __hash__(self) -> int:
        return hash(self.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)

    def contains(self, other: Any) -> bool:
        """Every value of `other` is here (each of its spans inside one of ours)."""
        if not isinstance(other, Ranges):
            return False
        mine, i = self.spans, 0
        for begin, end in other.spans:
            while i < len(mine) and mine[i][1] < begin:
                i += 1
            if i == len(mine) or mine[i][0] > begin or mine[i][1] < end:
                return False
        return True

    def overlaps(self, other: Any) -> bool:
        if not isinstance(other, Ranges):
            return False
        a, b, i, j = self.spans, other.spans, 0, 0
        while i < len(a) and j < len(b):
            if a[i][1] < b[j][0]:
                i += 1
            elif b[j][1] < a[i][0]:
                j += 1
            else:
                return True
        return False

    def add(self, other: Any) -> Ranges:
        return Ranges((*self.spans, *_same_kind(self, other).spans))

    def joined(self, others: Iterable[Any]) -> Ranges:
        """This and all of `others` (one sort, not one a value)."""
        spans = list(self.spans)
        for other in others:
            spans.extend(_same_kind(self, other).spans)
        return Ranges(spans)

    def subtract(self, other: Any) -> Ranges:
        """What is here and not in `other`."""
        cut = _same_kind(self, other).spans
        out: list[tuple[int, int]] = []
        j = 0
        for begin, end in self.spans:
            while j < len(cut) and cut[j][1] < begin:
                j += 1
            k, start = j, begin
            while k < len(cut) and cut[k][0] <= end:
                if cut[k][0] > start:
                    out.append((start, cut[k][0] - 1))
                start = max(start, cut[k][1] + 1)
                k += 1
            if start <= end:
                out.append((start, end))
        return Ranges(out)

    def take(self, n: int) -> Ranges:
        """The lowest `n` values (fewer if there are fewer)."""
        if n >= self.size:
            return self
        out: list[tuple[int, int]] = []
        left = n
        for begin, end in self.spans:
            if left <= 0:
                break
            last = min(end, begin + left - 1)
            out.append((begin, last))
            left -= last - begin + 1
        return Ranges._sorted(tuple(out), n if n > 0 else 0)

    def members(self, most: int) -> list[str]:
        """The first `most` values, lowest first, as text."""
        out: list[str] = []
        for begin, end in self.spans:
            for v in range(begin, min(end, begin + most - len(out) - 1) + 1):
                out.append(str(v))
            if len(out) >= most:
                break
        return out

    def to_mesos(self) -> dict[str, Any]:
        return {"ranges": {"range": [{"begin": b, "end": e} for b, e in self.spans]}}


class ItemSet:
    """A set of named items (`{a,b}`)."""

    __slots__ = ("items", "size")

    kind = "SET"

    def __init__(self, items: Iterable[str] = ()) -> None:
        self.items = frozenset(items)
        self.size = len(self.items)

    @classmethod
    def of(cls, items: Iterable[object], name: str = "set") -> ItemSet:
        checked: list[str] = []
        for item in items:
            if len(checked) >= MAX_ITEMS:
                raise ResourceError(f"resource {name!r}: more than {MAX_ITEMS} items")
            if not isinstance(item, str) or len(item) > MAX_ITEM or not _ITEM.fullmatch(item):
                raise ResourceError(
                    f"resource {name!r}: an item is 1 to {MAX_ITEM} letters, digits or "
                    f"_.:/@+-, got {str(item)[:80]!r}"
                )
            checked.append(item)
        return cls(checked)

    @classmethod
    def parse(cls, text: str, name: str = "set") -> ItemSet:
        """Mesos's text: `{a,b}`, `{}`."""
        body = _bracketed(text, "{", "}", name)
        parts = body.split(",") if body else []
        if len(parts) > MAX_ITEMS:
            raise ResourceError(f"resource {name!r}: more than {MAX_ITEMS} items")
        return cls.of(parts, name)

    def __str__(self) -> str:
        return "{" + ",".join(sorted(self.items)) + "}"

    def __repr__(self) -> str:
        return f"ItemSet({self})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ItemSet) and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def contains(self, other: Any) -> bool:
        return isinstance(other, ItemSet) and other.items <= self.items

    def overlaps(self, other: Any) -> bool:
        return isinstance(other, ItemSet) and not self.items.isdisjoint(other.items)

    def add(self, other: Any) -> ItemSet:
        return ItemSet(self.items | _same_kind(self, other).items)

    def joined(self, others: Iterable[Any]) -> ItemSet:
        return ItemSet(self.items.union(*(_same_kind(self, o).items for o in others)))

    def subtract(self, other: Any) -> ItemSet:
        return ItemSet(self.items - _same_kind(self, other).items)

    def take(self, n: int) -> ItemSet:
        return ItemSet(sorted(self.items)[: max(n, 0)])

    def members(self, most: int) -> list[str]:
        return sorted(self.items)[:most]

    def to_mesos(self) -> dict[str, Any]:
        return {"set": {"item": sorted(self.items)}}


def _same_kind(mine: _V, other: object) -> _V:
    if type(other) is not type(mine):
        raise ResourceError(f"cannot combine {mine!r} with {other!r}: not the same kind")
    return other  # type: ignore[return-value,unused-ignore]


def _bracketed(text: str, opening: str, closing: str, name: str) -> str:
    if len(text) > MAX_TEXT:
        raise ResourceError(f"resource {name!r}: its text is longer than {MAX_TEXT} characters")
    body = text.replace(" ", "")
    if not body.startswith(opening) or not body.endswith(closing):
        raise ResourceError(f"resource {name!r}: expected {opening}...{closing}, got {text!r}")
    body = body[1:-1]
    if any(c in body for c in "[]{}()"):
        raise ResourceError(f"resource {name!r}: mismatched brackets in {text!r}")
    return body


def parse_value(name: str, text: str) -> Value:
    """A range or a set from its text (`[1-2]`, `{a}`): ResourceError if it is neither."""
    stripped = text.strip()
    if stripped.startswith("["):
        return Ranges.parse(stripped, name)
    if stripped.startswith("{"):
        return ItemSet.parse(stripped, name)
    raise ResourceError(f"resource {name!r}: expected [ranges] or {{set}}, got {text[:80]!r}")


class Discrete(Mapping[str, Value]):
    """The concrete ranges and sets of a resource vector, by name (empty values not kept).
    Immutable; arithmetic returns new ones."""

    __slots__ = ("by_name",)

    def __init__(self, values: Mapping[str, Value] | None = None) -> None:
        self.by_name: dict[str, Value] = {k: v for k, v in (values or {}).items() if v}

    @classmethod
    def from_text(cls, texts: Mapping[str, str]) -> Discrete:
        """From `{"ports": "[31000-32000]"}`, as the wire and the web carry it."""
        if not texts:
            return EMPTY  # (most tasks and slaves have none: one shared, not one each)
        if len(texts) > 64:
            raise ResourceError("at most 64 range or set resources")
        values: dict[str, Value] = {}
        for name, text in texts.items():
            _check_name(name)
            if not isinstance(text, str):
                raise ResourceError(f"resource {name!r}: expected text like [1-2] or {{a}}")
            values[name] = parse_value(name, text)
        return cls(values)

    def __getitem__(self, name: str) -> Value:
        return self.by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_name)

    def __len__(self) -> int:
        return len(self.by_name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Discrete):
            return self.by_name == other.by_name
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self.by_name.items()))

    def __str__(self) -> str:
        return ";".join(f"{k}:{v}" for k, v in sorted(self.by_name.items())) or "{}"

    def __repr__(self) -> str:
        return f"Discrete({self})"

    def to_text(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.by_name.items()}

    def counts(self) -> Resources:
        """Each value's size: what the allocator counts."""
        return Resources.from_millis({k: v.size * SCALE for k, v in self.by_name.items()})

    def contains(self, other: Discrete) -> bool:
        for name, value in other.by_name.items():
            mine = self.by_name.get(name)
            if mine is None or not mine.contains(value):
                return False
        return True

    def overlap(self, other: Discrete) -> list[str]:
        """The names whose values both hold some of."""
        return [
            n for n, v in other.by_name.items() if n in self.by_name and self.by_name[n].overlaps(v)
        ]

    def whoever(self, base: str) -> Value | None:
        """Every value of resource `base`, whoever's (`ports` and `ports(svc)` alike): what
        a task was given, or what a slave has, as ports."""
        found = [v for k, v in self.by_name.items() if base_of(k) == base]
        return found[0].joined(found[1:]) if found else None

    def given_twice(self) -> str | None:
        """Why these cannot be one slave's (None: they can): two names of one resource
        (`ports` and `ports(svc)`) that hold one value, which would go to two tasks."""
        seen: list[tuple[str, str, Value]] = []
        for key, value in self.by_name.items():
            base = base_of(key)
            for other_base, other, held in seen:
                if other_base == base and held.overlaps(value):
                    return f"{other}:{held} and {key}:{value} overlap: each value is one resource"
            seen.append((base, key, value))
        return None

    def add(self, other: Discrete) -> Discrete:
        out = dict(self.by_name)
        for name, value in other.by_name.items():
            out[name] = out[name].add(value) if name in out else value
        return Discrete(out)

    @classmethod
    def union(cls, many: Iterable[Discrete]) -> Discrete:
        """All of `many` together (the values every task on a slave holds)."""
        by_name: dict[str, list[Value]] = {}
        for d in many:
            for name, value in d.by_name.items():
                by_name.setdefault(name, []).append(value)
        return cls({n: vs[0].joined(vs[1:]) for n, vs in by_name.items()})

    def subtract(self, other: Discrete) -> Discrete:
        out = dict(self.by_name)
        for name, value in other.by_name.items():
            if name in out:
                out[name] = out[name].subtract(value)
        return Discrete(out)

    def take(self, counts: Mapping[str, int]) -> Discrete:
        """For each name, the lowest `counts[name]` values (its millis / SCALE). (An
        offer's ports, once a round for every slave offered: kept lean.)"""
        for name, value in self.by_name.items():
            if counts.get(name, 0) < value.size * SCALE:
                break
        else:
            return self  # all of them (a whole slave offered): no copy
        out = Discrete.__new__(Discrete)
        out.by_name = {}
        for name, value in self.by_name.items():
            millis = counts.get(name)
            if millis:
                out.by_name[name] = value.take(millis // SCALE)
        return out

    # -- pydantic integration --------------------------------------------------------------
    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from pydantic_core import PydanticCustomError, core_schema

        def validate(value: Any) -> Discrete:
            if isinstance(value, Discrete):
                return value
            if not isinstance(value, dict):
                raise PydanticCustomError(
                    "discrete",
                    "ranges and sets are a map of name to text like [31000-32000], got {kind}",
                    {"kind": type(value).__name__},
                )
            try:
                return cls.from_text(value)
            except ResourceError as e:
                raise PydanticCustomError("discrete", str(e)) from None

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda d: d.to_text(), when_used="always"
            ),
            json_schema_input_schema=core_schema.dict_schema(
                core_schema.str_schema(), core_schema.str_schema()
            ),
        )


EMPTY = Discrete()


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ResourceError(
            f"resource name must be a non-empty string of at most 64 chars: {name!r}"
        )


def with_counts(resources: Resources, discrete: Discrete, what: str) -> Resources:
    """`resources` with each range's or set's size as its amount: filled in where it is
    not named, refused (ResourceError) where it is named and differs."""
    if not discrete:
        return resources
    counts = discrete.counts()
    for name, millis in counts.millis.items():
        said = resources.millis.get(name)
        if said is not None and said != millis:
            raise ResourceError(
                f"{what}: {name} is {resources[name]:g} but its values {discrete[name]} "
                f"count {millis // SCALE}"
            )
    missing = {n: m for n, m in counts.millis.items() if n not in resources.millis}
    return resources + Resources.from_millis(missing) if missing else resources


def parse_resources(text: str) -> tuple[Resources, Discrete]:
    """Mesos's text form (`cpus:2;mem:2200;ports:[31000-32000];zones:{a,b}`): the
    quantities (ranges and sets counted by size) and the concrete values beside them.
    A name given twice is refused (Mesos would add them; here it is a typo's mark)."""
    amounts: dict[str, float] = {}
    values: dict[str, Value] = {}
    for name, value in split_text(text):
        _check_name(name)
        if name in amounts or name in values:
            raise ResourceError(f"resource {name!r} is given twice")
        if value[:1] in ("[", "{"):
            values[name] = parse_value(name, value)
            continue
        try:
            amounts[name] = float(value)
        except ValueError:
            raise ResourceError(
                f"resource {name!r}: not a number, [ranges] or {{set}}: {value!r}"
            ) from None
    discrete = Discrete(values)  # (`ports:[]`: none, and named)
    if (twice := discrete.given_twice()) is not None:
        raise ResourceError(twice)
    return with_counts(Resources(amounts), discrete, "resources"), discrete


def environment(discrete: Discrete, most: int = 1024) -> dict[str, str]:
    """A task's port variables, as Marathon names them: `PORT0`, `PORT1`, ... each port
    (lowest first, at most `most`), and `PORTS` all of them comma-separated; reserved
    ports (`ports(svc)`) as unreserved ones."""
    ports = discrete.whoever(PORTS)
    if ports is None:
        return {}
    values = ports.members(most)
    env = {f"PORT{i}": v for i, v in enumerate(values)}
    env["PORTS"] = ",".join(values)
    return env
