"""Mesos's v1 Executor HTTP API for a Mesos custom executor (pymesos's
`MesosExecutorDriver`, ...), as an executor of ours: an adapter between the two.

The slave starts this module in place of a Mesos framework's executor command (the
master's Mesos scheduler API asks for it: master.mesos_api.scheduler_calls), over the
private line every executor of ours has; it serves `POST /api/v1/executor` on a loopback
port of its own and starts the real command with the environment Mesos gives
(`MESOS_AGENT_ENDPOINT`, `MESOS_FRAMEWORK_ID`, `MESOS_EXECUTOR_ID`, `MESOS_DIRECTORY`,
`MESOS_SANDBOX`, ...). Calls SUBSCRIBE, UPDATE and MESSAGE; events SUBSCRIBED, LAUNCH,
KILL, ACKNOWLEDGED, MESSAGE and SHUTDOWN, as RecordIO JSON on the SUBSCRIBE stream. The
executor still speaks only for its own tasks: what it says goes over this adapter's line,
which the slave knows as that executor's, and the slave checks every task id.

Its port is on the host's loopback, where any local process may connect: a call is
served only from this executor (Mesos's `--authenticate_http_executors`). It carries the
token the slave gave it (`Authorization: Bearer <MESOS_EXECUTOR_AUTHENTICATION_TOKEN>`,
as Mesos's executor libraries send it), or, with no token at all, comes from a socket of
this process's own user (as the kernel records it: `peer_is_own_user`): pymesos 0.3.15
sends no token, and on a slave that runs each principal's tasks as a user of its own no other
tenant's process has that uid. No token and another user: 401; a token of another
executor's: 403 (only the slave, which holds the key, can tell).

Asking the slave whose a token is costs the executor's own line: every message it sends
waits its principal's pace there (slave.message_budget.UpdatePace). So the adapter asks
about one token at a time, and answers a wrong one sent meanwhile 429 at once: another
tenant's task sending wrong tokens from 400 connections at once had queued checks
ahead of this executor's own messages, one of which waited 2.0 s behind them (attack88).
Its refusals are logged a few lines a second, with how many were left out.

    python -m frameworks.mesos_executor      (with MESOS_EXECUTOR_COMMAND: the real one)
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from frameworks.executor import Executor, ExecutorDriver
from protocol import logs, recordio
from protocol import mesos_json as mj
from protocol.extras import needs
from protocol.refusal_sampling import RateLimiter
from protocol.tooling.peer_uid import peer_is_own_user, peer_uid
from protocol.wire.messages import KillPolicy, TaskInfo

PATH = "/api/v1/executor"
COMMAND_VARIABLE = "MESOS_EXECUTOR_COMMAND"  # the Mesos executor's own command
SHUTDOWN_GRACE = 5.0  # seconds from SHUTDOWN to SIGKILL (MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD)
CHECKS_AT_ONCE = 1  # tokens not its own asked of the slave at once (429 past it)
REFUSALS_LOGGED = 5  # lines a second about refused calls, at most
SENDER = ""  # (one budget for them all: any local process may send them)

log = logs.get("mesos_executor")


class MesosExecutorAdapter(Executor):
    def __init__(self, command: str) -> None:
        self.command = command
        self.driver: ExecutorDriver | None = None
        self.child: asyncio.subprocess.Process | None = None
        self.stream: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.runner: Any = None
        self.server: asyncio.Server | None = None
        self.endpoint = ""
        self.subscriber: asyncio.Transport | None = None  # the SUBSCRIBE stream's connection
        self.unsent: list[dict[str, Any]] = []  # taken by a stream whose connection dropped
        self.checking = 0  # tokens asked of the slave, under way
        # refusal lines, sampled as the slave's and the master's are (`_refused`)
        self._lines = RateLimiter(rate=REFUSALS_LOGGED, burst=REFUSALS_LOGGED)

    # -- our side: the slave's line -----------------------------------------------------------
    async def registered(self, driver: ExecutorDriver) -> None:
        self.driver = driver
        await self._serve()
        env = {k: v for k, v in os.environ.items() if k not in (COMMAND_VARIABLE,)}
        sandbox = os.getcwd()
        env.update(
            MESOS_AGENT_ENDPOINT=self.endpoint,
            MESOS_FRAMEWORK_ID=driver.framework_id,
            MESOS_EXECUTOR_ID=driver.executor_id,
            MESOS_SLAVE_ID=driver.slave_id,
            MESOS_AGENT_ID=driver.slave_id,
            MESOS_DIRECTORY=sandbox,
            MESOS_SANDBOX=sandbox,
            MESOS_CHECKPOINT="0",
            MESOS_HTTP_COMMAND_EXECUTOR="0",
            MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD=f"{SHUTDOWN_GRACE:g}secs",
        )
        # a session of its own: pymesos kills its own process group when its stream ends
        self.child = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", self.command, env=env, start_new_session=True
        )
        driver.spawn(self._watch_child(driver, self.child))
        log.info("mesos_executor.started", pid=self.child.pid, endpoint=self.endpoint)

    async def _watch_child(self, driver: ExecutorDriver, child: asyncio.subprocess.Process) -> None:
        code = await child.wait()
        log.info("mesos_executor.exited", status=code)
        await self._stop_http()
        await driver.stop()  # the slave sees this executor exit, and its tasks' fate

    async def launch_task(self, driver: ExecutorDriver, task: TaskInfo) -> None:
        self._event("LAUNCH", {"task": mj.task_to_mesos(task, driver.framework_id)})

    async def kill_task(self, driver: ExecutorDriver, task_id: str) -> None:
        kill: dict[str, Any] = {"task_id": mj.mesos_id(task_id)}
        grace = driver.kill_grace(task_id)
        if grace is not None:  # (Mesos's KILL event carries the kill's policy)
            kill["kill_policy"] = mj.kill_policy_to_mesos(KillPolicy(grace_period=grace))
        self._event("KILL", kill)

    async def framework_message(self, driver: ExecutorDriver, data: bytes) -> None:
        self._event("MESSAGE", {"data": mj.encode_bytes(data)})

    async def shutdown(self, driver: ExecutorDriver) -> None:
        self._event("SHUTDOWN", None)
        child = self.child
        if child is not None and child.returncode is None:
            try:
                async with asyncio.timeout(SHUTDOWN_GRACE):
                    await child.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                await child.wait()
        await self._stop_http()

    async def error(self, driver: ExecutorDriver, message: str) -> None:
        self._event("ERROR", {"message": message})

    def _event(self, kind: str, body: dict[str, Any] | None) -> None:
        self.stream.put_nowait(
            {"type": kind} if body is None else {"type": kind, kind.lower(): body}
        )

    # -- Mesos's side: the executor's HTTP calls ---------------------------------------------
    async def _serve(self) -> None:
        with needs("master"):  # (aiohttp)
            from aiohttp import web

        app = web.Application(client_max_size=1024 * 1024)
        app.add_routes([web.post(PATH, self._call)])
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.runner.setup()
        handler, others = self.runner.server, Others()
        self.server = await asyncio.get_running_loop().create_server(
            lambda: OthersBounded(handler, others), "127.0.0.1", 0
        )
        port = self.server.sockets[0].getsockname()[1]
        self.endpoint = f"127.0.0.1:{port}"

    async def _stop_http(self) -> None:
        self.stream.put_nowait(None)
        server, self.server = self.server, None
        if server is not None:
            server.close()  # (no more connections: those open end with the runner's cleanup)
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.cleanup()

    async def _call(self, request: Any) -> Any:
        from aiohttp import web

        driver = self.driver
        assert driver is not None
        refused = await self._authenticate(web, request, driver)
        if refused is not None:
            return refused
        try:
            call = json.loads(await request.read())
            kind = call["type"]
            if mj.id_value(call.get("executor_id"), "executor_id") != driver.executor_id or (
                mj.id_value(call.get("framework_id"), "framework_id") != driver.framework_id
            ):
                return _problem(web, "not this executor's framework and executor ids", 403)
            if kind == "SUBSCRIBE":
                return await self._subscribe(web, request, driver)
            if kind == "UPDATE":
                status = mj.status_from_mesos(call["update"]["status"])
                await driver.send_status_update(status)
                ack = {"task_id": mj.mesos_id(status.task_id), "uuid": status.uuid}
                self._event("ACKNOWLEDGED", ack)  # the slave has it: it owns getting it on
            elif kind == "MESSAGE":
                await driver.send_framework_message(mj.decode_bytes(call["message"]["data"]))
            else:
                return _problem(web, f"unknown or unserved call type {kind!r}", 400)
        except (ValueError, KeyError, TypeError) as e:
            return _problem(web, f"bad call: {e}", 400)
        except RecursionError:
            return _problem(web, "bad call: JSON nested too deeply", 400)
        return web.Response(status=202)

    async def _authenticate(self, web: Any, request: Any, driver: ExecutorDriver) -> Any:
        """None if the call is this executor's; else the answer that refuses it."""
        header = request.headers.get("Authorization")
        if header is None:
            if await asyncio.to_thread(peer_is_own_user, request.transport):
                return None  # (pymesos: no token, from this executor's user)
            self._refused("mesos_executor.unauthenticated", request)
            return _unauthorized(web, "this executor's API needs its token")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return _unauthorized(web, "Authorization: Bearer <token> expected")
        if hmac.compare_digest(token.encode(), driver.token.encode()):
            return None
        if self.checking >= CHECKS_AT_ONCE:
            self._refused("mesos_executor.checks_busy", request)
            busy = _problem(web, "another token is being checked: try again", 429)
            busy.headers["Retry-After"] = "1"
            return busy
        self.checking += 1
        try:
            holder = await driver.token_holder(token)
        except (TimeoutError, RuntimeError):
            return _problem(web, "the slave did not answer: try again", 503)
        finally:
            self.checking -= 1
        if holder is None:
            self._refused("mesos_executor.bad_token", request)
            return _unauthorized(web, "not a token of this slave's")
        if holder != (driver.framework_id, driver.executor_id):
            self._refused("mesos_executor.other_executors_token", request)
            return _problem(web, "a token of another executor's", 403)
        return None

    def _refused(self, event: str, request: Any) -> None:
        """A line about a refused call, REFUSALS_LOGGED a second at most (any local
        process may send them, and this log is in the tenant's sandbox)."""
        if self._lines.admit(SENDER, time.monotonic()):
            log.warning(event, remote=request.remote, unlogged=self._lines.take_skipped(SENDER))

    async def _subscribe(self, web: Any, request: Any, driver: ExecutorDriver) -> Any:
        live = self.subscriber
        if live is not None and not live.is_closing():
            # one stream: a second reader (another local process that found this port)
            # would take the executor's events
            log.info("mesos_executor.second_subscribe", remote=request.remote)
            return _problem(web, "this executor's stream is open already", 409)
        if live is not None:  # its connection dropped: the new stream takes what waits
            old, self.stream = self.stream, asyncio.Queue()
            for event in self.unsent:
                self.stream.put_nowait(event)
            self.unsent.clear()
            while not old.empty():
                waiting = old.get_nowait()
                if waiting is not None:
                    self.stream.put_nowait(waiting)
            old.put_nowait(None)  # (the old stream's loop ends)
        self.subscriber = request.transport
        return await self._stream(web, request, driver)

    async def _stream(self, web: Any, request: Any, driver: ExecutorDriver) -> Any:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        subscribed = {
            "executor_info": {
                "executor_id": mj.mesos_id(driver.executor_id),
                "framework_id": mj.mesos_id(driver.framework_id),
                "command": {"value": self.command},
            },
            "framework_info": {
                "id": mj.mesos_id(driver.framework_id),
                "name": os.environ.get("DRFMESOS_FRAMEWORK_NAME", ""),
                "user": "",
            },
            "agent_info": {"id": mj.mesos_id(driver.slave_id), "hostname": "localhost"},
        }
        await response.write(_record({"type": "SUBSCRIBED", "subscribed": subscribed}))
        with contextlib.suppress(ConnectionResetError):
            queue = self.stream  # (its own: a later stream takes over a dropped one's)
            while (event := await queue.get()) is not None:
                if request.transport is None or request.transport.is_closing():
                    self.unsent.append(event)  # the connection dropped: for the next stream
                    return response
                await response.write(_record(event))
            await response.write_eof()
        return response


def _record(event: dict[str, Any]) -> bytes:
    return recordio.encode(json.dumps(event, separators=(",", ":")).encode())


def _problem(web: Any, message: str, status: int) -> Any:
    return web.json_response({"error": message}, status=status)


def _unauthorized(web: Any, message: str) -> Any:
    response = _problem(web, message, 401)
    response.headers["WWW-Authenticate"] = 'Bearer realm="mesos-agent-executor"'
    return response


MOST_FROM_OTHERS = 16  # connections from other users' sockets open at once, at most


class Others:
    """How many connections from other users' sockets the executor's API holds open."""

    def __init__(self) -> None:
        self.open = 0


class OthersBounded(asyncio.Protocol):
    """A connection to the executor's API: one from another user's socket (the kernel
    says whose) is served, and refused as each call says (401, 403), while fewer than
    MOST_FROM_OTHERS such are open, and closed as it is taken past that; this executor's
    own user's, root's, and one the kernel cannot place, always. Tasks share the host's loopback:
    another tenant's task held 1,100 idle connections to it, past its 1,024 files, and this
    executor's own calls timed out while its log filled its sandbox with accept()'s
    tracebacks (attack 95)."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], others: Others) -> None:
        self.factory, self.others = factory, others
        self.inner: asyncio.Protocol | None = None
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        uid = peer_uid(transport)
        if uid not in (None, 0, os.geteuid()):  # (root's may do anything: never bounded)
            if self.others.open >= MOST_FROM_OTHERS:
                assert isinstance(transport, asyncio.Transport)
                transport.abort()
                return
            self.others.open += 1
            self.counted = True
        self.inner = self.factory()
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.counted = False
            self.others.open -= 1
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


def main() -> None:
    command = os.environ.get(COMMAND_VARIABLE)
    if not command:
        sys.exit(f"{COMMAND_VARIABLE} must hold the Mesos executor's command")
    logs.configure(os.environ.get("DRFMESOS_LOG_LEVEL", "info"), json=True)
    asyncio.run(ExecutorDriver(MesosExecutorAdapter(command)).run())


if __name__ == "__main__":
    main()
