"""The registry: what a master must not forget, kept where the next leader finds it.

As in Mesos: the slaves admitted (and by which principal), the frameworks with their
principals and failover timeouts, and the quotas set at run time; and, beyond Mesos's, the
last REMOVED_KEPT removed frameworks of each principal (whose, why, when), so that a new
leader refuses them as the old one did and shuts their tasks down on slaves that missed
it. Not tasks: those come back from the slaves' `Reregister`. A change that must survive
is written here before the master acknowledges it (`Subscribed`, `Registered`, a quota's
answer).

The registry sits on a `Store`, a durable map from string keys to msgpack-able values:
an append-only journal in the master's `--work-dir` for a lone master
(`JournalStore`), ZooKeeper for several (`master.ha.zookeeper.ZkStore`), memory for tests
and throwaway clusters (`MemoryStore`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from master.books import REMOVED_KEPT
from master.kept_by_principal import KeptByPrincipal
from protocol import logs
from protocol.journal import Journal
from protocol.wire.resources import Limit, Resources

log = logs.get("registry")


class RecordTooLarge(ValueError):
    """A record the store cannot keep: its node (or the bucket it shares) would be past
    the store's bound (ZooKeeper drops the connection of a request past its jute.maxbuffer,
    1 MB: a leader's term). Refused alone: nothing of it is written, the rest goes on."""

    def __init__(self, key: str, size: int, bound: int) -> None:
        super().__init__(
            f"the registry cannot keep {key[:240]!r}: its node would hold {size:,} bytes, "
            f"more than {bound:,}"
        )
        self.key, self.size, self.bound = key, size, bound


class Store(Protocol):
    async def load(self) -> dict[str, Any]: ...

    async def put(self, key: str, value: Any) -> None: ...

    async def drop(self, key: str) -> None: ...

    async def close(self) -> None: ...


class MemoryStore:
    """Forgets everything with the process: a master without --work-dir or --zk."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    async def load(self) -> dict[str, Any]:
        return dict(self.entries)

    async def put(self, key: str, value: Any) -> None:
        self.entries[key] = value

    async def drop(self, key: str) -> None:
        self.entries.pop(key, None)

    async def close(self) -> None:
        pass


class JournalStore:
    """The lone master's registry: `registry.journal` in its work dir (see protocol.journal)."""

    def __init__(self, work_dir: Path) -> None:
        self.journal = Journal(work_dir / "registry.journal")

    async def load(self) -> dict[str, Any]:
        return dict(self.journal.items())

    async def put(self, key: str, value: Any) -> None:
        await self.journal.put(key, value)

    async def drop(self, key: str) -> None:
        await self.journal.drop(key)

    async def close(self) -> None:
        await self.journal.close()


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class SlaveRecord(_Record):
    principal: str = Field(min_length=1)
    hostname: str = ""


class FrameworkRecord(_Record):
    principal: str = Field(min_length=1)
    name: str = ""
    role: str = "*"  # (its weight is the role's: an entry written with one has it ignored)
    roles: list[str] | None = None  # a multi-role framework's (MULTI_ROLE)
    failover_timeout: float = Field(default=0.0, ge=0)


class RemovedRecord(_Record):
    """A framework removed (torn down, or past its failover timeout)."""

    principal: str = ""
    why: str = ""
    at: float = 0.0  # wall clock: the oldest are forgotten first
    # its role (a multi-role one's roles): a slave back after a failover may name its
    # tasks, dying in them ("": not known, an entry written before it was kept)
    role: str = ""
    roles: list[str] | None = None


class QuotaRecord(_Record):
    guarantee: Resources = Field(default_factory=Resources)
    limit: Limit | None = None


class WeightRecord(_Record):
    weight: float = Field(gt=0)


class MaintenanceRecord(_Record):
    """A slave an operator deactivated, or is draining (master.books.Maintenance)."""

    drain: str | None = None  # DRAINING, DRAINED, or None (deactivated only)
    max_grace_period: float | None = Field(default=None, ge=0)
    mark_gone: bool = False


KINDS: dict[str, type[_Record]] = {
    "slave": SlaveRecord,
    "maintenance": MaintenanceRecord,
    "framework": FrameworkRecord,
    "removed": RemovedRecord,
    "quota": QuotaRecord,
    "weight": WeightRecord,
}


class Registry:
    """Typed records over a store; each write returns once the store has it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.slaves: dict[str, SlaveRecord] = {}
        self.frameworks: dict[str, FrameworkRecord] = {}
        self.removed: dict[str, RemovedRecord] = {}  # oldest first, once loaded
        self._removed_order = KeptByPrincipal()  # each principal's, oldest first
        self.quotas: dict[str, QuotaRecord] = {}
        self.weights: dict[str, WeightRecord] = {}  # set by operators at run time
        self.maintenance: dict[str, MaintenanceRecord] = {}  # deactivated or draining
        self._tables: dict[str, dict[str, Any]] = {
            "slave": self.slaves,
            "maintenance": self.maintenance,
            "framework": self.frameworks,
            "removed": self.removed,
            "quota": self.quotas,
            "weight": self.weights,
        }

    async def load(self) -> None:
        """Read everything; an entry that does not parse is logged and left out."""
        for key, value in (await self.store.load()).items():
            kind, _, name = key.partition("/")
            model = KINDS.get(kind)
            if model is None or not name:
                continue
            try:
                self._tables[kind][name] = model.model_validate(value)
            except ValidationError as e:
                log.error("registry.bad_entry", key=key, error=str(e).splitlines()[0])
        by_age = sorted(self.removed.items(), key=lambda item: item[1].at)
        self.removed.clear()
        past_bound: list[str] = []  # (a leader lost mid-removal leaves one too many)
        for framework_id, removal in by_age:
            self.removed[framework_id] = removal
            past_bound += self._removed_order.add(removal.principal, framework_id, REMOVED_KEPT)
        for oldest in past_bound:
            self.removed.pop(oldest, None)
            await self.store.drop(f"removed/{oldest}")
        log.info(
            "registry.loaded",
            slaves=len(self.slaves),
            frameworks=len(self.frameworks),
            removed=len(self.removed),
            quotas=len(self.quotas),
            weights=len(self.weights),
            maintenance=len(self.maintenance),
        )

    async def _put(self, kind: str, name: str, record: _Record) -> None:
        if self._tables[kind].get(name) == record:
            return  # unchanged: nothing to wait for
        await self.store.put(f"{kind}/{name}", record.model_dump(mode="json"))
        self._tables[kind][name] = record

    async def _drop(self, kind: str, name: str) -> None:
        if name in self._tables[kind]:
            await self.store.drop(f"{kind}/{name}")
            self._tables[kind].pop(name, None)

    async def admit_slave(self, slave_id: str, principal: str, hostname: str) -> None:
        await self._put("slave", slave_id, SlaveRecord(principal=principal, hostname=hostname))

    def has_slave(self, slave_id: str, principal: str, hostname: str) -> bool:
        """Whether the slave is recorded so already (admitting it again writes nothing)."""
        # (compared field by field: every re-registration asks, 100,000 after a failover)
        kept = self.slaves.get(slave_id)
        return kept is not None and kept.principal == principal and kept.hostname == hostname

    async def remove_slave(self, slave_id: str) -> None:
        await self._drop("slave", slave_id)

    async def set_maintenance(self, slave_id: str, record: MaintenanceRecord) -> None:
        await self._put("maintenance", slave_id, record)

    async def end_maintenance(self, slave_id: str) -> None:
        await self._drop("maintenance", slave_id)

    async def add_framework(self, framework_id: str, record: FrameworkRecord) -> None:
        await self._put("framework", framework_id, record)

    async def remove_framework(
        self,
        framework_id: str,
        principal: str,
        why: str,
        role: str = "",
        roles: list[str] | None = None,
    ) -> None:
        """Its removal first, then its record (a leader lost between the two leaves both,
        and the removal stands); the principal's oldest removals past REMOVED_KEPT are
        forgotten."""
        newest = next(reversed(self.removed.values()), None)  # (after it, on any clock)
        at = max(time.time(), newest.at + 1e-6 if newest is not None else 0.0)
        record = RemovedRecord(principal=principal, why=why, at=at, role=role, roles=roles)
        await self._put("removed", framework_id, record)
        await self._drop("framework", framework_id)
        forget = self._removed_order.add(principal, framework_id, REMOVED_KEPT)
        for oldest in forget:  # (all out first: a removal beside it trims its own)
            self.removed.pop(oldest, None)
        for oldest in forget:
            await self.store.drop(f"removed/{oldest}")

    async def set_quotas(self, quotas: dict[str, tuple[Resources, Limit | None]]) -> None:
        """Roles' quotas (guarantee, limit), all or none: see `_put_all`."""
        records = {
            role: QuotaRecord(guarantee=guarantee, limit=limit)
            for role, (guarantee, limit) in quotas.items()
        }
        await self._put_all("quota", records)

    async def set_weights(self, weights: dict[str, float]) -> None:
        """Roles' weights, all or none: see `_put_all`."""
        await self._put_all("weight", {r: WeightRecord(weight=w) for r, w in weights.items()})

    async def _put_all(self, kind: str, records: Mapping[str, _Record]) -> None:
        """Several records of a kind, one at a time; if one is refused, those written
        before it are put back as they were (best effort: a store that refuses one may
        refuse those too, and then its error is logged and the first one raised), so
        that a new leader does not read half of an operator's call that was refused."""
        table = self._tables[kind]
        before = {name: table.get(name) for name in records}
        written: list[str] = []
        try:
            for name, record in records.items():
                await self._put(kind, name, record)
                written.append(name)
        except Exception:
            for name in reversed(written):
                old = before[name]
                try:
                    if old is None:
                        await self._drop(kind, name)
                    else:
                        await self._put(kind, name, old)
                except Exception as e:
                    log.error("registry.undo_failed", key=f"{kind}/{name}", error=repr(e))
            raise

    async def close(self) -> None:
        await self.store.close()
