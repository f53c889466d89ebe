"""The embedded broker's side of a credentials store: amqtt auth and topic-check plugins.

They read the same files mosquitto does (`passwd`, `principals.json`) and apply the same
rules (`credentials.acl_rules`), re-reading them when they change (as mosquitto does on
SIGHUP), so `drfmesos auth add` takes effect without a restart.

A client's id must be its username, or its username, `~` and anything (one principal
holds many connections: `protocol.transport.mqtt_client.connection_id`); a client whose
id is another's, or that fails to authenticate, gets a throwaway client id first, so
that it cannot take over anybody's session.

A secret is checked at CONNECT, and the connection is held to it: the first publish,
subscription or delivery of a connection whose principal's stored secret is no longer
the one its CONNECT was checked against (removed, or changed: `auth remove` and `auth
add` again) is refused and the connection ended, as mosquitto ends such a client's when
it re-reads its password file. A connection made with a leaked secret had gone on publishing as its
principal and reading its frameworks' events after the secret was replaced (attack88).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from protocol import logs
from protocol.tooling.credentials import (
    CredentialsError,
    acl_rules,
    filter_allows,
    load_principals,
    read_passwd,
    verify_secret,
)
from protocol.tooling.remembered import Remembered

log = logs.get("broker")
RELOAD_EVERY = 1.0  # seconds between looks at the files' modification times
# A secret is checked by PBKDF2 (some 10 ms of a core, on purpose): in a thread, never on
# the broker's loop (which every client's messages share), at most HASHING_AT_ONCE at a
# time; the same credentials asked again while their check runs share it, and their
# answer stands a while (the stored hash is part of what is remembered: a secret changed
# or removed is checked afresh), so a client's reconnects and a repeated wrong guess cost
# no hash; wrong answers are kept apart, so that a flood of them never pushes a right one
# out. The checks of one name from one address run one at a time, and at most
# WAITING_A_NAME wait (past it a CONNECT is refused unhashed): a flood of different
# guesses at one name queues behind that name and address, never ahead of another
# principal's connect, nor of the name's owner connecting from elsewhere.
HASHING_AT_ONCE = 2
WAITING_A_NAME = 16
TRUSTED_SECONDS = 3600.0  # a right secret, remembered (the stored hash is in its key)
REFUSED_SECONDS = 5.0  # a wrong one, remembered
REMEMBERED = 10_000  # answers kept at most (the oldest forgotten first)


CHECKED_AGAINST = "drfmesos_checked_against"  # a session's: the stored hash its CONNECT met


class _Watched:
    """A file's parsed contents, parsed again when its modification time changes."""

    def __init__(self, path: Path, parse: Any) -> None:
        self.path, self.parse = path, parse
        self.value: Any = parse(path)
        self._mtime = path.stat().st_mtime_ns
        self._checked = time.monotonic()

    def get(self) -> Any:
        now = time.monotonic()
        if now - self._checked >= RELOAD_EVERY:
            self._checked = now
            try:
                mtime = self.path.stat().st_mtime_ns
                if mtime != self._mtime:
                    self.value, self._mtime = self.parse(self.path), mtime
            except (OSError, CredentialsError):
                pass  # keep what we had: a half-written store must not lock everyone out
        return self.value


_PASSWD: dict[Path, _Watched] = {}  # (one for both plugins: they see a change at once)


def _passwd_of(store: str) -> _Watched:
    path = Path(store) / "passwd"
    watched = _PASSWD.get(path)
    if watched is None:
        watched = _PASSWD[path] = _Watched(path, read_passwd)
    return watched


def _read_rules(path: Path) -> dict[str, dict[str, list[str]]]:
    rules: dict[str, dict[str, list[str]]] = {}
    for name, principal in load_principals(path).items():
        by_access: dict[str, list[str]] = {"read": [], "write": []}
        for access, topic in acl_rules(principal):
            by_access[access].append(topic)
        rules[name] = by_access
    return rules


class StoreAuthPlugin(BaseAuthPlugin):  # type: ignore[misc]
    @dataclass
    class Config:
        store: str = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._passwd = _passwd_of(self.config.store)
        self._right: Remembered[bool] = Remembered(REMEMBERED)
        self._wrong: Remembered[bool] = Remembered(REMEMBERED)
        self._checks: dict[bytes, asyncio.Task[bool]] = {}
        self._hashing = asyncio.Semaphore(HASHING_AT_ONCE)
        # (name, address): its turn, its checks
        self._names: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def authenticate(self, *, session: Any) -> bool | None:
        username, secret = session.username, session.password
        passwd: dict[str, str] = self._passwd.get()
        hashed = passwd.get(username) if username else None
        where = (str(username), str(getattr(session, "remote_address", None) or ""))
        # a name not in the store is hashed too (against another's hash, and refused), so
        # that how long a refusal takes does not tell which names are principals
        decoy = next(iter(passwd.values()), None) if hashed is None else None
        against = hashed or decoy
        ok = bool(against and secret) and await self._verified(where, str(secret), str(against))
        ok = ok and hashed is not None
        if not ok or not _id_of(session.client_id, username):
            session.client_id = f"refused-{uuid.uuid4().hex}"
            return False
        setattr(session, CHECKED_AGAINST, hashed)
        return True

    async def _verified(self, where: tuple[str, str], secret: str, hashed: str) -> bool:
        """Whether `secret` is the one `hashed` stands for; `where`: (name, address)."""
        key = hashlib.sha256("\0".join((where[0], hashed, secret)).encode()).digest()
        now = time.monotonic()
        if self._right.get(key, now):
            return True
        if self._wrong.get(key, now):
            return False
        check = self._checks.get(key)
        if check is None:
            turn, waiting = self._names.get(where) or (asyncio.Lock(), 0)
            if waiting >= WAITING_A_NAME:
                return False  # (a flood of guesses at this name from there: refused, unhashed)
            self._names[where] = (turn, waiting + 1)
            check = asyncio.ensure_future(self._check(key, where, secret, hashed))
            self._checks[key] = check
        return await asyncio.shield(check)  # (a client gone away leaves it to finish)

    async def _check(self, key: bytes, where: tuple[str, str], secret: str, hashed: str) -> bool:
        turn = self._names[where][0]
        try:
            async with turn, self._hashing:  # (the name's turn first: then a thread)
                ok = await asyncio.to_thread(verify_secret, secret, hashed)
            if ok:
                self._right.put(key, True, TRUSTED_SECONDS)
            else:
                self._wrong.put(key, True, REFUSED_SECONDS)
            return ok
        finally:
            del self._checks[key]
            waiting = self._names[where][1] - 1
            if waiting:
                self._names[where] = (turn, waiting)
            else:
                del self._names[where]


def _id_of(client_id: str, username: str) -> bool:
    """Whether a client id is one the principal `username` may connect with."""
    return client_id == username or client_id.startswith(username + "~")


class StoreTopicPlugin(BaseTopicPlugin):  # type: ignore[misc]
    @dataclass
    class Config:
        store: str = ""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self._rules = _Watched(Path(self.config.store) / "principals.json", _read_rules)
        self._passwd = _passwd_of(self.config.store)

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Action | None = None
    ) -> bool | None:
        if session is None or topic is None or action is None:
            return False
        current = self._passwd.get().get(session.username)
        if current is None or getattr(session, CHECKED_AGAINST, None) != current:
            await self._end(session)  # (its secret was replaced, or removed, since)
            return False
        rules = self._rules.get().get(session.username)
        if rules is None:  # (its secret first: a principal removed has no rules either)
            return False
        allowed = rules["write"] if action == Action.PUBLISH else rules["read"]
        return any(filter_allows(pattern, topic) for pattern in allowed)

    async def _end(self, session: Any) -> None:
        """End the connection of a session whose secret is no longer the stored one, at
        its first message or delivery since, as mosquitto ends it when it re-reads its
        password file: its client hears it, and connecting again is refused (a party
        whose secret was replaced under it had gone on quietly refused in everything)."""
        live = self.context._broker_instance.sessions.get(session.client_id)
        if live is None or live[0] is not session or live[1] is None:
            return  # (ended already, or taken over)
        log.warning("broker.secret_replaced", principal=session.username)
        await live[1].handle_connection_closed()  # (the message loop's disconnect: it ends)
