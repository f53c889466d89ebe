"""Whose a resource is, in Mesos's v1 JSON: `reservations` (the refined stack, Mesos 1.4+),
the pre-refinement `role` and `reservation` beside it for a single reservation (what
clients without RESERVATION_REFINEMENT read), a persistent volume's `disk`, and a shared
one's `"shared": {}` (Mesos's `Resource.SharedInfo`).

`identity_fields` gives the JSON of a resource identity (`cpus(team-a,alice)`);
`identity_of` reads one back from a Mesos resource object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocol.wire.reservations import (
    DYNAMIC,
    STATIC,
    Reservation,
    ReservationError,
    ResourceId,
    Volume,
    check_role,
    parse_key,
)

JSON = dict[str, Any]


def identity_fields(key: str) -> JSON:
    """The fields of a Mesos resource that say what it is and whose (all but its value)."""
    rid = parse_key(key)
    out: JSON = {"name": rid.base, "role": "*"}
    if rid.reservations:
        out["reservations"] = [_reservation_json(r) for r in rid.reservations]
        if len(rid.reservations) == 1:  # (the pre-refinement form, for older clients)
            only = rid.reservations[0]
            out["role"] = only.role
            if only.type == DYNAMIC:
                out["reservation"] = {
                    k: v for k, v in _reservation_json(only).items() if k in ("principal", "labels")
                }
    if rid.volume is not None:
        persistence: JSON = {"id": rid.volume.id}
        if rid.volume.principal:
            persistence["principal"] = rid.volume.principal
        out["disk"] = {
            "persistence": persistence,
            "volume": {"container_path": rid.volume.container_path, "mode": "RW"},
        }
        if rid.volume.shared:
            out["shared"] = {}
    return out


def _reservation_json(r: Reservation) -> JSON:
    out: JSON = {"type": r.type, "role": r.role}
    if r.principal:
        out["principal"] = r.principal
    if r.labels:
        out["labels"] = {"labels": [{"key": k, "value": v} for k, v in r.labels]}
    return out


def identity_of(item: Mapping[str, Any], name: str) -> str:
    """A Mesos resource object's identity as our key; ReservationError if it is not one."""
    stack: list[Reservation] = []
    refined = item.get("reservations")
    if refined:
        if not isinstance(refined, list):
            raise ReservationError(f"{name}: reservations is a list")
        stack = [_reservation_of(r, name) for r in refined]
    else:
        role = item.get("role")
        if role not in (None, "*"):
            legacy = item.get("reservation")
            if isinstance(legacy, Mapping):
                stack = [_reservation_of({**legacy, "type": DYNAMIC, "role": role}, name)]
            else:
                stack = [_reservation_of({"type": STATIC, "role": role}, name)]
    volume = None
    disk = item.get("disk")
    if isinstance(disk, Mapping) and isinstance(disk.get("persistence"), Mapping):
        vid = disk["persistence"].get("id")
        info = disk.get("volume") or {}
        if not isinstance(info, Mapping):
            raise ReservationError(f"{name}: disk.volume is an object with a container_path")
        path = info.get("container_path")
        if not isinstance(vid, str) or not isinstance(path, str):
            raise ReservationError(f"{name}: a volume needs persistence.id and container_path")
        volume = Volume(vid, path, shared=item.get("shared") is not None)
    elif item.get("shared") is not None:
        raise ReservationError(f"{name}: only a persistent volume may be shared")
    key = ResourceId(name, tuple(stack), volume).key()
    parse_key(key)  # (what we would not parse back, refused here)
    return key


def _reservation_of(obj: object, name: str) -> Reservation:
    if not isinstance(obj, Mapping):
        raise ReservationError(f"{name}: a reservation is an object")
    kind = obj.get("type", DYNAMIC if obj.get("principal") else STATIC)
    role = obj.get("role")
    if kind not in (STATIC, DYNAMIC) or not isinstance(role, str):
        raise ReservationError(f"{name}: a reservation has a type (STATIC or DYNAMIC) and a role")
    check_role(role, name)
    principal = obj.get("principal")
    if principal is not None and not isinstance(principal, str):
        raise ReservationError(f"{name}: reservation.principal is text")
    labels_obj = obj.get("labels") or {}
    listed = labels_obj.get("labels") or [] if isinstance(labels_obj, Mapping) else None
    if not isinstance(listed, list):
        raise ReservationError(f'{name}: reservation.labels is {{"labels": [{{key, value}}]}}')
    labels = tuple(
        (str(label.get("key", "")), str(label.get("value", "")))
        for label in listed
        if isinstance(label, Mapping)
    )
    if kind == STATIC:
        return Reservation(STATIC, role)
    return Reservation(DYNAMIC, role, principal or None, labels)
