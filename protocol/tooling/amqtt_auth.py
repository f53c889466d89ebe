"""The embedded broker's side of a credentials store: amqtt auth and topic-check plugins.

They read the same files mosquitto does (`passwd`, `principals.json`) and apply the same
rules (`credentials.acl_rules`), re-reading them when they change (as mosquitto does on
SIGHUP), so `drfmesos auth add` takes effect without a restart.

A client's id must be its username, or its username, `~` and anything (one principal
holds many connections: `protocol.transport.mqtt_client.connection_id`); a client whose
id is another's, or that fails to authenticate, gets a throwaway client id first, so
that it cannot take over anybody's session.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from protocol.tooling.credentials import (
    CredentialsError,
    acl_rules,
    filter_allows,
    load_principals,
    read_passwd,
    verify_secret,
)

RELOAD_EVERY = 1.0  # seconds between looks at the files' modification times


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
        self._passwd = _Watched(Path(self.config.store) / "passwd", read_passwd)

    async def authenticate(self, *, session: Any) -> bool | None:
        username, secret = session.username, session.password
        hashed = self._passwd.get().get(username) if username else None
        ok = bool(hashed and secret and verify_secret(str(secret), hashed))
        if not ok or not _id_of(session.client_id, username):
            session.client_id = f"refused-{uuid.uuid4().hex}"
            return False
        return True


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

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Action | None = None
    ) -> bool | None:
        if session is None or topic is None or action is None:
            return False
        rules = self._rules.get().get(session.username)
        if rules is None:
            return False
        allowed = rules["write"] if action == Action.PUBLISH else rules["read"]
        return any(filter_allows(pattern, topic) for pattern in allowed)
