"""Who is asking the master's HTTP side: HTTP Basic against the credentials store.

A secret not seen before is checked by the store's PBKDF2 (10,000 rounds of SHA-512,
some 10 ms of a core, on purpose), off the event loop. What anybody can send must not
queue everybody's checks: a wrong guess costs its sender, not the others.

- The same header asked again while its check runs waits for that check (one hash); a
  header found wrong is refused without hashing for REFUSED_SECONDS, one found right is
  let in for CACHE_SECONDS (until the store changes).
- One check at a time per name and client address: a request for a name whose check
  from that address is under way is
  answered 429 with Retry-After at once, without hashing. So a flood of guesses at one
  name holds one check an address, and a principal's own check, from an address of its
  own, waits at most for one check of each other name and address -- never 429 for
  somebody else's guesses at its name.
- At most CHECKS_FROM_ONE_PEER checks under way from one address, and CHECKS_AT_ONCE in
  all past each address's first (429 past either): addresses guessing at many names
  keep no other address from its first check. HASHING_AT_ONCE of them
  hashing (threads of the loop's default executor, so that its other users -- the
  registry's ZooKeeper calls, file reads -- are never all behind hashes).
- The store is looked at twice a second, never behind a check: a check reads the hashes
  as they were when it began, and a check begun before the store changed is not
  remembered after.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from protocol.tooling.credentials import (
    CredentialsError,
    load_principals,
    read_passwd,
    verify_secret,
)
from protocol.tooling.remembered import Remembered

CACHE_SECONDS = 3600.0  # a checked password is trusted this long (hashing is slow on purpose)
# ... unless the store changed: looked at this often (a principal removed is refused
# within it, its cached checks dropped)
LOOK_EVERY = 0.5
REFUSED_SECONDS = 5.0  # a header found wrong is refused this long without another hash
REFUSED_KEPT = 10_000  # such headers remembered at most (the oldest forgotten first)
HASHING_AT_ONCE = 2  # checks hashing at once (the machine's cores, at least)
CHECKS_AT_ONCE = 32  # checks hashing or waiting to hash, in all
CHECKS_FROM_ONE_PEER = 8  # ... from one client address
RETRY_AFTER = 1  # seconds a client refused for a check under way is told to wait


class TooManyChecks(web.HTTPTooManyRequests):
    """A check of this name (or too many in all) under way: ask again after Retry-After."""

    def __init__(self, why: str) -> None:
        super().__init__(
            text=json.dumps({"error": why}),
            content_type="application/json",
            headers={"Retry-After": str(RETRY_AFTER)},
        )


@dataclass(frozen=True)
class _Store:
    stamp: tuple[int, int] | None
    hashes: Mapping[str, tuple[str, str]]  # name: (its secret's hash, its kind)


class PrincipalAuth:
    """HTTP Basic against the store: operator principals, and framework principals (which
    may read only their own tasks' files). See the module's docstring for what a check
    costs whom."""

    KINDS = ("operator", "framework")

    def __init__(self, store: Path) -> None:
        self.store = store
        self._known = _Store(None, {})
        self._generation = 0  # the store's reads that changed it, so far
        self._good: Remembered[Who] = Remembered()  # by header's digest: who it is
        self._bad: Remembered[bool] = Remembered(REFUSED_KEPT)  # ... refused
        self._checks: dict[bytes, asyncio.Task[Who | None]] = {}  # header's digest: its check
        # (name, client address) whose check is under way; checks by address
        self._names: set[tuple[str, str]] = set()
        self._peers: dict[str, int] = {}
        self._hashing = asyncio.Semaphore(HASHING_AT_ONCE)
        self._reloading = asyncio.Lock()  # (looks at the store: never held by a check)
        self._next_look = 0.0  # (monotonic) when to look at the store again
        self.refused_busy = 0  # requests answered 429 without a check, so far
        self.hashed = 0  # checks that hashed, so far

    def _stamp_now(self) -> tuple[int, int]:
        principals, passwd = self.store / "principals.json", self.store / "passwd"
        return principals.stat().st_mtime_ns, passwd.stat().st_mtime_ns

    def _read(self, known: _Store) -> _Store:
        """The store as it is now (`known` if unchanged). In a thread."""
        stamp = self._stamp_now()
        if stamp == known.stamp:
            return known
        principals, passwd = self.store / "principals.json", self.store / "passwd"
        kinds = {n: p.kind for n, p in load_principals(principals).items()}
        hashes = {
            n: (h, kinds[n]) for n, h in read_passwd(passwd).items() if kinds.get(n) in self.KINDS
        }
        return _Store(stamp, hashes)

    async def principal(self, header: str | None, peer: str | None = None) -> Who | None:
        """Who sent `header` (None: nobody we know) from the client address `peer`;
        TooManyChecks (429) when a check of its name from there is under way already, or
        too many from there or in all."""
        if not header or not header.startswith("Basic "):
            return None
        key = hashlib.sha256(header.encode()).digest()
        now = time.monotonic()
        if now >= self._next_look or self._known.stamp is None:  # (the first: waited for)
            self._next_look = now + LOOK_EVERY
            await self._reload()
        known = self._good.get(key, now)
        if known is not None:
            return known
        if self._bad.get(key, now):
            return None
        running = self._checks.get(key)
        if running is not None:  # the same header, asked again meanwhile: the same check
            return await asyncio.shield(running)
        try:
            user, _, secret = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        store = self._known
        # (a name not in the store has its own turn too: else a guess at a name answered
        # 429 beside a guess at a surely unknown one would say it is not a principal)
        where = (user, peer or "")
        if where in self._names:
            why = "a check of this principal's credentials is under way: ask again shortly"
        elif self._peers.get(where[1], 0) >= CHECKS_FROM_ONE_PEER:
            why = "too many credentials checks from this address: ask again shortly"
        elif len(self._checks) >= CHECKS_AT_ONCE and where[1] in self._peers:
            # (an address's first check is let in past it: a few addresses' guesses must
            # not turn everybody else away)
            why = "too many credentials checks under way: ask again shortly"
        else:
            check = asyncio.ensure_future(self._check(key, where, user, secret, store))
            self._checks[key] = check
            self._names.add(where)
            self._peers[where[1]] = self._peers.get(where[1], 0) + 1
            return await asyncio.shield(check)  # (a request gone away leaves it to finish)
        self.refused_busy += 1
        raise TooManyChecks(why)

    async def _check(
        self, key: bytes, where: tuple[str, str], user: str, secret: str, store: _Store
    ) -> Who | None:
        try:
            generation = self._generation
            # a name not in the store is hashed too (against another's hash), so that how
            # long a refusal takes does not tell which names are principals
            hashed, kind = store.hashes.get(user) or next(iter(store.hashes.values()), ("", ""))
            ok = False
            if hashed:  # (an empty store: nothing to hash against)
                async with self._hashing:
                    self.hashed += 1
                    ok = await asyncio.to_thread(verify_secret, secret, hashed)
            # (the store may have changed meanwhile: right only if its hash is still this)
            known = user in store.hashes
            if not ok or not known or self._known.hashes.get(user) != (hashed, kind):
                if generation == self._generation:  # (else it may be right by now)
                    self._refuse(key)
                return None
            who = Who(user, kind)
            self._good.put(key, who, CACHE_SECONDS)
            return who
        finally:
            self._names.discard(where)
            del self._checks[key]
            if left := self._peers[where[1]] - 1:
                self._peers[where[1]] = left
            else:
                del self._peers[where[1]]

    def _refuse(self, key: bytes) -> None:
        """Remember a wrong header for REFUSED_SECONDS (at most REFUSED_KEPT of them)."""
        self._bad.put(key, True, REFUSED_SECONDS)

    async def _reload(self) -> None:
        """Re-read the store if it changed (off the loop), dropping every cached check:
        a principal removed (`drfmesos auth remove`) is asked for its secret again, and
        refused; a header refused before may be right now."""
        looking = self._reloading.locked()  # (a look under way: this one would see the same)
        if looking and self._known.stamp is not None:
            return
        async with self._reloading:  # (the first look, waited for by the first requests)
            if looking and self._known.stamp is not None:
                return
            try:
                store = await asyncio.to_thread(self._read, self._known)
            except (OSError, CredentialsError):
                self._good.clear()  # (no store to check against: nothing cached stands)
                return
            if store is not self._known:
                self._known = store
                self._generation += 1
                self._good.clear()
                self._bad.clear()


@dataclass(frozen=True)
class Who:
    principal: str
    kind: str  # "operator" or "framework"
