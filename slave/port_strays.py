"""Listeners of no task: what the ports isolator does with a process that no task's group
or PID namespace holds, in the host's PID namespace, running as a principal's user.

A task's process that double-forks (`( setsid server & )`) is re-parented to init and is
no task's child; it may outlive its task. Where each principal's tasks run as a user of
its own (`--switch-user`), its user says whose it is. So a stray listening on a port of
the slave's range that none of its user's live tasks (command tasks, and those of its
custom executors) was given is killed, and so is its task where its user runs one
command task alone and no executor, and the stray started after it (else which started
it is not known, and none is failed for it). A user with no live task here is given no
port: its leftovers' listeners go too. A server a task daemonized on a port one of its
user's tasks was given serves on. A custom executor's own processes (its group and their
children) are never strays: they are held to its live tasks' ports (`given_to_executor`).
After a restart the slave knows no principal's user until asked: the recovered tasks'
are looked up before strays are judged.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from protocol.wire.discrete import Ranges
from protocol.wire.messages import Reason, TaskState
from slave.config import TaskRecord
from slave.executors import ExecutorProcess
from slave.ports_isolator import Looked, kill_listeners, ports_of, squatted, started, text
from slave.runners import Limit, Runner
from slave.task_users import TaskUsers


class Strays:
    """Who is a principal's user on this slave, and what its users were given."""

    def __init__(
        self,
        tasks: Mapping[tuple[str, str], TaskRecord],
        executors: Mapping[tuple[str, str], ExecutorProcess],
        users: TaskUsers,
    ) -> None:
        """`users`: who a principal's tasks run as (a user each), and whether a user is
        a principal's (never root, nor the slave's own)."""
        self.tasks, self.executors, self.users = tasks, executors, users
        self._own = {0, os.geteuid()}

    def _uid_of(self, principal: str) -> int | None:
        user = self.users.known(principal)
        return user.uid if user is not None else None

    def tenant(self, uid: int) -> bool:
        return uid not in self._own and self.users.is_tenant(uid)

    def executor_groups(self) -> dict[int, str]:
        """Each live executor's process group, and its principal."""
        return {pid: e.principal for e in self.executors.values() if (pid := e.pid)}

    def given_to_executor(self, group: int) -> Ranges:
        """The ports an executor (its process group) may listen on: its live tasks'
        (Mesos's ports isolator holds its container to them)."""
        for key, e in self.executors.items():
            if e.pid == group:
                spans = [
                    ports_of(r.info.discrete)
                    for t in e.tasks
                    if (r := self.tasks.get((key[0], t))) is not None and not r.state.terminal
                ]
                return Ranges().joined(spans)
        return Ranges()

    def _learn(self) -> None:
        """The users of the principals of the live tasks, looked up where not known yet
        (after a restart the slave knows none until it launches again): else their own
        ports would be nobody's. (Blocking, the first time: in a thread.)"""
        for r in self.tasks.values():
            if not r.state.terminal and self.users.known(r.principal) is None:
                self.users.look_up(r.principal)

    def _given(self, uid: int) -> Ranges:
        """The ports the live tasks of `uid`'s principal were given, executors' too."""
        spans = [
            ports_of(r.info.discrete)
            for r in self.tasks.values()
            if not r.state.terminal and self._uid_of(r.principal) == uid
        ]
        return Ranges().joined(spans)

    async def stop(
        self,
        looked: Looked,
        runners: Mapping[int, tuple[TaskRecord, Runner]],
        held: Ranges,
        log: Any,
    ) -> None:
        await asyncio.to_thread(self._learn)
        for uid, ports in looked.strays.items():
            bad = squatted(set(ports), self._given(uid), held)
            if not bad:
                continue
            log.warning("task.port_limit_stray", uid=uid, ports=bad)
            kill_listeners(ports, bad, looked.pidfds)
            theirs = [rr for rr in runners.values() if self._uid_of(rr[0].principal) == uid]
            executors = any(
                e.user is not None and e.user.uid == uid for e in self.executors.values()
            )
            pids = set().union(*(ports[port] for port in bad))
            if len(theirs) == 1 and not executors and _after(pids, theirs[0][1].pid):
                [(record, runner)] = theirs
                given = text(ports_of(record.info.discrete)) or "none"
                message = (
                    f"a process it left listened on port {', '.join(map(str, bad))} of the "
                    f"slave's range, not given to it (its ports: {given})"
                )
                limit = Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message)
                await runner.kill(0.0, limit)


def _after(pids: set[int], task: int | None) -> bool:
    """Whether every one of `pids` started after the task's process (one started before
    it cannot be its: a daemon another task of its user left, say)."""
    since = started(task) if task is not None else None
    if since is None:
        return False
    return all((start := started(pid)) is not None and start >= since for pid in pids)
