"""Role names, as every party checks them: '/'-separated paths of names of 1-64 letters,
digits, '_', '.' and '-', none of them '.' or '..' (a role is a directory's name on a
slave, and a path in the role tree). `*`, Mesos's default role, is a role of its own
where a caller allows it (a framework's; never a reservation's)."""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def role_problem(role: str) -> str | None:
    """Why `role` is not a role name (None if it is)."""
    parts = role.split("/")
    if not all(_NAME.fullmatch(part) for part in parts):
        return f"role {role!r}: '/'-separated names of 1-64 letters, digits, '_', '.', '-'"
    if any(part in (".", "..") for part in parts):
        return f"role {role!r}: '/'-separated names, not '.' or '..'"
    return None
