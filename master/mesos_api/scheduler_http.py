"""`POST /api/v1/scheduler`: Mesos's v1 Scheduler HTTP API, served by the bus's handlers.

A SUBSCRIBE keeps its connection open as the framework's event stream: a chunked
RecordIO stream of single-line JSON events, named by a `Mesos-Stream-Id`. Every other
call is one request, answered 202 at once (what it leads to comes on the stream, as in
Mesos) or 4xx with a JSON error if it cannot be read, and it must carry the stream id of
its framework's stream. Calls are translated to our messages
(master.mesos_api.scheduler_calls) and handed to the master's own handlers with the
principal HTTP Basic proved; what the master says to that framework reaches the stream
through the master's per-topic sinks (`MasterSide.sinks`) instead of the bus
(master.mesos_api.scheduler_events). A closed stream is the framework's connection lost,
as the bus's Last Will: its failover timeout runs.

A body is read as the bus's intake reads a payload (bounds.md): a list over its bound is
refused before any item is read (master.mesos_api.scheduler_calls), and a big body
(over READ_INLINE_BYTES) is parsed and turned into our message in a thread, one of each
principal's at a time and READING_AT_ONCE in all (`BigBodies`), so that a tenant's
megabyte of JSON holds neither the master's loop nor the default executor's threads the
registry and the intake use.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from master.authz import Caller
from master.http.log import RefusedLines
from master.http.responses import unauthenticated
from master.mesos_api import scheduler_events as events
from master.mesos_api.scheduler_calls import (
    PREEMPTION_CAPABILITY,
    MesosCall,
    PrincipalMismatch,
    loads,
    message_of,
    parse_call,
    subscribe_of,
    update_of,
)
from protocol import logs, recordio
from protocol import mesos_json as mj
from protocol.transport.aio import within
from protocol.wire.messages import Error, Gone, Revive, Subscribed, Suppress, Wire
from protocol.wire.topics import check_segment

if TYPE_CHECKING:
    from master.http.auth import PrincipalAuth
    from master.mesos_api.master_side import MasterSide

PATH = "/api/v1/scheduler"
VERSION_PATH = "/version"
SELF_AUTHENTICATED = (PATH, VERSION_PATH)  # (the API's guard leaves these to this module)
BODY_SECONDS = 10.0  # a request body slower than this is a slow-loris: 408
SUBSCRIBE_SECONDS = 30.0  # the master's answer to a SUBSCRIBE, at most
STREAM_EVENTS = 10_000  # events waiting for a slow reader; past them its stream is closed
STREAM_BYTES = 32 * 1024 * 1024  # or past this much of a principal's streams' together
# (as the broker bounds a client: one tenant's streams that do not read hold no more)
STREAMS_PER_PRINCIPAL = 64  # open (and opening) SUBSCRIBE streams of one principal, at most
INSECURE_PRINCIPAL = "mesos"  # whose frameworks they are on a cluster without credentials
# what a refused SUBSCRIBE's code becomes
SUBSCRIBE_STATUS = {"rate-limited": 429, "unavailable": 503}
READ_INLINE_BYTES = 64 * 1024  # bodies above this are read in a thread (as the bus's)
READING_AT_ONCE = 2  # big bodies read in threads at once, in all (one a principal)
# a principal's big bodies waiting or being read at once; past it one is refused (429),
# its body let go: each waiting one holds its body, and its parsed JSON some 8 times it
# (24 of a tenant's 1 MiB ACCEPTs in flight held 221 MiB: review 75)
BIG_BODIES_A_PRINCIPAL = 2
BODY_BYTES = web.RequestKey("body_bytes", int)  # how big a request's body is

T = TypeVar("T")


def problem(message: str, status: int, **headers: str) -> web.Response:
    return web.Response(
        text=json.dumps({"error": message}),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class SchedulerStream:
    """One SUBSCRIBE's connection: the sink the master writes to, and its queue."""

    def __init__(
        self,
        principal: str,
        topic_of: Any,
        preemption_notices: bool,
        siblings: set[SchedulerStream] | None = None,
    ) -> None:
        """`siblings`: its principal's streams (it among them), whose bytes held count
        together against STREAM_BYTES."""
        self.stream_id = str(uuid.uuid4())
        self.siblings: set[SchedulerStream] = siblings if siblings is not None else {self}
        self.principal = principal
        self.inbox = f"mesos-{self.stream_id}"
        self.topic: str = topic_of(principal, self.inbox)
        self.preemption_notices = preemption_notices
        self.framework_id = ""
        self.answer: asyncio.Future[Wire] = asyncio.get_running_loop().create_future()
        # each event framed as it comes (its size is known, and it is framed once)
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(STREAM_EVENTS)
        self.held = 0  # bytes in the queue: a tenant's executor chooses how big they are
        self.ended = False  # closed by the master (removed, replaced): no Last Will
        self.transport: asyncio.Transport | None = None  # (once it is served)

    def sink(self, msg: Wire) -> None:
        """What the master says to this framework (called in its handlers: no waiting)."""
        if not self.answer.done():
            if isinstance(msg, Subscribed | Error):
                self.answer.set_result(msg)
            return  # (nothing else comes before the answer)
        if self.ended:
            return
        found = events.event_of(msg, self.preemption_notices)
        if found is not None:
            self.put(found)
        if events.ends_stream(msg):
            self.end()

    @property
    def holding(self) -> int:
        """Bytes it holds: queued, and written to its connection but not yet sent."""
        sending = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return self.held + sending

    def put(self, event: dict[str, Any]) -> None:
        record = recordio.json_record(event)
        try:
            if sum(s.holding for s in self.siblings) + len(record) > STREAM_BYTES:
                raise asyncio.QueueFull
            self.queue.put_nowait(record)
            self.held += len(record)
        except asyncio.QueueFull:  # a reader this slow loses its stream, not our memory
            self.end(lost=True)
            if self.transport is not None:  # (a writer stuck on a reader that never reads)
                self.transport.abort()

    async def take(self) -> bytes | None:
        """The events waiting (at least one), framed; None once the stream has ended."""
        record = await self.queue.get()
        records = []
        while record is not None:
            records.append(record)
            self.held -= len(record)
            if self.queue.empty():
                return b"".join(records)
            record = self.queue.get_nowait()
        # the end: what came before it is sent first
        if records:
            self.queue.put_nowait(None)
            return b"".join(records)
        return None

    def end(self, lost: bool = False) -> None:
        """Close the stream; `lost`: as a lost connection (its failover timeout runs)."""
        self.ended = not lost
        while True:  # make room for the end mark
            try:
                self.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                dropped = self.queue.get_nowait()
                self.held -= len(dropped or b"")


class BodiesBusy(Exception):
    """A principal's big bodies at once are at their bound (`BigBodies`)."""


class BigBodies:
    """Reading big bodies off the master's loop: in a thread, at most READING_AT_ONCE at
    once, and one of each principal's at a time (its others wait for it), so that one
    tenant posting many keeps neither the others' nor the default executor's threads
    (the registry's, the intake's decoding) from their turns."""

    def __init__(self) -> None:
        self._threads = asyncio.Semaphore(READING_AT_ONCE)
        self._turns: dict[str, asyncio.Lock] = {}  # a principal's, while it has one waiting
        self._waiting: collections.Counter[str] = collections.Counter()

    async def read(self, principal: str, size: int, read: Callable[[], T]) -> T:
        """`read()` (pure: it touches nothing of the master's), on the loop if the body is
        small, else in a thread in its principal's turn; BodiesBusy past
        BIG_BODIES_A_PRINCIPAL of its at once."""
        if size <= READ_INLINE_BYTES:
            return read()
        if self._waiting[principal] >= BIG_BODIES_A_PRINCIPAL:
            raise BodiesBusy(
                f"at most {BIG_BODIES_A_PRINCIPAL} calls over {READ_INLINE_BYTES // 1024} KiB "
                "of a principal's read at once: send it again when one is answered"
            )
        turn = self._turns.setdefault(principal, asyncio.Lock())
        self._waiting[principal] += 1
        try:
            async with turn, self._threads:
                job = asyncio.ensure_future(asyncio.to_thread(read))
                try:
                    return await asyncio.shield(job)
                finally:  # (a request gone away: its thread keeps its turn until it ends)
                    if not job.done():
                        await asyncio.wait({job})
        finally:
            self._waiting[principal] -= 1
            if not self._waiting[principal]:
                del self._waiting[principal], self._turns[principal]


class SchedulerApi:
    public_paths = SELF_AUTHENTICATED  # it checks framework principals itself

    def __init__(self, master: MasterSide, auth: PrincipalAuth | None) -> None:
        self.master = master
        self.auth = auth
        self.streams: dict[str, SchedulerStream] = {}  # by framework id
        self.of_principal: dict[str, set[SchedulerStream]] = {}  # open, by principal
        self.opened: collections.Counter[str] = collections.Counter()  # streams by principal
        self.log = logs.get("master.mesos_scheduler", master_id=master.info.master_id)
        self.refused_lines = RefusedLines(self.log)  # (sampled, cut: master.http.log)
        self.bodies = BigBodies()

    def routes(self) -> list[web.RouteDef]:
        return [web.post(PATH, self.handle), web.get(VERSION_PATH, self.version)]

    def close(self) -> None:
        """The master stops: every stream ends."""
        self.refused_lines.close()
        for stream in list(self.streams.values()):
            stream.end()

    async def version(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(mj.version_json())

    async def handle(self, request: web.Request) -> web.StreamResponse:
        principal = await self._principal(request)
        if isinstance(principal, web.Response):
            return principal
        if request.content_type not in ("application/json", "application/octet-stream", ""):
            self._bad(request, principal, "not-json")
            return problem("this master speaks JSON only (Content-Type: application/json)", 415)
        try:
            body = await within(request.read(), BODY_SECONDS)
        except web.HTTPRequestEntityTooLarge:
            self._bad(request, principal, "too-large")
            return problem(f"a call is at most {request.app._client_max_size} bytes", 413)
        except TimeoutError:
            self._bad(request, principal, "slow-body")
            return problem(f"the body took over {BODY_SECONDS:g} s", 408)
        request[BODY_BYTES] = len(body)
        try:
            call = await self._read(request, principal, lambda: parse_call(loads(body)))
            if call.type == "SUBSCRIBE":
                return await self._subscribe(request, call, principal)
            return await self._call(request, call, principal)
        except PrincipalMismatch as e:
            self._bad(request, principal, "principal-mismatch")
            return problem(str(e), 403)
        except BodiesBusy as e:
            self._bad(request, principal, "busy")
            return problem(str(e), 429)
        except ValueError as e:  # malformed JSON, or a call we cannot read
            self._bad(request, principal, "bad-call")
            return problem(str(e), 400)

    async def _read(self, request: web.Request, principal: str, read: Callable[[], T]) -> T:
        """What `read` makes of the request's body: off the loop if it is big, in the
        turn of its principal (without credentials, where every framework's is
        INSECURE_PRINCIPAL: of its stream, else of its client's address, so that one
        framework's calls neither queue nor crowd out another's on the same host)."""
        if self.auth is not None:
            turn = principal
        elif stream := request.headers.get("Mesos-Stream-Id"):
            turn = f"stream {stream[:64]}"
        else:
            turn = f"address {request.remote}"
        return await self.bodies.read(turn, request.get(BODY_BYTES, 0), read)

    async def _principal(self, request: web.Request) -> str | web.Response:
        if self.auth is None:  # no credentials store: as the insecure bus, nothing proved
            return INSECURE_PRINCIPAL
        if not request.secure and not _loopback(request.remote):
            # a secret in the clear across a network: refused before it is even checked
            self.refused_lines.refused("mesos.plain_http_refused", remote=request.remote)
            return problem("credentials over plain HTTP on loopback only: use HTTPS", 403)
        given = request.headers.get("Authorization")
        who = await self.auth.principal(given, request.remote)
        if who is None:  # (none given, or refused: said apart, as the master's own pages do)
            self.refused_lines.refused("mesos.unauthorized", remote=request.remote)
            return problem(
                unauthenticated(given, "framework"),
                401,
                **{"WWW-Authenticate": 'Basic realm="drfmesos"'},
            )
        if who.kind != "framework":
            self.refused_lines.refused(
                "mesos.forbidden", principal=who.principal, remote=request.remote, kind=who.kind
            )
            return problem(f"a {who.kind} principal cannot run a framework", 403)
        return who.principal

    async def _update(
        self, request: web.Request, call: MesosCall, principal: str, owner: str
    ) -> web.Response:
        """UPDATE_FRAMEWORK, answered as Mesos answers it: 200 once in the registry and
        in effect, else saying why, nothing changed: 403 for a role its principal may not
        use, 503 if the registry cannot be written, else 400. Its refusal is told here,
        not on the stream (a refused role there ends a stream; this changes nothing)."""
        message = await self._read(request, principal, lambda: update_of(call, principal))
        refusals: list[tuple[str, str]] = []
        caller = Caller("framework", owner, None, refused=lambda *r: refusals.append(r))
        await self.master.call(message, caller)
        for code, why in refusals[:1]:  # (a role the principal may not use: as Mesos, 403)
            self._bad(request, principal, code, framework_id=call.framework())
            status = {"unavailable": 503, "role-refused": 403}.get(code, 400)
            return problem(why, status)
        return web.Response(status=200)

    def _bad(self, request: web.Request, principal: str, code: str, **more: str) -> None:
        """A call refused: a line, sampled per principal, what it named cut."""
        self.refused_lines.refused(
            "mesos.bad_call", principal=principal, remote=request.remote, code=code, **more
        )

    async def _call(self, request: web.Request, call: MesosCall, principal: str) -> web.Response:
        framework_id = call.framework()
        stream = self.streams.get(framework_id)
        if stream is None or (self.auth is not None and stream.principal != principal):
            self._bad(request, principal, "not-its-framework", framework_id=framework_id)
            known = self.master.books.frameworks.get(framework_id)
            if known is None or (self.auth is not None and known.principal != principal):
                # Mesos's answer for an unknown framework; another principal's gets the
                # same, so that a call cannot tell whether a framework id exists
                return problem("Framework cannot be found", 400)
            return problem(f"framework {framework_id} is not subscribed on this API", 403)
        if request.headers.get("Mesos-Stream-Id") != stream.stream_id:
            self._bad(request, principal, "wrong-stream-id", framework_id=framework_id)
            return problem("Mesos-Stream-Id is not this framework's stream", 400)
        if call.type == "UPDATE_FRAMEWORK":
            return await self._update(request, call, principal, stream.principal)
        message = await self._read(request, principal, lambda: message_of(call))
        fw = self.master.books.frameworks.get(framework_id)
        if isinstance(message, Suppress | Revive) and fw is not None:
            others = sorted(set(message.roles) - set(fw.all_roles()))
            if others:  # (Mesos's answer: the call is invalid)
                return problem(f"framework {framework_id} is not in roles {', '.join(others)}", 400)
        await self.master.call(message, Caller("framework", stream.principal, stream.topic))
        return web.Response(status=202)

    async def _subscribe(
        self, request: web.Request, call: MesosCall, principal: str
    ) -> web.StreamResponse:
        info = call.body().get("framework_info")
        if self.auth is None and isinstance(info, dict):
            principal = self._insecure_principal(info.get("principal"))
        if self.opened[principal] >= STREAMS_PER_PRINCIPAL:
            self._bad(request, principal, "too-many-streams")
            return problem(f"at most {STREAMS_PER_PRINCIPAL} streams a principal", 429)
        self.opened[principal] += 1
        try:
            return await self._open(request, call, principal, info)
        finally:
            self.opened[principal] -= 1
            if not self.opened[principal]:
                del self.opened[principal]

    async def _open(
        self, request: web.Request, call: MesosCall, principal: str, info: object
    ) -> web.StreamResponse:
        siblings = self.of_principal.setdefault(principal, set())
        stream = SchedulerStream(principal, self.master.topics.framework, False, siblings)
        siblings.add(stream)
        try:
            return await self._opened(request, call, principal, info, stream)
        finally:
            siblings.discard(stream)
            if not siblings:
                self.of_principal.pop(principal, None)

    async def _opened(
        self,
        request: web.Request,
        call: MesosCall,
        principal: str,
        info: object,
        stream: SchedulerStream,
    ) -> web.StreamResponse:
        default = "*" if self.auth is None else principal
        subscribe = await self._read(
            request,
            principal,
            # a framework that names no role is in its principal's own (as the SDK's and
            # `drfmesos run`'s are), not Mesos's `*`, which no tenant's is
            lambda: subscribe_of(call, principal, stream.inbox, stream.stream_id, default),
        )
        capabilities = info.get("capabilities") if isinstance(info, dict) else None
        stream.preemption_notices = isinstance(capabilities, list) and any(
            isinstance(c, dict) and c.get("type") == PREEMPTION_CAPABILITY for c in capabilities
        )
        sinks = self.master.sinks
        sinks[stream.topic] = stream.sink
        caller = Caller("framework", principal, stream.topic)
        try:
            await self.master.call(subscribe, caller)
            answer = await within(asyncio.shield(stream.answer), SUBSCRIBE_SECONDS)
        except TimeoutError:
            sinks.pop(stream.topic, None)
            return problem("the master did not answer the SUBSCRIBE in time", 503)
        if isinstance(answer, Error):
            sinks.pop(stream.topic, None)
            return problem(answer.message, SUBSCRIBE_STATUS.get(answer.code, 403))
        assert isinstance(answer, Subscribed)
        return await self._serve(request, stream, answer)

    def _insecure_principal(self, claimed: object) -> str:
        try:
            return check_segment(str(claimed)) if claimed else INSECURE_PRINCIPAL
        except ValueError:
            return INSECURE_PRINCIPAL

    async def _serve(
        self, request: web.Request, stream: SchedulerStream, answer: Subscribed
    ) -> web.StreamResponse:
        m = self.master
        stream.framework_id = answer.framework_id
        old = self.streams.get(answer.framework_id)
        if old is not None and old is not stream:
            # a re-subscription takes the framework's stream over: the master told the
            # old one "Framework failed over" (its ERROR event), which ended it already
            old.end()
        self.streams[answer.framework_id] = stream
        log = self.log.bind(framework_id=answer.framework_id, stream_id=stream.stream_id)
        log.info("mesos.subscribed", principal=stream.principal, resubscribed=answer.resubscribed)
        response = web.StreamResponse(
            status=200,
            headers={"Content-Type": "application/json", "Mesos-Stream-Id": stream.stream_id},
        )
        response.enable_chunked_encoding()
        first = events.subscribed(answer, m.info.heartbeat_interval, self._master_info())
        lost = True
        try:
            await response.prepare(request)
            stream.transport = request.transport
            await response.write(recordio.json_record(first))
            while (events_now := await stream.take()) is not None:
                await response.write(events_now)  # what came meanwhile: one chunk
            lost = not stream.ended
            await response.write_eof()
        except ConnectionError:  # (aiohttp's "Connection lost" mid-write is one too)
            pass  # the framework went away
        finally:
            m.sinks.pop(stream.topic, None)
            if self.streams.get(answer.framework_id) is stream:
                del self.streams[answer.framework_id]
            if lost:
                log.info("mesos.stream_lost")
                gone = Gone(kind="framework", id=stream.inbox, incarnation=stream.stream_id)
                await m.connection_gone(Caller("framework", stream.principal, None), gone)
        return response

    def _master_info(self) -> dict[str, Any]:
        url = urllib.parse.urlsplit(self.master.web_ui())
        host = url.hostname or "127.0.0.1"
        return mj.master_info(self.master.info.master_id, host, url.port or 5050, host)


def _loopback(remote: str | None) -> bool:
    if not remote:
        return True  # a Unix socket's peer has no address: it is on this machine
    try:
        return ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False


def standby_routes(leader: Callable[[], Awaitable[str]]) -> list[web.RouteDef]:
    """What a standby master answers Mesos frameworks: 307 to the leader, as Mesos's
    standbys do (503 while nobody leads), and /version."""

    async def redirect(request: web.Request) -> web.StreamResponse:
        address = await leader()  # host:port
        if not address:
            return problem("no master leads now: try again", 503)
        return problem(f"not the leader: {address} leads", 307, Location=f"//{address}{PATH}")

    async def version(request: web.Request) -> web.StreamResponse:
        return web.json_response(mj.version_json())

    return [web.post(PATH, redirect), web.get(VERSION_PATH, version)]
