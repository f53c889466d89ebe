"""Ports held to what the offer gave (Mesos's `network/ports` isolator): a command task
that listens on a port of the slave's `ports` range it was not given is killed, so that
no tenant squats another's service port, takes its traffic, or answers its health check.

Tasks share the host's network namespace, so nothing stops a bind: the slave looks,
every `interval` seconds (Mesos's `--container_ports_watch_interval`), at which TCP ports
each task's processes listen on, in one pass off the event loop: the listening sockets
of /proc/net/tcp and tcp6 (their inodes), and each live process's group and PID
namespace from /proc, then the sockets (`/proc/PID/fd`) of the tasks' processes alone. A
task's processes are its process group and, in a PID namespace of its own, every
process there (one that left the group with `setsid` too), and their children (one in a
group and namespace of its own, `unshare -Urpf setsid`, too); an image task's container
(podman runs it on the host's network, in a PID namespace of its own, outside the task's
group) is found by the pid podman wrote (`Runner.outside_group`), and every process of
its namespace is the task's. In the host's PID namespace a process that double-forked
away is no task's child: its user, a principal's own, says whose it is (`_stop_strays`).

Only the slave's own range is held (Mesos's `--check_agent_port_range_only`), reserved
ports included: a port outside it is no task's to be given, and is left alone. Between
two looks a squatter may answer for a few seconds; UDP and a custom executor's
processes are not looked at.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import PORTS
from slave.config import TaskRecord
from slave.runners import Limit, Runner

LISTEN = "0A"  # a TCP socket's state in /proc/net/tcp: listening
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def listening_sockets(tables: Iterable[str] = TABLES) -> dict[int, int]:
    """The host's listening TCP sockets (v4 and v6): socket inode -> port."""
    found: dict[int, int] = {}
    for table in tables:
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)  # (its header)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[3] == LISTEN:
                    found[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return found


def _process(pid: str) -> tuple[int, str, str] | None:
    """A live process's group, PID namespace and parent, or None (gone, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        namespace = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 3 or fields[0] == "Z":
        return None
    return int(fields[2]), namespace, fields[1]


def _sockets(pid: str) -> set[int]:
    """The socket inodes a process holds open."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


Ports = dict[int, dict[int, set[int]]]  # a task's group (or a user) -> port -> pids


def listened_ports(
    groups: set[int], outside: Mapping[int, Path] | None = None
) -> tuple[Ports, Ports]:
    """The TCP ports the processes of each task (its process group, its own PID
    namespace's processes, and their children) listen on, and the processes that hold
    each: group -> port -> pids. `outside`: a task's file holding the pid of its
    container, whose PID namespace is the task's too (an image's). Second, those of
    strays: processes of no task that run as a task's user (not root's, nor the
    slave's), by user -> port -> pids -- in the host's PID namespace a task's process
    that double-forks (`( setsid server & )`) is re-parented to init, and only its user
    says whose it is (each principal's tasks run as a user of its own). (Blocking: in a
    thread.)"""
    listening = listening_sockets()
    if not listening or not groups:
        return {}, {}
    own = os.readlink("/proc/self/ns/pid")
    processes = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (seen := _process(entry.name)) is not None:
            processes[entry.name] = seen
    # a task's PID namespace: the one its group's processes are in, if not the slave's
    namespaces = {ns: g for g, ns, _ in processes.values() if g in groups and ns != own}
    for group, pid_file in (outside or {}).items():
        if (ns := _namespace_in(pid_file)) is not None and ns != own:
            namespaces[ns] = group
    owners: dict[str, int | None] = {}
    for pid, (group, namespace, _) in processes.items():
        if (owner := group if group in groups else namespaces.get(namespace)) is not None:
            owners[pid] = owner
    ports: Ports = {}
    strays: Ports = {}
    users = _task_users(groups)
    for pid in processes:
        if (owner := _owner(pid, processes, owners)) is not None:
            found = ports.setdefault(owner, {})
        elif users and (user := _user(pid)) in users:
            found = strays.setdefault(user, {})
        else:
            continue
        for port in {listening[i] for i in _sockets(pid) if i in listening}:
            found.setdefault(port, set()).add(int(pid))
    return ports, strays


def _user(pid: int | str) -> int | None:
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}").st_uid
    return None


def _task_users(groups: Iterable[int]) -> set[int]:
    """The users the tasks run as, but root and the slave's own (whose strays may be
    anyone's, the slave's included)."""
    users = {_user(group) for group in groups}
    return {u for u in users if u is not None} - {0, os.geteuid()}


def _owner(
    pid: str, processes: Mapping[str, tuple[int, str, str]], owners: dict[str, int | None]
) -> int | None:
    """The task (its group) a process is of: its own group's or namespace's, else its
    parent's. A process a task started in a group and PID namespace of its own (`unshare
    -Urpf setsid`) is still its child: its namespace's first process is the task's, and
    its orphans are that one's. (`owners`: what is known, filled in as it is learnt.)"""
    chain = []
    while pid not in owners and pid in processes:
        chain.append(pid)
        pid = processes[pid][2]
    owner = owners.get(pid)
    for each in chain:
        owners[each] = owner
    return owner


def _namespace_in(pid_file: Path) -> str | None:
    """The PID namespace of the process whose pid the file holds (None: not yet, or
    gone)."""
    try:
        pid = int(pid_file.read_text().strip())
        return os.readlink(f"/proc/{pid}/ns/pid") if pid > 0 else None
    except (OSError, ValueError):
        return None


def ports_of(discrete: Discrete) -> Ranges:
    value = discrete.whoever(PORTS)  # (reserved ports too: `ports(svc)`)
    return value if isinstance(value, Ranges) else Ranges()


def squatted(listened: set[int], given: Ranges, held: Ranges) -> list[int]:
    """The ports of the slave's range (`held`) a task listens on, not `given` to it."""
    return sorted(p for p in listened if _has(held, p) and not _has(given, p))


def _has(ranges: Ranges, port: int) -> bool:
    return any(begin <= port <= end for begin, end in ranges.spans)


async def enforce_ports(
    tasks: Mapping[tuple[str, str], TaskRecord], slave: Discrete, interval: float, log: Any
) -> None:
    """Every `interval` seconds, until cancelled: kill each command task that listens
    on a port of the slave's range (`slave`'s ports) not given to it, and the processes
    that listen there."""
    held = ports_of(slave)
    while True:
        await asyncio.sleep(interval)
        runners: dict[int, tuple[TaskRecord, Runner]] = {
            r.runner.pid: (r, r.runner)
            for r in tasks.values()
            if r.runner is not None and r.runner.pid and not r.state.terminal
        }
        if not runners or not held:
            continue
        outside = {g: path for g, (_, r) in runners.items() if (path := r.outside_group)}
        listened, strays = await asyncio.to_thread(listened_ports, set(runners), outside)
        if strays:
            await _stop_strays(strays, runners, held, log)
        for group, ports in listened.items():
            record, runner = runners[group]
            given = ports_of(record.info.discrete)
            if bad := squatted(set(ports), given, held):
                named = ", ".join(map(str, bad))
                message = (
                    f"listened on port {named} of the slave's range, not given to it (its "
                    f"ports: {_text(given) or 'none'}): a task listens only "
                    "on the ports its offer gave it ($PORT0, ...)"
                )
                log.warning(
                    "task.port_limit",
                    framework_id=record.framework_id,
                    task_id=record.info.task_id,
                    ports=bad,
                )
                limit = Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message)
                await runner.kill(0.0, limit)
                # and the listeners themselves: one that left the task's group (and, with
                # no PID namespace of the task's, its kill) is its child all the same
                for pid in set().union(*(ports[port] for port in bad)):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)


async def _stop_strays(
    strays: Ports, runners: Mapping[int, tuple[TaskRecord, Runner]], held: Ranges, log: Any
) -> None:
    """A stray listening on a port of the slave's range that none of its user's tasks was
    given is killed; and its task, where its user runs one alone (else which of them
    started it is not known, and none is failed for it)."""
    users = await asyncio.to_thread(lambda: {g: _user(g) for g in runners})
    for user, ports in strays.items():
        theirs = [runners[g] for g, u in users.items() if u == user]
        given = Ranges().joined(ports_of(record.info.discrete) for record, _ in theirs)
        bad = squatted(set(ports), given, held)
        if not bad:
            continue  # (a server its task daemonized, on a port the task was given)
        log.warning("task.port_limit_stray", uid=user, ports=bad, tasks=len(theirs))
        for pid in set().union(*(ports[port] for port in bad)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if len(theirs) == 1:
            [(record, runner)] = theirs
            message = (
                f"a process it left listened on port {', '.join(map(str, bad))} of the "
                f"slave's range, not given to it (its ports: "
                f"{_text(ports_of(record.info.discrete)) or 'none'})"
            )
            await runner.kill(0.0, Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message))


def _text(ranges: Ranges) -> str:
    return ",".join(f"{b}" if b == e else f"{b}-{e}" for b, e in ranges.spans)
