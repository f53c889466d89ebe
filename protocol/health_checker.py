"""Running a task's health check (protocol.wire.health), as Mesos's command and default
executors do: the probes and the loop that turns their answers into verdicts and a kill.
Shared by both that run checks: the slave for its command tasks (slave.health_checks)
and the SDK's executor driver for its executor's tasks (frameworks.executor_health).

- HTTP and TCP checks connect to 127.0.0.1:PORT (a task shares its slave's network).
- A COMMAND check is a process in a session of its own, killed with all it started when
  its timeout passes; who runs it decides where and as whom (`command_probe`).
- A verdict goes to `said` when it changes; after `consecutive_failures` failures in a
  row, the last one goes to `failed` (which kills the task). Failures in the grace
  period, before a first success, do not count.
- A check that cannot be run (its probe raises: EAGAIN on fork, EMFILE) is a failure,
  as Mesos counts a check it could not launch; the checking goes on.
- Where the checks are (`CheckState`: since when, the verdict, the failures in a row)
  is its runner's to keep: a slave keeps it with its task, and a restarted slave's
  checks go on from there (Mesos's checker, in the command executor, outlives its
  agent): a failing task is not given its failures back, nor its grace period again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.transport.aio import cancel_and_wait
from protocol.wire.health import CommandCheck, HealthCheck, HealthCheckType

Probe = Callable[[], Awaitable[str | None]]
"""One check: None if healthy, else why not (a sentence for people)."""


async def http_probe(port: int, path: str, timeout: float) -> str | None:
    """Healthy: an answer of 200-399 (Mesos's rule) to a GET, redirects not followed.

    Only the answer's status line is read, on asyncio's streams, all of it within the
    check's timeout: a slave installed lean has no HTTP client library, and the stdlib's
    blocks (in a thread, a server that answers a byte at a time would hold it past the
    timeout, and then the next check's). `path` is printable ASCII without spaces
    (protocol.wire.health): it cannot break the request line."""
    url = f"http://127.0.0.1:{port}{path}"
    request = f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: drfmesos\r\n\r\n"
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
            try:
                writer.write(request.encode("ascii"))
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
    except TimeoutError:
        return f"GET {url}: no answer in {timeout:g} s"
    except (OSError, ValueError) as e:  # (ValueError: a status line over the limit)
        return f"GET {url} failed: {getattr(e, 'strerror', None) or e}"
    version, _, rest = line.decode("latin-1").partition(" ")
    code = rest[:3]  # three ASCII digits (str.isdigit takes "\xb2", which int() refuses)
    if (
        not version.startswith("HTTP/")
        or len(code) != 3
        or not code.isascii()
        or not code.isdigit()
    ):
        return f"GET {url}: not an HTTP answer"
    if 200 <= int(code) < 400:
        return None
    return f"GET {url} answered {code}"


async def tcp_probe(port: int, timeout: float) -> str | None:
    """Healthy: a connection to the port accepted."""
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
    except TimeoutError:
        return f"no connection to port {port} in {timeout:g} s"
    except OSError as e:
        return f"no connection to port {port}: {e.strerror or e}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def command_probe(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    script: bytes = b"",
    first: Callable[[], None] | None = None,
) -> str | None:
    """Healthy: `args` (given `script` on stdin) exits 0 within `timeout`. It runs in a
    session of its own: all it started goes with it when it is killed. `first`: what
    its process runs before its exec (a slave's: a session keyring of its own)."""
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=first,
    )
    try:
        async with asyncio.timeout(timeout):
            assert proc.stdin is not None
            with contextlib.suppress(ConnectionError):  # (it ended first: its code says)
                proc.stdin.write(script)
                await proc.stdin.drain()
            proc.stdin.close()
            code = await proc.wait()
    except TimeoutError:
        return f"the command took over {timeout:g} s"
    finally:
        if proc.returncode is None:  # (timed out, or cancelled: not reaped, so ours)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.shield(proc.wait())
    return None if code == 0 else f"the command exited with code {code}"


def probe_for(check: HealthCheck, command: Callable[[CommandCheck, float], Probe]) -> Probe:
    """The probe of `check`; a COMMAND check's made by `command` (its check, its timeout),
    as its runner runs commands."""
    timeout = check.timeout_seconds
    if check.type == HealthCheckType.HTTP:
        assert check.http is not None
        http = check.http
        return lambda: http_probe(http.port, http.path, timeout)
    if check.type == HealthCheckType.TCP:
        assert check.tcp is not None
        port = check.tcp.port
        return lambda: tcp_probe(port, timeout)
    assert check.command is not None
    return command(check.command, timeout)


Said = Callable[[bool, str], Awaitable[None]]
Failed = Callable[[str], Awaitable[None]]
Kept = Callable[["CheckState"], Awaitable[None]]


@dataclass
class CheckState:
    """Where a task's checks are: since when it is checked (the wall clock: its delay
    and grace period run from there, across a restart of its runner), its last verdict
    and its failures in a row."""

    since: float = field(default_factory=time.time)
    healthy: bool | None = None
    failures: int = 0


async def _not_kept(_: CheckState) -> None:
    pass


async def _checked(probe: Probe, log: Any) -> str | None:
    """`probe`'s answer; one that raised (it could not start) is a failed check, said
    with the error's words: an OSError's strerror (not its filename), or the first of
    another error's."""
    try:
        return await probe()
    except Exception as e:
        words = getattr(e, "strerror", None) or str(e)[:200] or type(e).__name__
        log.warning("health.check_not_run", error=type(e).__name__, why=words)
        return f"the check could not be run: {words}"


async def check_health(
    check: HealthCheck,
    probe: Probe,
    said: Said,
    failed: Failed,
    log: Any,
    state: CheckState | None = None,
    kept: Kept = _not_kept,
) -> None:
    """Check a task until its failures kill it (or this is cancelled): its verdict to
    `said` when it changes, the last failure to `failed` when it is one too many.
    `state`: where its checks were (a restarted slave's), else a start; `kept` is
    given it when its failures in a row change (a verdict goes to `said`)."""
    state = state or CheckState()
    await asyncio.sleep(max(0.0, state.since + check.delay_seconds - time.time()))
    while True:
        why = await _checked(probe, log)
        if why is None:
            if state.failures:
                state.failures = 0
                await kept(state)
            if state.healthy is not True:
                state.healthy = True
                await said(True, "its health check passed")
        elif state.healthy is None and time.time() - state.since < check.grace_period_seconds:
            pass  # (still in its grace period, not yet healthy: it may be starting)
        else:
            state.failures += 1
            if state.healthy is not False:
                state.healthy = False
                await said(False, f"its health check failed: {why}")
            else:
                await kept(state)
            if state.failures >= check.consecutive_failures:
                await failed(f"its health check failed {state.failures} times in a row: {why}")
                return
        await asyncio.sleep(check.interval_seconds)


class HealthChecks:
    """The checks running, by task (framework id, task id)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self._running: dict[tuple[str, str], asyncio.Task[None]] = {}

    def start(
        self,
        key: tuple[str, str],
        check: HealthCheck,
        probe: Probe,
        said: Said,
        failed: Failed,
        state: CheckState | None = None,
        kept: Kept = _not_kept,
    ) -> None:
        """Check a task (see check_health)."""
        self.stop(key)
        log = self.log.bind(framework_id=key[0], task_id=key[1])
        checking = check_health(check, probe, said, failed, log, state, kept)
        task = asyncio.create_task(checking, name=f"health-{key}")
        self._running[key] = task
        task.add_done_callback(lambda done: self._ended(key, done))

    def _ended(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        if not task.cancelled() and (error := task.exception()) is not None:
            self.log.error(
                "health.check_failed", framework_id=key[0], task_id=key[1], error=repr(error)
            )

    def stop(self, key: tuple[str, str]) -> None:
        """No more checks of this task (it ended, or is being killed)."""
        task = self._running.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._running

    async def close(self) -> None:
        for task in list(self._running.values()):
            await cancel_and_wait(task)
        self._running.clear()
