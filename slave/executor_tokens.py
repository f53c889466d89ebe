"""Executor tokens: what an executor proves it is with, as Mesos's agent does with
`--authenticate_http_executors` (src/authentication/executor/jwt_secret_generator.cpp).

The slave gives each executor a JWT (HS256) naming its framework and executor ids, signed
with the slave's key, in `MESOS_EXECUTOR_AUTHENTICATION_TOKEN`. The key is the
operator's (`--executor-secret-key FILE`, as Mesos's `--executor_secret_key`) or one the
slave makes once and keeps in its work dir, readable by it alone. Only the slave checks a
token: the key never leaves it (an executor holding it could sign any other's).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import jwt

KEY_FILE = "executor_secret_key"
KEY_BYTES = 32  # as HS256's hash is long
ALGORITHM = "HS256"
MAX_TOKEN = 4096  # characters: ours are some 200


class TokenError(ValueError):
    """Not a token of this slave's."""


def load_or_make_key(work_dir: Path, given: Path | None) -> bytes:
    """The operator's key file, or the slave's own (made 0600 on first start). (Blocking:
    call it in a thread.)"""
    if given is not None:
        key = given.read_bytes().strip()
        if len(key) < KEY_BYTES:
            raise ValueError(f"--executor-secret-key {given}: {KEY_BYTES} bytes at least")
        return key
    path = work_dir / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    work_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:  # (made meanwhile: another start of this work dir's)
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


class ExecutorTokens:
    """Tokens bound to (framework id, executor id), signed and checked with one key."""

    def __init__(self, key: bytes, slave_id: str) -> None:
        self._key, self.slave_id = key, slave_id

    def issue(self, framework_id: str, executor_id: str) -> str:
        claims = {"fid": framework_id, "eid": executor_id, "sid": self.slave_id}
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def holder(self, token: str) -> tuple[str, str]:
        """(framework id, executor id) the token was issued to; TokenError if it is not
        one of this slave's (forged, altered, another slave's, or no JWT at all)."""
        if len(token) > MAX_TOKEN:
            raise TokenError("token too long")
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                options={"require": ["fid", "eid", "sid"]},
            )
        except jwt.PyJWTError as e:
            raise TokenError(str(e)) from None
        fid, eid = claims["fid"], claims["eid"]
        if claims["sid"] != self.slave_id or not isinstance(fid, str) or not isinstance(eid, str):
            raise TokenError("not this slave's")
        return fid, eid
