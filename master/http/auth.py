"""Who is asking the master's HTTP side: HTTP Basic against the credentials store."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from protocol.tooling.credentials import (
    CredentialsError,
    load_principals,
    read_passwd,
    verify_secret,
)

CACHE_SECONDS = 60.0  # a checked password is trusted this long (hashing is slow on purpose)
# ... unless the store changed: looked at this often (a principal removed is refused
# within it, its cached checks dropped)
LOOK_EVERY = 0.5


class PrincipalAuth:
    """HTTP Basic against the store: operator principals, and framework principals (which
    may read only their own tasks' files). A successful check is remembered (by a digest
    of the header) for a minute, or until the store changes (looked at twice a second:
    a removed principal is refused at once); checks run one at a time in a thread, so
    guessing cannot starve the master."""

    KINDS = ("operator", "framework")

    def __init__(self, store: Path) -> None:
        self.store = store
        self._stamp: tuple[int, int] | None = None
        self._hashes: dict[str, tuple[str, str]] = {}  # name: (its secret's hash, its kind)
        self._good: dict[bytes, tuple[Who, float]] = {}
        self._lock = asyncio.Lock()
        self._next_look = 0.0  # (monotonic) when to look at the store again

    def _stamp_now(self) -> tuple[int, int]:
        principals, passwd = self.store / "principals.json", self.store / "passwd"
        return principals.stat().st_mtime_ns, passwd.stat().st_mtime_ns

    def _load(self) -> None:
        principals, passwd = self.store / "principals.json", self.store / "passwd"
        stamp = self._stamp_now()
        if stamp == self._stamp:
            return
        kinds = {n: p.kind for n, p in load_principals(principals).items()}
        self._hashes = {
            n: (h, kinds[n]) for n, h in read_passwd(passwd).items() if kinds.get(n) in self.KINDS
        }
        self._stamp = stamp
        self._good.clear()

    def _check(self, user: str, secret: str) -> str | None:
        """The principal's kind, if `secret` is its own."""
        self._load()
        known = self._hashes.get(user)
        return known[1] if known is not None and verify_secret(secret, known[0]) else None

    async def principal(self, header: str | None) -> Who | None:
        if not header or not header.startswith("Basic "):
            return None
        key = hashlib.sha256(header.encode()).digest()
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + LOOK_EVERY
            await self._reload()
        known = self._good.get(key)
        if known is not None and known[1] > now:
            return known[0]
        try:
            user, _, secret = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        async with self._lock:
            try:
                kind = await asyncio.to_thread(self._check, user, secret)
            except (OSError, CredentialsError):
                return None
        if kind is None:
            return None
        who = Who(user, kind)
        self._good[key] = (who, now + CACHE_SECONDS)
        return who

    async def _reload(self) -> None:
        """Re-read the store if it changed (off the loop), dropping every cached check:
        a principal removed (`drfmesos auth remove`) is asked for its secret again, and
        refused."""
        async with self._lock:
            try:
                if await asyncio.to_thread(self._stamp_now) != self._stamp:
                    await asyncio.to_thread(self._load)
            except (OSError, CredentialsError):
                self._good.clear()  # (no store to check against: nothing cached stands)


@dataclass(frozen=True)
class Who:
    principal: str
    kind: str  # "operator" or "framework"
