"""Whose a resource is: reservations (and the persistent volumes made on reserved disk).

A `Resources` maps a resource's *identity* to an amount, as Mesos's `Resources` merges only
resources whose identity (name, reservations, disk) is equal. Unreserved cpus are `cpus`;
cpus reserved for `team-a` are another identity, keyed in Mesos's text form:

    cpus(team-a)                       static (the slave's --resources)
    cpus(team-a,alice)                 dynamic, reserved by principal alice
    cpus(team-a,alice,{owner=ops})     ... with labels
    cpus(eng)(eng/web,alice)           refined: a stack, the last reservation is the role
    disk(team-a,alice)[vol-1:data]     a persistent volume (id, container path) on it
    disk(team-a,alice)[vol-1:data]<SHARED>  ... shared: several tasks use it at once

The allocation policy reads a key's `role` (who may be offered it) and `base` (what it is:
DRF shares and the cluster total count reserved cpus as cpus); the shell reads the rest.
Parsing is cached: a key is parsed once per process however often it is offered.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from protocol.wire.roles import role_problem

STATIC = "STATIC"
DYNAMIC = "DYNAMIC"

MAX_KEY = 1024
"""The longest identity a resource may have (a name of 64, reservations, a volume)."""

_WORD = re.compile(r"[A-Za-z0-9_.\-/@+=~*]+")  # role, principal, label key or value
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")  # a volume's id, a part of its container path
_FORBIDDEN_ROLES = {".", ".."}


class ReservationError(ValueError):
    """A resource identity that cannot be parsed, or an operation it does not allow."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """One reservation of a stack (Mesos's `Resource.ReservationInfo`)."""

    type: str  # STATIC or DYNAMIC
    role: str
    principal: str | None = None  # who reserved it (dynamic); None: nobody said
    labels: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        if self.type == STATIC:
            return f"({self.role})"
        parts = [self.role, self.principal or ""]
        if self.labels:
            parts.append("{" + ",".join(f"{k}={v}" for k, v in self.labels) + "}")
        return "(" + ",".join(parts) + ")"


@dataclass(frozen=True, slots=True)
class Volume:
    """A persistent volume on reserved disk (Mesos's `DiskInfo.persistence` and `volume`)."""

    id: str
    container_path: str
    principal: str | None = None  # who created it (kept for the operator's views)
    # Mesos's `Resource.shared`: offered even while tasks use it, to frameworks with the
    # SHARED_RESOURCES capability, and used by several tasks at once
    shared: bool = False


@dataclass(frozen=True, slots=True)
class ResourceId:
    """A resource's identity: what it is, whose, and (disk) which volume."""

    base: str
    reservations: tuple[Reservation, ...] = ()
    volume: Volume | None = None

    @property
    def role(self) -> str | None:
        """The role it is reserved for (the last of the stack); None: unreserved."""
        return self.reservations[-1].role if self.reservations else None

    def key(self) -> str:
        vol = ""
        if self.volume:
            vol = f"[{self.volume.id}:{self.volume.container_path}]"
            vol += SHARED_MARK if self.volume.shared else ""
        return self.base + "".join(r.text() for r in self.reservations) + vol

    def pushed(self, reservation: Reservation) -> ResourceId:
        """Reserved (or refined) one level further."""
        return ResourceId(self.base, (*self.reservations, reservation), self.volume)

    def popped(self) -> ResourceId:
        """One reservation less (Mesos's UNRESERVE pops the last of the stack)."""
        if not self.reservations:
            raise ReservationError(f"{self.key()} is not reserved")
        return ResourceId(self.base, self.reservations[:-1], self.volume)

    def with_volume(self, volume: Volume | None) -> ResourceId:
        return ResourceId(self.base, self.reservations, volume)


SHARED_MARK = "<SHARED>"  # (Mesos's text form of a shared resource)


_SHARED_END = "]" + SHARED_MARK


def is_shared(key: str) -> bool:
    """A shared persistent volume. No parse: a key with a '[' was parsed on arrival, and
    only a volume's ends so; a plain name (a custom resource, `lic<SHARED>` or
    `lic]<SHARED>`) has no '[' and is never one -- only a persistent volume is shared."""
    return key.endswith(_SHARED_END) and "[" in key


def shared_keys(millis: Mapping[str, int]) -> frozenset[str]:
    """The shared volumes among these."""
    return frozenset(filter(is_shared, millis))


def shared_once(used: Mapping[str, int], total: Mapping[str, int]) -> dict[str, int]:
    """What tasks use of a slave of `total`, each shared volume counted once however
    many use it (as Mesos counts a slave's resources used)."""
    out = dict(used)
    for key, amount in used.items():
        if key in total and is_shared(key):
            out[key] = min(amount, total[key])
    return out


def partial_copy(need: Mapping[str, int], total: Mapping[str, int]) -> str | None:
    """A shared volume of a slave of `total` that `need` (one task's, or an executor's)
    holds other than one whole copy of, or None: a task holds one copy, the volume."""
    for key, amount in need.items():
        if is_shared(key) and amount != total.get(key):
            return key
    return None


def is_plain(key: str) -> bool:
    """An unreserved resource with no volume (the usual kind: no parse)."""
    return "(" not in key and "[" not in key


@lru_cache(maxsize=65536)
def parse_key(key: str) -> ResourceId:
    """A key's identity; ReservationError if it is not one."""
    if is_plain(key):
        return ResourceId(key)
    text = key.strip()
    i = min(p for p in (text.find("("), text.find("[")) if p >= 0)
    base = text[:i].strip()
    if not base:
        raise ReservationError(f"resource {key!r}: no name before its reservation")
    rest = text[i:]
    stack: list[Reservation] = []
    while rest.startswith("("):
        end = rest.find(")")
        if end < 0:
            raise ReservationError(f"resource {key!r}: unclosed '('")
        stack.append(_reservation(rest[1:end], key))
        rest = rest[end + 1 :].lstrip()
    volume = None
    if rest.startswith("["):
        end = rest.find("]")
        tail = rest[end + 1 :].strip() if end >= 0 else ""
        if end < 0 or tail not in ("", SHARED_MARK):
            raise ReservationError(
                f"resource {key!r}: a volume is '[id:path]' (then '{SHARED_MARK}' if shared), last"
            )
        vid, sep, path = (p.strip() for p in rest[1:end].partition(":"))
        if not sep or not _volume_name(vid) or not all(map(_volume_name, path.split("/"))):
            raise ReservationError(
                f"resource {key!r}: a volume is '[id:path]', the path relative to the "
                "sandbox, of names of letters, digits, '_', '.' and '-' (not '.' or '..')"
            )
        volume = Volume(vid, path, shared=bool(tail))
        rest = ""
    if rest:
        raise ReservationError(f"resource {key!r}: unexpected {rest!r}")
    return ResourceId(base, tuple(stack), volume)


def _volume_name(name: str) -> bool:
    """A volume's id, or a part of its path in the sandbox: a plain file name."""
    return bool(_NAME.fullmatch(name)) and name not in _FORBIDDEN_ROLES and len(name) <= 100


def _reservation(inner: str, key: str) -> Reservation:
    labels: tuple[tuple[str, str], ...] = ()
    if "{" in inner:
        inner, _, tail = inner.partition("{")
        if not tail.endswith("}"):
            raise ReservationError(f"resource {key!r}: labels are '{{k=v,...}}', last")
        labels = tuple(_label(p, key) for p in tail[:-1].split(",") if p.strip())
        inner = inner.rstrip().rstrip(",")
    parts = [p.strip() for p in inner.split(",")]
    role = parts[0]
    check_role(role, key)
    if len(parts) == 1 and not labels:
        return Reservation(STATIC, role)
    if len(parts) > 2:
        raise ReservationError(f"resource {key!r}: a reservation is (role[,principal])")
    principal = parts[1] if len(parts) > 1 and parts[1] else None
    if principal is not None and not _WORD.fullmatch(principal):
        raise ReservationError(f"resource {key!r}: principal {principal!r} has odd characters")
    return Reservation(DYNAMIC, role, principal, labels)


def _label(text: str, key: str) -> tuple[str, str]:
    k, sep, v = text.strip().partition("=")
    if not sep or not _WORD.fullmatch(k) or (v and not _WORD.fullmatch(v)):
        raise ReservationError(f"resource {key!r}: a label is key=value, got {text!r}")
    return k, v


def check_role(role: str, where: str = "") -> None:
    """A role a reservation may name (not `*`: that is everybody's)."""
    if role == "*" or role_problem(role):  # (one a framework may be in, but everybody's)
        raise ReservationError(f"resource {where!r}: {role!r} is not a role to reserve for")


def base_of(key: str) -> str:
    """What a resource is, whoever's: `cpus(team-a)` is cpus."""
    base = _BASES.get(key)
    if base is None:
        if len(_BASES) >= _MAX_BASES:
            _BASES.clear()
        base = _BASES[key] = key if is_plain(key) else parse_key(key).base
    return base


_BASES: dict[str, str] = {}  # a key's base, by key: a round strips each offer's keys 4 times
_MAX_BASES = 1 << 16  # (keys come from slaves and operations: bounded, cleared when full)


def role_of(key: str) -> str | None:
    """The role a resource is reserved for; None: unreserved."""
    return None if is_plain(key) else parse_key(key).role


def any_reserved(millis: Mapping[str, int]) -> bool:
    """Whether any of these is reserved or a volume."""
    for key in millis:  # noqa: SIM110 (a plain loop: asked of every slave's total)
        if not is_plain(key):
            return True
    return False


def partial_volume(need: Mapping[str, int], whole: Mapping[str, int]) -> str | None:
    """A persistent volume `need` asks for only part of (`whole`: what there is of each),
    or None: a volume is one directory, used whole or not at all, as in Mesos."""
    for key, amount in need.items():
        if not is_plain(key) and amount < whole.get(key, 0) and parse_key(key).volume:
            return key
    return None


def stripped(millis: Mapping[str, int]) -> dict[str, int]:
    """The amounts by what they are, whoever's (Mesos's stripped scalar quantities)."""
    out: dict[str, int] = {}
    bases = _BASES
    for key, amount in millis.items():
        base = bases.get(key) or base_of(key)
        out[base] = out.get(base, 0) + amount
    return out


def offered_to(key_role: str, framework_role: str) -> bool:
    """Whether resources reserved for `key_role` may be offered to a framework of
    `framework_role`: that role, or one below it (Mesos's hierarchical reservations)."""
    return framework_role == key_role or framework_role.startswith(key_role + "/")


# -- offer operations -----------------------------------------------------------------------

RESERVE = "RESERVE"
UNRESERVE = "UNRESERVE"
CREATE = "CREATE"
DESTROY = "DESTROY"
GROW_VOLUME = "GROW_VOLUME"
SHRINK_VOLUME = "SHRINK_VOLUME"
OPERATIONS = (RESERVE, UNRESERVE, CREATE, DESTROY, GROW_VOLUME, SHRINK_VOLUME)
NON_SPECULATIVE = (GROW_VOLUME, SHRINK_VOLUME)
"""Operations whose result no launch of the same Accept may use: it is offered again
later (Mesos applies them on the agent first; ours, so that a framework cannot tell)."""


def conversion(
    kind: str,
    keys: Mapping[str, int],
    *,
    addition: Mapping[str, int] | None = None,
    subtract: int | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """What an operation consumes and what it makes of it, as Mesos's
    `getResourceConversions`: RESERVE names the resources as they will be (each one
    reservation more), UNRESERVE as they are (each loses its last), CREATE the volumes to
    make on disk, DESTROY the volumes to end; GROW_VOLUME and SHRINK_VOLUME the volume as
    it is, with the disk to add (`addition`) or the amount to take (`subtract`, millis).
    ReservationError if one cannot be."""
    if kind in NON_SPECULATIVE:
        return _resized(kind, keys, addition, subtract)
    if addition is not None or subtract is not None:
        raise ReservationError(f"{kind}: addition and subtract are for resizing a volume")
    consumed: dict[str, int] = {}
    converted: dict[str, int] = {}
    for key, amount in keys.items():
        rid = parse_key(key)
        if kind == RESERVE:
            if not rid.reservations or rid.reservations[-1].type != DYNAMIC or rid.volume:
                raise ReservationError(
                    f"RESERVE {key}: a dynamic reservation for a role, NAME(ROLE), and no volume"
                )
            source = rid.popped()
            # (a strict sub-role, as Mesos: the same role again would stack on its
            # reservation, which its owner could then not unreserve)
            if source.reservations and (
                rid.role == source.role or not offered_to(source.role or "", rid.role or "")
            ):
                raise ReservationError(f"RESERVE {key}: a refinement goes to a sub-role")
        elif kind == UNRESERVE:
            if rid.volume:
                raise ReservationError(f"UNRESERVE {key}: a volume (DESTROY it first)")
            if not rid.reservations or rid.reservations[-1].type != DYNAMIC:
                raise ReservationError(
                    f"UNRESERVE {key}: not a dynamic reservation; name one with the "
                    "principal that made it, as the slave's state shows it: "
                    "NAME(ROLE,PRINCIPAL) (a static one, of its --resources, stays)"
                )
            source = rid.popped()
        elif kind == CREATE:
            if rid.base != "disk" or rid.volume is None or not rid.reservations:
                raise ReservationError(f"CREATE {key}: a volume on reserved disk")
            source = rid.with_volume(None)
        elif kind == DESTROY:
            if rid.volume is None:
                raise ReservationError(f"DESTROY {key}: not a volume")
            source = rid.with_volume(None)
        else:
            raise ReservationError(f"operation {kind}: one of {', '.join(OPERATIONS)}")
        before, after = (key, source.key()) if kind in (UNRESERVE, DESTROY) else (source.key(), key)
        consumed[before] = consumed.get(before, 0) + amount
        converted[after] = converted.get(after, 0) + amount
    return consumed, converted


def _resized(
    kind: str, keys: Mapping[str, int], addition: Mapping[str, int] | None, subtract: int | None
) -> tuple[dict[str, int], dict[str, int]]:
    """GROW_VOLUME: a volume and more disk of its own reservation make the bigger volume;
    SHRINK_VOLUME: a volume makes a smaller one and the disk it gave up, which stays
    reserved as it was (Mesos's `validate(GrowVolume)`, `validate(ShrinkVolume)`)."""
    if len(keys) != 1:
        raise ReservationError(f"{kind}: names one volume, not {len(keys)} resources")
    ((key, amount),) = keys.items()
    rid = parse_key(key)
    if rid.base != "disk" or rid.volume is None or not rid.reservations:
        raise ReservationError(f"{kind} {key}: not a persistent volume")
    if rid.volume.shared:  # (as Mesos: its tasks share one size)
        raise ReservationError(f"{kind} {key}: a shared volume is not resized")
    disk = rid.with_volume(None).key()
    if kind == GROW_VOLUME:
        if subtract is not None or not addition or set(addition) != {disk}:
            raise ReservationError(
                f"GROW_VOLUME {key}: its addition is disk of the volume's reservation ({disk})"
            )
        return {key: amount, disk: addition[disk]}, {key: amount + addition[disk]}
    if addition is not None or subtract is None or not 0 < subtract < amount:
        raise ReservationError(
            f"SHRINK_VOLUME {key}: subtract more than 0 and less than the volume's size"
        )
    return {key: amount}, {key: amount - subtract, disk: subtract}


def checkpointed(millis: Mapping[str, int]) -> dict[str, int]:
    """What a slave keeps across restarts of its total: the dynamically reserved resources
    and the volumes (the static ones are its --resources')."""
    out = {}
    for key, amount in millis.items():
        if not is_plain(key):
            rid = parse_key(key)
            if rid.volume or any(r.type == DYNAMIC for r in rid.reservations):
                out[key] = amount
    return out


def configured_source(key: str) -> str:
    """What of a slave's --resources a checkpointed resource was made of: itself without
    its dynamic reservations and volume."""
    rid = parse_key(key)
    static = tuple(r for r in rid.reservations if r.type == STATIC)
    return ResourceId(rid.base, static).key()


def configured_of(total: Mapping[str, int]) -> dict[str, int]:
    """A slave's --resources, from its total: what it checkpointed back as what it was
    made of (`with_checkpointed` undone)."""
    kept = checkpointed(total)
    out: dict[str, int] = {}
    for key, amount in total.items():
        source = configured_source(key) if key in kept else key
        out[source] = out.get(source, 0) + amount
    return out


def with_checkpointed(
    configured: Mapping[str, int], kept: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """A slave's total: its --resources with what it checkpointed made of them (the
    operations applied again after a restart), and what no longer fits them (dropped)."""
    total = dict(configured)
    dropped = {}
    for key, amount in kept.items():
        source = configured_source(key)
        if total.get(source, 0) >= amount:
            total[source] -= amount
            if not total[source]:
                del total[source]
            total[key] = total.get(key, 0) + amount
        else:
            dropped[key] = amount
    return total, dropped


def as_dynamic(millis: Mapping[str, int]) -> dict[str, int]:
    """Each resource's last reservation made dynamic, with no principal (the caller's is
    filled in): what a person means by `cpus(team-a):2` in `drfmesos reserve`."""
    out: dict[str, int] = {}
    for key, amount in millis.items():
        rid = parse_key(key)
        if rid.reservations and rid.reservations[-1].type == STATIC:
            last = rid.reservations[-1]
            rid = ResourceId(rid.base, (*rid.reservations[:-1], Reservation(DYNAMIC, last.role)))
        out[rid.key()] = out.get(rid.key(), 0) + amount
    return out


def by_role(millis: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """The resources by the role each is reserved for ("*": unreserved), keys kept."""
    out: dict[str, dict[str, int]] = {}
    for key, amount in millis.items():
        role = "*" if is_plain(key) else parse_key(key).role or "*"
        out.setdefault(role, {})[key] = amount
    return out
