"""Resource vectors: named scalars kept in exact fixed point.

Mesos keeps scalar resources in fixed point with three decimals so that adding and
removing the same amounts a million times returns to exactly zero; floats drift. We do
the same: every amount is an integer number of thousandths ("millis"). `cpus: 0.5` is
500 millis, `mem: 512` (MB) is 512000 millis.

A `Resources` is immutable and hashable; arithmetic returns new vectors. Names other than
the usual `cpus`, `mem`, `disk`, `gpus` are allowed and behave the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Self

from protocol.wire.reservations import (
    MAX_KEY,
    ReservationError,
    base_of,
    is_plain,
    parse_key,
    stripped,
)

if TYPE_CHECKING:  # pydantic is imported when a model first asks for the schema: the
    # allocation policy uses these vectors and must load no I/O (pydantic_core loads asyncio)
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import core_schema

SCALE = 1000
"""Fixed-point scale: amounts are kept as integer thousandths."""

CPUS = "cpus"
MEM = "mem"
DISK = "disk"
GPUS = "gpus"
PORTS = "ports"  # a range (protocol.wire.discrete), counted here by its size


KNOWN_NAMES = (CPUS, MEM, DISK, GPUS, PORTS)
"""The resources drfmesos knows by name; any other is a custom resource."""

VALIDATED_KEPT = 4096  # distinct vectors kept validated (see the pydantic validator)
_VALIDATED: dict[tuple[Any, ...], Resources] = {}


class ResourceError(ValueError):
    """An amount that cannot be a resource: negative, not finite, not a number, or a bad name."""


MAX_AMOUNT = 2**62 / 1000  # (what fixed point holds: 2**62 millis)


def to_millis(name: str, amount: object) -> int:
    """Convert a user-facing amount to fixed point, rejecting what cannot be a resource."""
    if not isinstance(name, str) or not name or (len(name) > 64 and not _long_key(name)):
        raise ResourceError(
            f"resource name must be a non-empty string of at most 64 chars: {name!r}"
        )
    if not is_plain(name):
        try:
            parse_key(name)  # (cached: a reserved identity is parsed once)
        except ReservationError as e:
            raise ResourceError(str(e)) from None
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise ResourceError(f"resource {name!r}: amount must be a number, got {amount!r}")
    if isinstance(amount, float) and not math.isfinite(amount):
        raise ResourceError(f"resource {name!r}: amount must be finite, got {amount!r}")
    if amount < 0:
        raise ResourceError(f"resource {name!r}: amount must not be negative, got {amount!r}")
    if amount > MAX_AMOUNT:  # (before the product: 1e308 * SCALE is no integer)
        raise ResourceError(f"resource {name!r}: amount {amount!r} is too large")
    millis = round(amount * SCALE)
    if millis > 2**62:
        raise ResourceError(f"resource {name!r}: amount {amount!r} is too large")
    return int(millis)


def _long_key(name: str) -> bool:
    """A reserved identity (`cpus(team-a,alice)`) may be longer than a name: its name may not."""
    return not is_plain(name) and len(name) <= MAX_KEY and len(base_of(name)) <= 64


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether one insertion, deletion, substitution or swap of neighbours makes a into b."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        swapped = i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i]
        return a[i + 1 :] == b[i + 1 :] or (swapped and a[i + 2 :] == b[i + 2 :])
    return a[i + 1 :] == b[i:] if len(a) > len(b) else a[i:] == b[i + 1 :]


class Resources(Mapping[str, float]):
    """An immutable vector of named non-negative scalars.

    As a Mapping it reads in user units (`r["cpus"] == 0.5`); `millis` gives the exact
    fixed-point amounts. Zero amounts are not stored, so `Resources() == Resources(cpus=0)`.
    """

    __slots__ = ("_hash", "millis")

    millis: Mapping[str, int]
    """The exact fixed-point amounts (read-only; a plain attribute, not a property, as the
    allocator and the simulator read it for every task)."""

    def __init__(self, amounts: Mapping[str, float] | None = None, /, **kw: float) -> None:
        m: dict[str, int] = {}
        for source in (amounts or {}, kw):
            for name, amount in source.items():
                v = to_millis(name, amount)
                if v:
                    key = name if is_plain(name) else parse_key(name).key()  # (one spelling)
                    m[key] = m.get(key, 0) + v
        self.millis = m
        self._hash: int | None = None

    @classmethod
    def from_millis(cls, millis: Mapping[str, int]) -> Resources:
        """Build from fixed-point amounts (trusted: used by arithmetic and the books)."""
        r = cls.__new__(cls)
        # (zeros are rare: a plain copy is twice as fast as the filtering comprehension,
        # and a round makes one Resources an offer)
        clean = 0 not in millis.values()
        r.millis = dict(millis) if clean else {k: v for k, v in millis.items() if v}
        r._hash = None
        return r

    @classmethod
    def taking(cls, millis: dict[str, int]) -> Resources:
        """`from_millis` of a dict made for this alone, which the caller hands over and
        never touches again: taken as it is, not copied (a round's offer of a slave
        holding reservations, built for it)."""
        if 0 in millis.values():
            return cls.from_millis(millis)
        r = cls.__new__(cls)
        r.millis = millis
        r._hash = None
        return r

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse the command-line form `cpus:2;mem:2200` (also accepts `,` as separator),
        with Mesos's reservations: `cpus(team-a):2;mem(team-a,alice):1024`. Scalars only:
        Mesos's whole form, with ranges and sets (`ports:[31000-32000]`), is
        `protocol.wire.discrete.parse_resources`'s."""
        amounts: dict[str, float] = {}
        for name, value in split_text(text):
            if value.startswith(("[", "{")):
                raise ResourceError(
                    f"resource {name!r}: {value[:40]!r} is a range or a set: a quantity is "
                    "a number here (ports: 100)"
                )
            try:
                amounts[name] = float(value)
            except ValueError:
                raise ResourceError(f"resource {name!r}: not a number: {value!r}") from None
        return cls(amounts)

    def check_names(self, custom: Iterable[str] = ()) -> None:
        """Refuse a name that is neither known (`KNOWN_NAMES`) nor declared in `custom`:
        `cpu:2` offered 0 cpus and a resource named `cpu` that no task asks for. A name
        one edit from a known one is named in the refusal ("did you mean cpus?")."""
        allowed = set(KNOWN_NAMES) | set(custom)
        for name in map(base_of, self):
            if name in allowed:
                continue
            near = [known for known in KNOWN_NAMES if _one_edit_apart(name, known)]
            hint = f"did you mean {near[0]}?" if near else f"known: {', '.join(KNOWN_NAMES)}"
            raise ResourceError(f"unknown resource {name!r}: {hint}")

    def check_spelling(self) -> None:
        """Refuse a name one edit from a known one that is not itself known, as
        `check_names` says it ("did you mean cpus?"), where any other name may be a custom
        resource's: a quota of `cpu: 2` limits a resource no slave offers, so nothing."""
        for name in map(base_of, self):
            if name not in KNOWN_NAMES:
                near = [known for known in KNOWN_NAMES if _one_edit_apart(name, known)]
                if near:
                    raise ResourceError(f"unknown resource {name!r}: did you mean {near[0]}?")

    # -- Mapping ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> float:
        return self.millis[name] / SCALE

    def get_millis(self, name: str) -> int:
        return self.millis.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self.millis)

    def __len__(self) -> int:
        return len(self.millis)

    def __bool__(self) -> bool:
        return bool(self.millis)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self.millis == other.millis
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self.millis.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Resources({self})"

    def __str__(self) -> str:
        return ";".join(f"{k}:{_fmt(v)}" for k, v in sorted(self.millis.items())) or "{}"

    def quantities(self) -> Resources:
        """The amounts by what they are, whoever's: `cpus(team-a):1;cpus:1` is `cpus:2`
        (what a cgroup limits, a share counts)."""
        if all(map(is_plain, self.millis)):
            return self
        return Resources.from_millis(stripped(self.millis))

    def to_dict(self) -> dict[str, float]:
        return {k: v / SCALE for k, v in self.millis.items()}

    # -- arithmetic ------------------------------------------------------------------------
    def __add__(self, other: Resources) -> Resources:
        m = dict(self.millis)
        for k, v in other.millis.items():
            m[k] = m.get(k, 0) + v
        return Resources.from_millis(m)

    def __sub__(self, other: Resources) -> Resources:
        """Subtract; raises ResourceError if any amount would go negative."""
        if not self.contains(other):
            raise ResourceError(f"cannot subtract {other} from {self}: not enough")
        m = dict(self.millis)
        for k, v in other.millis.items():
            m[k] -= v
        return Resources.from_millis(m)

    def subtract_clamped(self, other: Resources) -> Resources:
        """Subtract, stopping at zero (for free = total - allocated when books disagree)."""
        m = dict(self.millis)
        for k, v in other.millis.items():
            if k in m:
                m[k] = max(0, m[k] - v)
        return Resources.from_millis(m)

    def scaled(self, factor: float) -> Resources:
        return Resources.from_millis({k: round(v * factor) for k, v in self.millis.items()})

    def contains(self, other: Resources) -> bool:
        """True when every amount in `other` is available here."""
        m = self.millis
        return all(m.get(k, 0) >= v for k, v in other.millis.items())

    def fits(self, into: Resources) -> bool:
        """True when this vector fits into `into` (the converse of contains)."""
        return into.contains(self)

    def is_empty(self) -> bool:
        return not self.millis

    # -- shares ----------------------------------------------------------------------------
    def shares(self, total: Resources) -> dict[str, float]:
        """Each resource's share of `total`; a resource the total lacks has share 0."""
        t = total.millis
        return {k: (v / t[k] if t.get(k) else 0.0) for k, v in self.millis.items()}

    def dominant_share(self, total: Resources) -> float:
        """max_j u_j / r_j (paper §4): the largest share of any resource."""
        return dominant_share(self.millis, total.millis)

    # -- pydantic integration --------------------------------------------------------------
    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from pydantic_core import PydanticCustomError, core_schema

        def validate(value: Any) -> Resources:
            if isinstance(value, cls):
                return value
            if isinstance(value, Resources):  # a plain vector given where a Limit is due
                return cls.from_millis(value.millis)
            if not isinstance(value, dict):
                raise PydanticCustomError(
                    "resources",
                    "resources must be a map of name to amount, got {kind}",
                    {"kind": type(value).__name__},
                )
            # The same vectors arrive again and again (a slave's total, a task's size:
            # 100,000 re-registering slaves carry a few distinct ones), and a vector is
            # immutable: one already validated is given again, checked as it was then.
            # (Each amount's type is in the key: True is 1 to a dict, not to a check.)
            try:
                key = (cls, *((n, type(a), a) for n, a in value.items()))
                seen = _VALIDATED.get(key)
            except TypeError:  # an amount no dict holds (a list): refused below
                key, seen = None, None
            if seen is not None:
                return seen
            try:
                made = cls(value)
            except ResourceError as e:
                raise PydanticCustomError("resources", str(e)) from None
            if key is not None:
                if len(_VALIDATED) >= VALIDATED_KEPT:
                    _VALIDATED.clear()  # (rarely: a cluster has a few distinct vectors)
                _VALIDATED[key] = made
            return made

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda r: r.to_dict(), when_used="always"
            ),
            json_schema_input_schema=core_schema.dict_schema(
                core_schema.str_schema(), core_schema.float_schema(ge=0)
            ),
        )


class Limit(Resources):
    """A quota limit: a vector that keeps its zeros. `cpus:0` (no cpus at all) is not `{}`
    (nothing limited), and a limit must not lose the difference on its way from the
    operator to the allocator; a resource not named is unlimited."""

    __slots__ = ()

    def __init__(self, amounts: Mapping[str, float] | None = None, /, **kw: float) -> None:
        m: dict[str, int] = {}
        for source in (amounts or {}, kw):
            for name, amount in source.items():
                m[name] = m.get(name, 0) + to_millis(name, amount)
        self.millis = m
        self._hash = None

    @classmethod
    def from_millis(cls, millis: Mapping[str, int]) -> Limit:
        r = cls.__new__(cls)
        r.millis = dict(millis)
        r._hash = None
        return r

    def __repr__(self) -> str:
        return f"Limit({self})"


def split_text(text: str) -> list[tuple[str, str]]:
    """`cpus:2;ports:[1-2,5-6];zones:{a,b};cpus(team-a):1` as (name, value text) pairs:
    parts split on `;` or `,` outside brackets (a reservation's `(...)`, its labels'
    `{...}`, a volume's `[...]`, a range's or a set's), each `name:value` split at its
    last `:` outside brackets (a volume's key holds `[id:path]`)."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                raise ResourceError(f"mismatched brackets in {text[:200]!r}")
        elif c in ";," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ResourceError(f"mismatched brackets in {text[:200]!r}")
    parts.append(text[start:])
    out: list[tuple[str, str]] = []
    for part in parts:
        part = part.strip()
        if not part:
            continue
        cut, depth = -1, 0
        for i, c in enumerate(part):
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == ":" and depth == 0:
                cut = i
        name, value = (part[:cut], part[cut + 1 :]) if cut >= 0 else ("", "")
        if cut < 0 or not name.strip():
            raise ResourceError(
                f"expected name:amount, name:[ranges] or name:{{set}}, got {part!r}"
            )
        out.append((name.strip(), value.strip()))
    return out


def add_millis(into: dict[str, int], delta: Mapping[str, int]) -> None:
    """Add fixed-point amounts into a book kept in place (the allocator's, the simulator's)."""
    for name, amount in delta.items():
        into[name] = into.get(name, 0) + amount


def sub_millis(into: dict[str, int], delta: Mapping[str, int], what: str = "the book") -> None:
    """Take fixed-point amounts out of a book kept in place, strictly: if `into` holds less
    of any resource than `delta`, raise ResourceError naming `what` and change nothing.
    An amount that reaches zero is dropped (a book names only what it holds)."""
    for name, amount in delta.items():
        if into.get(name, 0) < amount:
            raise ResourceError(f"{what} holds less {name} than is being taken out")
    for name, amount in delta.items():
        if amount:
            left = into[name] - amount
            if left:
                into[name] = left
            else:
                del into[name]


def sub_millis_clamped(into: dict[str, int], delta: Mapping[str, int]) -> None:
    """Take fixed-point amounts out of a book kept in place, none below zero (a book that
    may lag what it is told of: planning's, a claim's launches)."""
    for name, amount in delta.items():
        into[name] = max(0, into.get(name, 0) - amount)


def holds(have: Mapping[str, int], need: Mapping[str, int]) -> bool:
    """`have` holds at least `need` (fixed-point amounts). A plain loop, not all() over a
    generator: allocators and the simulator call it for every slave and task they look at,
    and the generator costs half again as much."""
    for name, amount in need.items():  # noqa: SIM110
        if have.get(name, 0) < amount:
            return False
    return True


def dominant_share(allocation: Mapping[str, int], total: Mapping[str, int]) -> float:
    """The largest share of any resource, on fixed-point amounts (the sorter's hot path)."""
    best = 0.0
    for name, amount in allocation.items():
        t = total.get(name)
        if t:
            s = amount / t
            if s > best:
                best = s
    return best


def _fmt(millis: int) -> str:
    whole, frac = divmod(millis, SCALE)
    return str(whole) if not frac else f"{whole}.{frac:03d}".rstrip("0")


EMPTY = Resources()
