"""Several masters, one leader: election, epochs and the registry in ZooKeeper (kazoo).

Under the `--zk` path (`zk://h1:2181,h2:2181/drfmesos`, one per cluster name):

    <path>/<cluster>/election/     kazoo's Lock recipe: the lowest sequential node leads
    <path>/<cluster>/epoch         the last term's epoch (only a leader writes it)
    <path>/<cluster>/registry/     one node per registry entry (see master.ha.registry),
                                   the slaves' in BUCKETS nodes of many (`buckets/slave/N`),
                                   the removals' in 64 (`buckets/removed/N`)

Access: given credentials (`zk://USER:PASSWORD@HOST:PORT/path`, as Mesos takes them), a
master authenticates with ZooKeeper's digest scheme and every node it makes under the
path is its credentials' alone (CREATOR_ALL), the registry and the election alike: a
tenant's task that reaches ZooKeeper can neither read the registry nor write, delete or
join the election. Only the MasterInfo nodes Mesos clients read (`--zk-mesos-path`) are
readable by anyone, as Mesos has them. Without credentials the nodes are open to anyone
who reaches ZooKeeper, as in Mesos.

Fencing: the leader's election node is ephemeral, so it is gone when its session
expires; every registry write is a transaction that first checks that node, so a
deposed leader cannot write. The leader steps down the moment its connection to
ZooKeeper is suspended, which is before the session can expire on the server (the client
gives up after two thirds of the session timeout), so it has stopped before a standby
can be elected. kazoo runs its own thread: every call here goes through
`asyncio.to_thread`, and its connection listener only hands events to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.parse
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
)
from kazoo.recipe.lock import Lock
from kazoo.security import (
    ACL,
    CREATOR_ALL_ACL,
    READ_ACL_UNSAFE,
    Permissions,
    make_digest_acl_credential,
)

from master.ha.leadership import LeadershipError, Term, next_epoch
from master.ha.registry import RecordTooLarge
from protocol import logs
from protocol.transport.aio import cancel_and_wait, within

log = logs.get("zookeeper")

CONNECT_TIMEOUT = 15.0  # seconds a first connection may take before it is tried afresh
MAX_BATCH = 500  # registry writes in one transaction (some 150 bytes each)
# ZooKeeper takes a request of at most its jute.maxbuffer (1 MB, 0xfffff bytes, unless its
# operator says more) and answers a longer one by dropping the client's connection: for a
# leader, the end of its term. What we send stays well under it: a node's data at most
# MAX_NODE_BYTES (a record that would put its node over is refused alone, RecordTooLarge),
# and a transaction's data, paths and framing at most MAX_TRANSACTION_BYTES (counted
# before a write joins it, never after).
MAX_NODE_BYTES = 512 * 1024  # (a bucket of 100,000 slaves' records is some 2.5 KB)
MAX_TRANSACTION_BYTES = 896 * 1024
OP_FRAMING = 64  # bytes of an op besides its path and data, at most (type, lengths, ACL)
# The slaves' records go in buckets, many to a node: a new leader reads 100,000 slaves'
# records as BUCKETS nodes, not as 100,000 (one read each took 14.8 s at 50,000, before
# it could announce itself). A slave's admission rewrites its bucket: some 25 records at
# 100,000 slaves, 2.5 KB.
# The frameworks' removals (10,000 kept at most, some 150 bytes each) go in buckets too.
BUCKETS = 4096
BUCKETED = {"slave/": BUCKETS, "removed/": 64}  # a key's kind: its buckets
NODES = ("election", "registry", "epoch")  # under a cluster's path (see above)


def bucket_of(key: str) -> str | None:
    """The bucket node's key that holds `key` (None: a node of its own)."""
    kind = key[: key.find("/") + 1]
    buckets = BUCKETED.get(kind)
    if buckets is None:
        return None
    return f"buckets/{kind}{zlib.crc32(key.encode()) % buckets:04d}"


@dataclass(frozen=True)
class ZkURL:
    hosts: str  # host:port,host:port
    path: str  # the chroot-like prefix, e.g. /drfmesos
    # USER:PASSWORD for ZooKeeper's digest scheme, or None (never in a repr: logs show it)
    credentials: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> ZkURL:
        """`zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/path` (the path defaults to
        /drfmesos). The credentials are everything before the last `@` (a password may
        hold `#`, `?`, `/` or `@`; percent-encoding is read too). The errors name no
        password."""
        scheme, sep, rest = url.partition("://")
        userinfo, at, located = rest.rpartition("@")  # ('' and '' without credentials)
        hosts, _, path = located.partition("/")
        if scheme != "zk" or not sep or not hosts or "?" in path or "#" in path:
            raise ValueError(
                f"{_shown(url)!r}: expected zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/path"
            )
        for host in hosts.split(","):
            name, colon, port = host.rpartition(":")
            if not colon or not name or not port.isdigit():
                raise ValueError(f"{_shown(url)!r}: {host!r} is not HOST:PORT")
        credentials = None
        if at:
            user, colon, password = userinfo.partition(":")
            if not user or not colon or not password:
                raise ValueError(f"{_shown(url)!r}: credentials are USER:PASSWORD@")
            credentials = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        return cls(hosts, f"/{path}".rstrip("/") or "/drfmesos", credentials)

    @classmethod
    def from_flag(cls, value: str) -> ZkURL:
        """`--zk`'s value: a zk:// URL, or `file:///path` naming a file that holds one (as
        Mesos takes it), so that a password need not be on the command line."""
        if not value.startswith("file://"):
            return cls.parse(value)
        path = Path(urllib.parse.unquote(urllib.parse.urlsplit(value).path))
        try:
            text = path.read_text().strip()
        except OSError as e:
            raise ValueError(f"{value}: {e.strerror or e}") from None
        try:
            return cls.parse(text)
        except ValueError as e:  # (its password hidden, as `parse` hides it)
            raise ValueError(f"{value}: {e}") from None

    def acl(self, world_readable: bool = False) -> list[ACL] | None:
        """The ACL of the nodes a master makes: with credentials, theirs alone (and
        anyone's to read, `world_readable`); without, None (ZooKeeper's open one)."""
        if self.credentials is None:
            return None
        return list(CREATOR_ALL_ACL) + (list(READ_ACL_UNSAFE) if world_readable else [])

    def auth_data(self) -> list[tuple[str, str]] | None:
        return [("digest", self.credentials)] if self.credentials is not None else None

    def strangers(self, acl: list[ACL], world_readable: bool) -> list[str]:
        """Who but these credentials may do something to a node of `acl` (anyone may
        read it, `world_readable`): their ids, a digest's without its hash."""
        assert self.credentials is not None
        user, _, password = self.credentials.partition(":")
        ours = make_digest_acl_credential(user, password)
        out = []
        for a in acl:
            if a.id.scheme == "digest" and a.id.id == ours:
                continue
            if world_readable and a.perms == Permissions.READ:
                continue
            shown = a.id.id.partition(":")[0] if a.id.scheme == "digest" else a.id.id
            out.append(f"{a.id.scheme}:{shown}")
        return out


def warn_if_open(url: ZkURL, path: str, acl: list[ACL], world_readable: bool) -> None:
    """A warning (`zookeeper.path_open`) if anyone but the masters' credentials may do
    something to the node at `path` (`acl`): read it where only they may (a registry's),
    write, delete or add under it."""
    strangers = url.strangers(acl, world_readable)
    if strangers:
        log.warning(
            "zookeeper.path_open",
            path=path,
            others=strangers,
            hint="made before credentials were given, or by someone else: set its ACLs "
            "to the masters' (zkCli.sh setAcl -R) or use a new path",
        )


def _parents(path: str) -> list[str]:
    """`/a/b/c` -> `/a`, `/a/b` (the nodes `ensure_path` makes on the way)."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _shown(url: str) -> str:
    """`url` with its password, if any, hidden (for error messages): all before the last
    `@` but the user, as `parse` reads it."""
    head, sep, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    if not at:
        return url
    user = userinfo.partition(":")[0].partition("/")[0]
    return f"{head}{sep}{user}:***@{hosts}"


class Fenced(RuntimeError):
    """A registry write from a master that no longer leads."""


def packed_size(key: str, value: bytes) -> int:
    """The bytes of one entry of a bucket, packed (msgpack: `key` a str, `value` a bin)."""
    k, v = len(key.encode()), len(value)
    return (
        k
        + (1 if k < 32 else 2 if k < 256 else 3 if k < 65536 else 5)
        + v
        + (2 if v < 256 else 3 if v < 65536 else 5)
    )


MAP_HEADER = 5  # bytes of a msgpack map's header, at most


class _Batch:
    """The writes of one transaction: the callers' (in the order asked), the node writes
    that carry them, and each bucket as it is once they are written (kept only then)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes | None, asyncio.Future[None]]] = []
        self.nodes: dict[str, bytes | None] = {}
        self.buckets: dict[str, dict[str, bytes]] = {}  # bucket key: its entries, packed
        self.sizes: dict[str, int] = {}  # bucket key: its entries' packed bytes
        self.size = 0  # the transaction's bytes so far (data, paths and framing)


class ZkStore:
    """The registry's entries as znodes; writes are fenced by the leader's election node."""

    def __init__(self, client: KazooClient, path: str, fence: str) -> None:
        self.client = client
        self.path = path
        self.fence = fence  # the election node whose existence proves we still lead
        self._known: set[str] = set()  # the node keys that exist
        # bucket key: its entries as ZooKeeper has them (as last read or written), packed;
        # a write that failed leaves them as they were
        self._buckets: dict[str, dict[str, bytes]] = {}
        self._sizes: dict[str, int] = {}  # bucket key: its entries' packed bytes (when known)
        self._waiting: list[tuple[str, bytes | None, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.batches = 0  # transactions (or batches written one at a time) so far

    def _node(self, key: str) -> str:
        return f"{self.path}/{urllib.parse.quote(key, safe='')}"

    async def load(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._load)

    def _load(self) -> dict[str, Any]:
        self.client.ensure_path(self.path)
        entries: dict[str, Any] = {}
        children = self.client.get_children(self.path)
        pending = [(c, self.client.get_async(f"{self.path}/{c}")) for c in children]
        bucketed: dict[str, Any] = {}  # (a bucket's entry outranks a node of its own: a
        # node written before buckets, dropped when its bucket was first written)
        for child, result in pending:
            try:
                data, _ = result.get(timeout=30)
            except NoNodeError:
                continue
            key = urllib.parse.unquote(child)
            try:
                value = msgpack.unpackb(data, raw=False)
                if key.startswith("buckets/"):
                    bucket = {k: msgpack.unpackb(v, raw=False) for k, v in value.items()}
                    self._buckets[key] = dict(value)
                    bucketed.update(bucket)
                else:
                    entries[key] = value
            except Exception:
                log.error("registry.bad_node", node=child)
                continue
            self._known.add(key)
        entries.update(bucketed)
        return entries

    async def put(self, key: str, value: Any) -> None:
        await self._queued(key, msgpack.packb(value, use_bin_type=True))

    async def drop(self, key: str) -> None:
        await self._queued(key, None)

    async def _queued(self, key: str, data: bytes | None) -> None:
        """As Mesos's registrar: the writes asked for while one batch is on its way go
        together in the next, one transaction (up to MAX_BATCH, and MAX_TRANSACTION_BYTES),
        in the order asked; each caller returns once its own write is in ZooKeeper (or
        with its error: RecordTooLarge for a record its node cannot hold)."""
        if data is not None:
            size = len(data) if bucket_of(key) is None else packed_size(key, data) + MAP_HEADER
            if size > MAX_NODE_BYTES:
                raise RecordTooLarge(key, size, MAX_NODE_BYTES)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, data, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches(), name="zk-registry-writes")
        await done

    async def _write_batches(self) -> None:
        while self._waiting:
            batch = self._next_batch()
            if not batch.calls:  # (each of them refused)
                continue
            writes = list(batch.nodes.items())
            try:
                failed = await asyncio.to_thread(self._write_many, writes)
                errors = dict(zip(batch.nodes, failed, strict=True))
            except Exception as e:  # fenced, or ZooKeeper gone: every write of the batch
                errors = dict.fromkeys(batch.nodes, e)
            self.batches += 1
            for bucket, entries in batch.buckets.items():  # kept as written, or as they were
                if errors[bucket] is None:
                    self._buckets[bucket], self._sizes[bucket] = entries, batch.sizes[bucket]
            for key, _, done in batch.calls:
                if done.done():  # its caller gave up waiting
                    continue
                error = next(filter(None, (errors[n] for n in self._nodes_of(key))), None)
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)

    def _next_batch(self) -> _Batch:
        """The next writes asked for (up to MAX_BATCH, and MAX_TRANSACTION_BYTES), and the
        node writes that carry them: a bucket written once however many of its entries
        changed, as the last write left it with these changes. A write that would put its
        bucket past MAX_NODE_BYTES is refused alone (RecordTooLarge), the others go on."""
        batch, used = _Batch(), 0
        for key, data, done in self._waiting:
            if len(batch.calls) == MAX_BATCH:
                break
            bucket = bucket_of(key)
            if bucket is None:
                cost = len(data or b"") + len(self._node(key)) + OP_FRAMING
                if batch.calls and batch.size + cost > MAX_TRANSACTION_BYTES:
                    break
                batch.nodes[key] = data
            else:
                first = bucket not in batch.buckets
                entries = dict(self._buckets.get(bucket, {})) if first else batch.buckets[bucket]
                before = self._bucket_size(bucket, entries) if first else batch.sizes[bucket]
                size = before - (packed_size(key, entries[key]) if key in entries else 0)
                size += 0 if data is None else packed_size(key, data)
                if size + MAP_HEADER > MAX_NODE_BYTES:
                    used += 1
                    if not done.done():
                        done.set_exception(RecordTooLarge(key, size + MAP_HEADER, MAX_NODE_BYTES))
                    continue
                own = key in self._known and key not in batch.nodes  # a node of its own,
                # from before buckets: it goes
                cost = size - (0 if first else before)
                cost += (len(self._node(bucket)) + OP_FRAMING) if first else 0
                cost += (len(self._node(key)) + OP_FRAMING) if own else 0
                if batch.calls and batch.size + cost > MAX_TRANSACTION_BYTES:
                    break
                if data is None:
                    entries.pop(key, None)
                else:
                    entries[key] = data
                batch.buckets[bucket], batch.sizes[bucket] = entries, size
                if own:
                    batch.nodes[key] = None
            batch.size += cost
            batch.calls.append((key, data, done))
            used += 1
        self._waiting = self._waiting[used:]
        for bucket, entries in batch.buckets.items():
            batch.nodes[bucket] = msgpack.packb(entries, use_bin_type=True) if entries else None
        return batch

    def _bucket_size(self, bucket: str, entries: dict[str, bytes]) -> int:
        size = self._sizes.get(bucket)
        if size is None:  # (counted once a leader first writes the bucket)
            size = self._sizes[bucket] = sum(packed_size(k, v) for k, v in entries.items())
        return size

    def _nodes_of(self, key: str) -> list[str]:
        bucket = bucket_of(key)
        return [key] if bucket is None else [bucket]

    def _write_many(self, items: list[tuple[str, bytes | None]]) -> list[Exception | None]:
        """One transaction for all, fenced; if one of its writes fails (a node an earlier
        leader made or removed, a key twice) it is rolled back whole, and they are written
        one at a time instead."""
        ops = [(k, d) for k, d in items if not (d is None and k not in self._known)]
        if len(ops) > 1 and len({k for k, _ in ops}) == len(ops):
            t = self.client.transaction()
            t.check(self.fence, 0)
            for key, data in ops:
                if data is None:
                    t.delete(self._node(key))
                elif key in self._known:
                    t.set_data(self._node(key), data)
                else:
                    t.create(self._node(key), data)
            fenced, *results = t.commit()
            if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
                raise Fenced(f"no longer the leader ({type(fenced).__name__})")
            if not any(isinstance(r, Exception) for r in results):
                for key, data in ops:
                    if data is None:
                        self._known.discard(key)
                    else:
                        self._known.add(key)
                return [None] * len(items)
        errors: list[Exception | None] = []
        for key, data in items:
            try:
                self._write(key, data)
                errors.append(None)
            except Fenced:
                raise
            except Exception as e:
                errors.append(e)
        return errors

    def _write(self, key: str, data: bytes | None) -> None:
        for _ in range(3):  # at most: create -> exists, set -> gone, once each
            if data is None and key not in self._known:
                return
            t = self.client.transaction()
            t.check(self.fence, 0)  # our election node, never changed since it was made
            if data is None:
                t.delete(self._node(key))
            elif key in self._known:
                t.set_data(self._node(key), data)
            else:
                t.create(self._node(key), data)
            fenced, problem = t.commit()
            if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
                raise Fenced(f"no longer the leader ({type(fenced).__name__})")
            if isinstance(problem, NodeExistsError):  # made by an earlier leader
                self._known.add(key)
            elif isinstance(problem, NoNodeError):  # removed by an earlier leader
                self._known.discard(key)
            elif isinstance(problem, Exception):
                raise problem
            else:
                if data is None:
                    self._known.discard(key)
                else:
                    self._known.add(key)
                return

    async def close(self) -> None:
        if self._writer is not None:
            await cancel_and_wait(self._writer)
        for _, _, done in self._waiting:
            done.cancel()
        self._waiting = []


class ZkCandidate:
    """One master among several: waits in the election, leads while it holds it."""

    def __init__(
        self, url: ZkURL, cluster: str, identity: dict[str, str], session_timeout: float = 10.0
    ) -> None:
        self.url = url
        self.root = f"{url.path}/{cluster}"
        self.identity = identity
        self.session_timeout = session_timeout
        self.client = KazooClient(
            hosts=url.hosts,
            timeout=session_timeout,
            auth_data=url.auth_data(),
            default_acl=url.acl(),  # (every node made under the path: the election's too)
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._term: Term | None = None
        self._lock: Lock | None = None
        self._connected = asyncio.Event()
        self._started = False
        self._checked = False  # whether these credentials may campaign here (`_check_access`)

    def _on_state(self, state: str) -> None:  # kazoo's thread: hand over to the loop
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._state_changed, state)

    def _state_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
            return
        self._connected.clear()
        if self._term is not None and not self._term.lost.is_set():
            log.warning("zookeeper.leadership_lost", state=str(state), epoch=self._term.epoch)
            self._term.lost.set()

    async def _start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self.client.add_listener(self._on_state)
        while True:
            # not kazoo's blocking start(): nothing could cut its wait short, and a SIGTERM
            # would wait for it; from start_async on, close() stops the client
            await asyncio.to_thread(self.client.start_async)
            self._started = True
            if self.client.connected:
                self._connected.set()
            try:
                await within(self._connected.wait(), CONNECT_TIMEOUT)
                return
            except TimeoutError:  # ZooKeeper not up yet: keep trying, as a standby would
                log.warning("zookeeper.unreachable", hosts=self.url.hosts)
            await asyncio.to_thread(self.client.stop)  # (and start afresh: no long backoff)
            self._started = False
            await asyncio.sleep(1.0)

    async def campaign(self) -> Term:
        await self._start()
        while True:
            await self._connected.wait()
            if not self._checked:  # (once: a standby's later terms find it as it was)
                try:
                    await asyncio.to_thread(self._check_access)
                except NoAuthError:
                    raise LeadershipError(self._denied()) from None
                except KazooException as e:  # (the connection lost meanwhile: again)
                    log.warning("zookeeper.access_check_failed", error=repr(e))
                    await asyncio.sleep(0.5)
                    continue
                self._checked = True
            lock = Lock(self.client, f"{self.root}/election", json.dumps(self.identity))
            self._lock = lock
            acquiring = asyncio.ensure_future(asyncio.to_thread(lock.acquire))
            try:
                won = await asyncio.shield(acquiring)
            except asyncio.CancelledError:
                # Stopping: wait for nothing ZooKeeper holds up (close() ends the session,
                # our node with it, and fails the acquire's last calls).
                lock.cancel()
                acquiring.add_done_callback(_retrieved)
                raise
            except NoAuthError:
                await asyncio.to_thread(_release, lock)
                raise LeadershipError(self._denied()) from None
            except KazooException as e:
                log.warning("zookeeper.election_failed", error=repr(e))
                await asyncio.to_thread(_release, lock)
                await asyncio.sleep(0.5)
                continue
            if not won or not self.client.connected:
                await asyncio.to_thread(_release, lock)
                continue
            won_at = time.time()
            fence = f"{self.root}/election/{lock.node}"
            try:
                epoch = await asyncio.to_thread(self._bump_epoch, fence)
            except (KazooException, Fenced) as e:
                log.warning("zookeeper.epoch_failed", error=repr(e))
                await asyncio.to_thread(_release, lock)
                continue
            store = ZkStore(self.client, f"{self.root}/registry", fence)
            self._term = Term(epoch, store, won_at=won_at)
            if not self.client.connected:  # lost while we got here
                self._term.lost.set()
            return self._term

    def _check_access(self) -> None:
        """Whether these credentials (or none) may campaign here: NoAuthError where they
        are not those that made the path (`campaign` says so once, a LeadershipError,
        rather than an election failing for ever). With credentials, a warning for each
        of the masters' nodes anyone else may do anything to (read the registry, write,
        delete or add under it): made before the credentials were given, or by someone
        who got there first."""
        self.client.ensure_path(f"{self.root}/election")
        self.client.get_children(f"{self.root}/election")
        if self.url.credentials is None:
            return
        for path in [*_parents(self.root), self.root, *(f"{self.root}/{n}" for n in NODES)]:
            if self.client.exists(path):
                acl, _ = self.client.get_acls(path)
                warn_if_open(self.url, path, acl, world_readable=False)

    def _denied(self) -> str:
        given = "these --zk credentials" if self.url.credentials else "no --zk credentials"
        return (
            f"ZooKeeper refused access to {self.root} with {given}: the path was made by "
            f"masters with other credentials (give the same USER:PASSWORD as they had, "
            f"in zk://USER:PASSWORD@HOST:PORT/path or a file:// naming a file holding it)"
        )

    def _bump_epoch(self, fence: str) -> int:
        path = f"{self.root}/epoch"
        self.client.ensure_path(path)
        while True:
            data, stat = self.client.get(path)
            try:
                previous = int(data or b"0")
            except ValueError:
                previous = 0
            epoch = next_epoch(previous)
            t = self.client.transaction()
            t.check(fence, 0)
            t.set_data(path, str(epoch).encode(), version=stat.version)
            fenced, written = t.commit()
            if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
                raise Fenced("lost the election node while taking the epoch")
            if not isinstance(written, Exception):
                return epoch

    async def still_leads(self) -> bool:
        term, lock = self._term, self._lock
        if term is None or term.lost.is_set() or lock is None or not self.client.connected:
            return False
        fence = f"{self.root}/election/{lock.node}"
        try:
            return bool(await within(asyncio.to_thread(self.client.exists, fence), 5))
        except Exception:
            return False

    async def standbys(self) -> list[dict[str, Any]]:
        """Who else is in the election (for the state and the UI), leader first."""
        lock = self._lock
        if lock is None:
            return []
        try:
            names = await asyncio.to_thread(lock.contenders)
        except KazooException:
            return []
        out = []
        for name in names:
            with contextlib.suppress(ValueError):
                out.append(json.loads(name))
        return out

    async def resign(self) -> None:
        self._term = None
        lock, self._lock = self._lock, None
        if lock is not None:
            await asyncio.to_thread(_release, lock)

    async def close(self) -> None:
        """End the session: its ephemeral nodes (the election's, the MasterInfo) go with
        it, and a call still waiting for an unreachable ZooKeeper fails at once, so a
        master stops promptly whether or not ZooKeeper answers (kazoo gives up connecting
        within its connection timeout)."""
        self._term = None
        if self._started:
            await asyncio.to_thread(self.client.stop)
            await asyncio.to_thread(self.client.close)
            self._started = False
        await self.resign()  # (the lock's own state: ZooKeeper's is gone with the session)


def _release(lock: Lock) -> None:
    with contextlib.suppress(Exception):
        lock.release()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # (an acquire cut short by close(): nothing to say)


__all__ = ["Fenced", "LeadershipError", "RecordTooLarge", "ZkCandidate", "ZkStore", "ZkURL"]
