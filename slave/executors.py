"""Custom executors: a framework's executor program, started once per framework per slave.

The slave starts the executor's command with a private line to itself in its environment
(`protocol.transport.channel`: one end of a socketpair, `DRFMESOS_EXECUTOR_FD`); the executor (see
`frameworks.ExecutorDriver`) sends `RegisterExecutor` over it, and from then on receives
its tasks and sends status updates on the same line. It never touches the cluster's bus,
so it needs no credentials and can speak only for itself. Messages for an executor that
has not registered yet wait in a queue (the slave's own: its tasks, their kills).

An executor is a tenant's program, and need neither register nor read: its framework's
messages for it (up to 4 MiB each, at the master's rate) would pile up in the slave, the
process that holds every tenant's tasks here. So a framework's message for an executor
that has not registered is dropped, as a Mesos agent drops it (framework messages are
best effort), and one for an executor that does not read is dropped once MAX_WAITING
bytes are written to it and not read. One that has not registered within its
registration timeout (Mesos's --executor_registration_timeout, a minute) is killed, and
its tasks fail with REASON_EXECUTOR_REGISTRATION_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from protocol.transport.aio import cancel_and_wait, within
from protocol.transport.channel import Channel, ChannelClosed
from protocol.wire.codec import DecodeError
from protocol.wire.messages import ExecutorInfo, FrameworkMessage, ShutdownExecutor, Wire
from slave.confine import UNCONFINED, Confinement
from slave.isolator import Container, group_ended
from slave.sandbox import spawn_in_sandbox
from slave.task_users import TaskUser

ExitCallback = Callable[["ExecutorProcess", int], Awaitable[None]]
MessageCallback = Callable[["ExecutorProcess", Wire], Awaitable[None]]
ErrorCallback = Callable[["ExecutorProcess", DecodeError], Awaitable[None]]

GROUP_ENDS_WITHIN = 5.0  # seconds an executor's end waits for what it started to die
# seconds a paced executor's end waits for what it wrote before it to be read (a socket
# buffer's worth at most, unpaced once it has exited: slave.executor_side)
LINE_READ_WITHIN = 10.0
MAX_WAITING = 16 * 1024 * 1024  # bytes of framework messages waiting for one executor
ANSWER_MOST = 4096  # bytes of an answer to an executor's ask at most (its ids are bounded)
REGISTRATION_TIMEOUT = 60.0  # seconds, as Mesos's --executor_registration_timeout


class ExecutorProcess:
    def __init__(
        self,
        framework_id: str,
        info: ExecutorInfo,
        sandbox: Path,
        env: dict[str, str],
        on_message: MessageCallback,
        on_bad_message: ErrorCallback,
        on_exit: ExitCallback,
        user: TaskUser | None = None,
        confinement: Confinement = UNCONFINED,
        principal: str = "",
        registration_timeout: float = REGISTRATION_TIMEOUT,
    ) -> None:
        """`env`: its whole environment (slave.task_env); `user`: the user it runs as
        (None: the slave's own), confined as `confinement` says; `principal`: its
        framework's, as the master named it in the launch; `registration_timeout`: it is
        killed if it has not registered this long after its start (0: never)."""
        self.framework_id, self.principal = framework_id, principal
        self.user, self.confinement = user, confinement
        self.info = info
        self.sandbox = sandbox
        self.env = env
        self.on_message = on_message
        self.on_bad_message = on_bad_message
        self.on_exit = on_exit
        self.tasks: set[str] = set()
        self.registered = False
        self.shutting_down = False
        self.broken: str | None = None  # why its line to us failed, if it did
        self.registration_timeout = registration_timeout
        self.timed_out = False  # killed for not registering in time
        # one of its messages waited its principal's pace (slave.message_budget):
        # what it wrote may still be in its line when it exits
        self.paced = False
        self._queue: list[Wire] = []  # (the slave's own: its tasks, their kills)
        self._timer: asyncio.TimerHandle | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._channel: Channel | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self.container: Container | None = None  # its cgroup, holding it and its tasks

    @property
    def executor_id(self) -> str:
        return self.info.executor_id

    @property
    def key(self) -> tuple[str, str]:
        """(framework id, executor id): its key at the slave, by structure (two ids
        joined by a character they may hold would let one framework name another's)."""
        return (self.framework_id, self.executor_id)

    @property
    def exited(self) -> bool:
        """Its process has ended (what it wrote before may be unread yet)."""
        return self._proc is not None and self._proc.returncode is not None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            join, join_env = "", dict[str, str]()
            if self.container is not None:
                join, join_env = self.container.join()
            start = self.confinement.executor(
                self.info.command.value,
                self.user,
                {**self.env, "DRFMESOS_EXECUTOR_FD": str(theirs.fileno())},
                (join, join_env),
            )
            self._proc = await spawn_in_sandbox(
                start.args,
                self.sandbox,
                start.env,
                pass_fds=(theirs.fileno(),),
                owner=self.user,
                script=start.script,
                private_tmp=start.private_tmp,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the child holds its own copy
        self._channel = await Channel.open(ours)
        self._reader = asyncio.create_task(self._read(self._channel))
        self._watcher = asyncio.create_task(self._watch())
        if self.registration_timeout > 0:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.registration_timeout, self._registration_due)

    def _registration_due(self) -> None:
        """Not registered in time: killed (as Mesos destroys its container)."""
        if not self.registered and not self.shutting_down:
            self.timed_out = self.stop(
                f"it did not register within {self.registration_timeout:g} s"
            )

    def stop(self, why: str) -> bool:
        """Kill it now, for `why` (its exit reported by `_watch`, its tasks failed with
        that); False if it is ending already."""
        proc = self._proc
        if self.broken is not None or proc is None or proc.returncode is not None:
            return False
        self.broken = why
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return True

    async def _read(self, channel: Channel) -> None:
        while True:
            try:
                item = await channel.receive()
            except ChannelClosed as e:
                # Its line is gone (the process is ending, or it broke the framing): an
                # executor we cannot hear from cannot report its tasks, so it is stopped.
                proc = self._proc
                if proc is not None and proc.returncode is None and not self.shutting_down:
                    self.broken = self.broken or str(e)  # (a timeout's kill said first)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                return  # _watch reports its exit
            if isinstance(item, DecodeError):
                await self.on_bad_message(self, item)
            else:
                await self.on_message(self, item.message)

    async def _watch(self) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        # whatever it started dies with it: no orphans outlive an executor
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        # (its end is reported once they are gone, as Mesos destroys the container first)
        await group_ended(self._proc.pid, timeout=GROUP_ENDS_WITHIN)
        # what it said before it exited is heard before its exit: a paced line is read to
        # its end (its writers are gone; no longer paced, `exited`). Else its last
        # FINISHED was still in the line, and its task failed for the exit (review86)
        if self._reader is not None and self.paced:
            await asyncio.wait({self._reader}, timeout=LINE_READ_WITHIN)
        try:
            await self.on_exit(self, code)
        finally:
            if self._channel is not None:
                await self._channel.close()

    def send(self, message: Wire) -> None:
        if self.registered:
            self._send_now(message)
        else:
            self._queue.append(message)

    def send_framework_message(self, message: FrameworkMessage) -> str | None:
        """Pass on its framework's message; or why it is dropped: it has not registered
        (as a Mesos agent drops it: nothing of a tenant's waits in the slave for a
        program that may never ask), or MAX_WAITING bytes wait for it already, written
        and not read."""
        if not self.registered:
            return "the executor has not registered"
        if self._channel is not None and self._channel.buffered() + len(message.data) > MAX_WAITING:
            return f"over {MAX_WAITING // 2**20} MiB wait for the executor, which does not read"
        self._send_now(message)
        return None

    def send_now(self, message: Wire) -> None:
        """Send even before it registered (what it asks on its way to registering)."""
        self._send_now(message)

    def answer(self, message: Wire) -> str | None:
        """Answer what it asked, registered or not, unless MAX_WAITING bytes wait for it
        already, written and not read: then why it is dropped. An executor that asks and
        never reads would have the slave hold every answer (attack 84: 45 MiB in 5 s)."""
        if self._channel is not None and self._channel.buffered() + ANSWER_MOST > MAX_WAITING:
            return f"over {MAX_WAITING // 2**20} MiB wait for the executor, which does not read"
        self._send_now(message)
        return None

    def _send_now(self, message: Wire) -> None:
        if self._channel is not None:
            with contextlib.suppress(ChannelClosed):
                self._channel.send(message)

    def mark_registered(self, greeting: Wire) -> None:
        """Registered: say `greeting` first, then what waited for it, in order."""
        self.registered = True
        if self._timer is not None:
            self._timer.cancel()
        self._send_now(greeting)
        queued, self._queue = self._queue, []
        for message in queued:
            self._send_now(message)

    async def shutdown(self, grace: float, at_most: float | None = None) -> None:
        """Ask it to stop, then SIGTERM and SIGKILL its process group if it does not,
        `grace` after each. `at_most` (a drain's cap): SIGKILL no later than that, all
        waits together, and none for an answer from one never registered (nothing was
        asked of it)."""
        self.shutting_down = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        asked = self.registered
        if asked:
            self._send_now(
                ShutdownExecutor(framework_id=self.framework_id, executor_id=self.executor_id)
            )
        loop = asyncio.get_running_loop()
        deadline = None if at_most is None else loop.time() + at_most
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is None and not asked and deadline is not None:
                continue
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            wait = grace
            if deadline is not None and sig is not signal.SIGKILL:
                wait = max(0.0, min(grace, deadline - loop.time()))
            try:
                await within(asyncio.shield(proc.wait()), wait)
                return
            except TimeoutError:
                continue

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for task in (self._watcher, self._reader):
            if task is not None:
                await cancel_and_wait(task)
        if self._channel is not None:
            await self._channel.close()
