"""Start a whole cluster's processes on this machine, and stop every one of them.

Each party (master, slave, framework) is a `python -m cluster ...` child in a session of
its own, its output in a log file. Stopping goes frameworks first (they tear down, so the
slaves kill their tasks and executors), then slaves, then the master; whatever does not
exit on SIGTERM within the grace period gets SIGKILL. On Linux each child also asks the
kernel to SIGTERM it should this process die without cleaning up.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from protocol import logs
from protocol.tooling.brokers import BrokerURL
from protocol.tooling.credentials import Store
from protocol.transport.aio import within

log = logs.get("launcher")
T = TypeVar("T")

ORDER = {"framework": 0, "slave": 1, "master": 2}
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Party:
    name: str
    kind: str
    proc: asyncio.subprocess.Process
    log_path: Path


class Launcher:
    def __init__(
        self,
        broker: BrokerURL,
        cluster: str,
        run_dir: Path,
        log_level: str = "info",
        store: Store | None = None,
    ):
        """With a credentials `store`, each party connects as its own principal, its secret
        handed over in a file (never on a command line)."""
        self.broker = broker
        self.cluster = cluster
        self.run_dir = run_dir
        self.log_level = log_level
        self.store = store
        self.parties: list[Party] = []

    async def start(self, kind: str, name: str, *args: str, principal: str | None = None) -> Party:
        """Start `drfmesos <kind> ...` (kind: master, slave or framework) as `principal`
        (default: `name`) when the launcher has a credentials store."""
        logs_dir = self.run_dir / "logs"
        await asyncio.to_thread(logs_dir.mkdir, parents=True, exist_ok=True)
        log_path = logs_dir / f"{name}.log"
        out = await asyncio.to_thread(open, log_path, "ab")
        command = list(args)
        common = self._common(principal or name)
        if kind == "framework":
            command = [command[0], *common, *command[1:]]
        else:
            command = [*command, *common]
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "cluster",
                kind,
                *command,
                stdout=out,
                stderr=out,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches us; we stop them in order
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            out.close()
        party = Party(name, kind, proc, log_path)
        self.parties.append(party)
        log.info("party.started", party=name, kind=kind, pid=proc.pid)
        return party

    def _common(self, principal: str) -> list[str]:
        broker = ["--broker", self.broker.url]
        if self.store is not None:
            broker = [
                "--broker",
                f"{self.broker.scheme}://{principal}@{self.broker.host}:{self.broker.port}",
                "--secret-file",
                str(self.store.secret_file(principal)),
            ]
        if self.broker.ca:
            broker += ["--ca", self.broker.ca]
        return [
            *broker,
            "--cluster",
            self.cluster,
            "--log-level",
            self.log_level,
        ]

    async def watch(self, work: Awaitable[T]) -> T:
        """Await `work`, but fail at once if a party exits while we wait for it."""
        task = asyncio.ensure_future(work)
        exits = {asyncio.ensure_future(p.proc.wait()): p for p in self.parties}
        try:
            done, _ = await asyncio.wait({task, *exits}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in exits:
                w.cancel()
        if task in done:
            return task.result()
        task.cancel()
        party = next(p for w, p in exits.items() if w in done)
        raise RuntimeError(
            f"{party.name} exited with {party.proc.returncode}; see {party.log_path}"
        )

    def failed(self) -> list[Party]:
        """Parties that exited with an error while they should be running."""
        return [p for p in self.parties if p.proc.returncode not in (None, 0)]

    async def stop(self, party: Party, grace: float = 10.0) -> None:
        proc = party.proc
        if proc.returncode is None:
            # a slave is shut down as a Mesos agent is on SIGUSR1: its tasks end with it
            # (on SIGTERM they run on for its next start to recover)
            stop_signal = signal.SIGUSR1 if party.kind == "slave" else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(stop_signal)
            try:
                await within(proc.wait(), grace)
            except TimeoutError:
                log.warning("party.kill", party=party.name)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything it left in its session

    async def stop_all(self, grace: float = 10.0) -> None:
        for kind in sorted(ORDER, key=ORDER.__getitem__):
            group = [p for p in self.parties if p.kind == kind]
            await asyncio.gather(*(self.stop(p, grace) for p in group))
        self.parties = []
