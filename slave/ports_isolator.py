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
away is no task's child: its user, a principal's own, says whose it is (slave.port_strays).

Only the slave's own range is held (Mesos's `--check_agent_port_range_only`), reserved
ports included: a port outside it is no task's to be given. But the ports outside it
(the kernel's ephemeral range among them, where every connection's own end comes from)
are every tenant's: a task that holds more than MOST_OTHER_PORTS of them at a look
(bound or listening: a task that bound the whole ephemeral range left no one a
connection), or whose principal's tasks together hold more than
MOST_PRINCIPAL_OTHER_PORTS (its biggest holders), is killed, REASON_CONTAINER_LIMITATION,
and an executor's holders of more than MOST_OTHER_PORTS are. Between
two looks a squatter may answer for a few seconds; UDP is not looked at, nor a socket no
process holds at the look (in flight over a unix socket), nor, before Linux 6.10, one
bound and neither listening nor connected (`bound_sockets`). A custom executor's processes
are held to its live tasks' ports (its listeners elsewhere killed, it left running).
A look reads each distinct descriptor table of a process once (`fd_tables`), and at most
MOST_DESCRIPTORS of one principal's tasks and executors (one stray user's processes): the
processes past them are killed unread, and their task failed, so no tenant makes a look
long for everyone (a tenant with many tasks included).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.messages import Reason, TaskState
from protocol.wire.resources import PORTS
from slave.bound_sockets import bound_inactive
from slave.config import TaskRecord
from slave.fd_tables import comparable, distinct_tables
from slave.runners import Limit, Runner

LISTEN = "0A"  # a TCP socket's state in /proc/net/tcp: listening
TIME_WAIT = "06"  # (held by no process: the kernel's, for a while)
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
EPHEMERAL = "/proc/sys/net/ipv4/ip_local_port_range"
MOST_OTHER_PORTS = 1_024  # a task's ports outside the slave's range and its own, at most
MOST_PRINCIPAL_OTHER_PORTS = 4 * MOST_OTHER_PORTS  # a principal's tasks' together
# descriptors a look reads of one principal's tasks and executors (of one user's strays),
# in all: past it the rest are not read and their processes are killed (their task
# failed), so no tenant's processes make a look long for everyone (about 1 s of the
# slave's CPU at most, a tenant)
MOST_DESCRIPTORS = 400_000
MOST_HELD_UNREAD = 256  # processes past it held to be killed, a task a look (pidfds)


def listening_sockets(tables: Iterable[str] = TABLES) -> dict[int, int]:
    """The host's TCP sockets that hold a port (v4 and v6): socket inode -> port. Those
    listening, and those bound and neither listening nor connected (in no table:
    `bound_sockets`, Linux 6.10+), wherever their port is: each holds its port from
    every other bind and every connection's own end, the kernel's ephemeral ones
    included; and, on a port outside the ephemeral ones (where a connection's own end
    never lands by chance), those in any other state but TIME_WAIT: a connection made
    from a port of the range holds it as a listener does."""
    low, high = _ephemeral()
    found = bound_inactive()
    for table in tables:
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)  # (its header)
            for line in f:
                fields = line.split()
                if len(fields) <= 9 or fields[3] == TIME_WAIT:
                    continue
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if fields[3] == LISTEN or not low <= port <= high:
                    found[int(fields[9])] = port
    return found


def _ephemeral() -> tuple[int, int]:
    with contextlib.suppress(OSError, ValueError), open(EPHEMERAL) as f:
        low, high = (int(v) for v in f.read().split())
        return low, high
    return 32768, 60999  # (Linux's default)


def _stat(path: str) -> list[str]:
    """A `stat` file's fields after the command's name (which may hold spaces), from its
    state on ([]: the process or thread is gone)."""
    try:
        with open(path) as f:
            stat = f.read()
    except OSError:
        return []
    return stat[stat.rfind(")") + 2 :].split()


Process = tuple[int, str, str, int]  # a live process's group, PID namespace, parent, start


def _process(pid: str) -> Process | None:
    """A live process's group, PID namespace, parent and start (clock ticks since boot),
    or None (gone, or a zombie: one whose main thread alone has exited lives on in its
    other threads)."""
    fields = _stat(f"/proc/{pid}/stat")
    try:
        namespace = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None
    if len(fields) < 20 or (fields[0] == "Z" and not _lives_on(pid)):
        return None
    return int(fields[2]), namespace, fields[1], int(fields[19])


def _lives_on(pid: str) -> bool:
    """Whether a thread of the process other than its main one has not exited."""
    with contextlib.suppress(OSError):
        threads = os.listdir(f"/proc/{pid}/task")
        return any(_stat(f"/proc/{pid}/task/{t}/stat")[:1] not in ([], ["Z"]) for t in threads)
    return False


def started(pid: int | str) -> int | None:
    """When a process started, in clock ticks since boot (None: it is gone)."""
    fields = _stat(f"/proc/{pid}/stat")
    return int(fields[19]) if len(fields) > 19 else None


def real_uid(pid: int | str) -> int | None:
    """A process's real user (its status's `Uid:`; /proc/PID's owner turns root's for a
    process that makes itself undumpable)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


def _sockets(pid: str, allowance: int) -> tuple[set[int], int]:
    """The socket inodes a process holds open, and what reading them cost (descriptors
    read, tables opened, threads compared): in each table its threads have where they
    have several (a thread may have one of its own, `unshare(CLONE_FILES)`; `fd_tables`).
    A table is read through one of its threads, the next one's where that one has exited
    by the end of the read (a leader that exited reads empty). It stops once the cost
    passes `allowance`: then not all were read. Where the kernel cannot tell the tables
    apart, each thread's is read and the first alone charged (a thread's read is the
    process's: a JVM's 200 threads are no 200 tables)."""
    tables, cost, told = [[pid]], 0, True
    with contextlib.suppress(OSError, ValueError):
        threads = os.listdir(f"/proc/{pid}/task")
        if len(threads) > 1:
            tables_of, cost, told = distinct_tables([int(t) for t in threads], allowance)
            tables = [[f"{pid}/task/{tid}" for tid in table] for table in tables_of]
    inodes: set[int] = set()
    for i, table in enumerate(tables):
        for where in table:  # (its threads: the next read where one has exited)
            read = _read_table(f"/proc/{where}", inodes, allowance - cost)
            if told or i == 0:
                cost += read
            if cost > allowance:
                return inodes, cost
            if where == table[-1] or _stat(f"/proc/{where}/stat")[:1] not in ([], ["Z"]):
                break  # (read whole by a thread alive at its end, or no other to read by)
    return inodes, cost


def _read_table(where: str, inodes: set[int], allowance: int) -> int:
    """The sockets of one thread's (or process's) table into `inodes`; what that cost,
    one past `allowance` where it stopped there (entries read as they are listed: a
    table of a million is not listed whole first)."""
    cost = 1
    with contextlib.suppress(OSError), os.scandir(f"{where}/fd") as entries:
        for entry in entries:
            cost += 1
            if cost > allowance:
                return cost
            with contextlib.suppress(OSError):
                target = os.readlink(entry.path)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return cost


Ports = dict[int, dict[int, set[int]]]  # a task's group (or a user) -> port -> pids


@dataclass
class Looked:
    """What a look found: each task's ports and each stray user's, and a pidfd of each
    process found holding one, opened at the look, so that a kill after it reaches that
    process or none (its pid, freed meanwhile, may be another's by then). Close it."""

    ports: Ports = field(default_factory=dict)
    strays: Ports = field(default_factory=dict)
    pidfds: dict[int, int] = field(default_factory=dict)
    # the processes past their task's (or user's) MOST_DESCRIPTORS, not read: by group
    # (a task's or an executor's), and by a stray's user
    unread: dict[int, set[int]] = field(default_factory=dict)
    unread_strays: dict[int, set[int]] = field(default_factory=dict)

    def hold(self, pid: int, start: int) -> None:
        """A pidfd of the process `pid` that started at `start` (none if it is gone, or
        its pid is another's by now: the look read it a while ago)."""
        if pid in self.pidfds:
            return
        with contextlib.suppress(OSError):  # (gone already: nothing to kill)
            fd = os.pidfd_open(pid)
            if started(pid) == start:  # (read once the pidfd holds the process)
                self.pidfds[pid] = fd
            else:
                os.close(fd)

    def close(self) -> None:
        for fd in self.pidfds.values():
            os.close(fd)
        self.pidfds.clear()


def listened_ports(
    groups: set[int],
    outside: Mapping[int, Path] | None = None,
    tenant: Callable[[int], bool] | None = None,
    principal_of: Mapping[int, str] | None = None,
) -> Looked:
    """The TCP ports the processes of each task (its process group, its own PID
    namespace's processes, and their children) listen on, and the processes that hold
    each: group -> port -> pids. `outside`: a task's file holding the pid of its
    container, whose PID namespace is the task's too (an image's). Second, those of
    strays: processes of no group that run as a user `tenant` says is a principal's
    (slave.port_strays), by user -> port -> pids. The descriptors read are bounded by
    principal (`principal_of` a group's; a group of none, by itself) and by stray user:
    the processes past MOST_DESCRIPTORS are not read (`Looked.unread`). (Blocking: in a
    thread.)"""
    principal_of = principal_of or {}
    listening = listening_sockets()
    looked = Looked()
    if not listening or not (groups or tenant):
        return looked
    own = os.readlink("/proc/self/ns/pid")
    processes = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (seen := _process(entry.name)) is not None:
            processes[entry.name] = seen
    # a task's PID namespace: the one its group's processes are in, if not the slave's
    namespaces = {ns: g for g, ns, _, _ in processes.values() if g in groups and ns != own}
    for group, pid_file in (outside or {}).items():
        if (ns := _namespace_in(pid_file)) is not None and ns != own:
            namespaces[ns] = group
    owners: dict[str, int | None] = {}
    for pid, (group, namespace, _, _) in processes.items():
        if (owner := group if group in groups else namespaces.get(namespace)) is not None:
            owners[pid] = owner
    ports, strays = looked.ports, looked.strays
    uids: dict[str, int | None] = {}  # (read once a pass, as asked)
    spent: dict[str, int] = {}  # descriptors read: each principal's, each stray user's
    for pid in processes:
        start = processes[pid][3]
        if (owner := _owner(pid, processes, owners)) is not None:
            found, unread, key = ports.setdefault(owner, {}), looked.unread, owner
            budget = f"principal {principal_of[owner]}" if owner in principal_of else f"{owner}"
        elif tenant is not None and (user := _orphan_of(pid, processes, tenant, uids)):
            found, unread, key = strays.setdefault(user, {}), looked.unread_strays, user
            budget = f"user {user}"
        else:
            continue
        left = MOST_DESCRIPTORS - spent.get(budget, 0)
        sockets, cost = _sockets(pid, left) if left > 0 else (set(), 1)
        spent[budget] = spent.get(budget, 0) + cost
        if cost > left:  # (not all of its sockets read: killed, not judged in part)
            (past := unread.setdefault(key, set())).add(int(pid))
            if len(past) <= MOST_HELD_UNREAD:  # (the rest: with its task, or next look)
                looked.hold(int(pid), start)
        held = {listening[i] for i in sockets if i in listening}
        for port in held:
            found.setdefault(port, set()).add(int(pid))
        if held:
            looked.hold(int(pid), start)
    return looked


def _orphan_of(
    pid: str,
    processes: Mapping[str, Process],
    tenant: Callable[[int], bool],
    uids: dict[str, int | None],
) -> int | None:
    """The principal's user a stray runs as, or None: a stray is a process of a
    principal's user whose line of such processes goes up to init (a double fork's
    server, and what it started). One whose line meets another process first (another
    slave's task on this host, under that slave's wrapper) is not this slave's to judge."""
    user = _uid(pid, uids)
    if user is None or not tenant(user):
        return None
    seen = 0
    while (parent := processes[pid][2]) != "1":
        up = _uid(parent, uids) if parent in processes else None
        if up is None or not tenant(up) or (seen := seen + 1) > len(processes):
            return None
        pid = parent
    return user


def _uid(pid: str, uids: dict[str, int | None]) -> int | None:
    if pid not in uids:
        uids[pid] = real_uid(pid)
    return uids[pid]


def _owner(pid: str, processes: Mapping[str, Process], owners: dict[str, int | None]) -> int | None:
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


def hoarded(held_by_task: set[int], given: Ranges, held: Ranges) -> list[int]:
    """The ports a task holds outside the slave's range (`held`) and its own."""
    return [p for p in held_by_task if not _has(held, p) and not _has(given, p)]


def hoarders(
    ports: Ports, runners: Mapping[int, tuple[TaskRecord, Runner]], held: Ranges
) -> dict[int, list[int]]:
    """The tasks (groups) that hold too many ports outside the slave's range, with
    those ports: each over MOST_OTHER_PORTS, and, of a principal whose tasks together
    hold over MOST_PRINCIPAL_OTHER_PORTS, its biggest holders until the rest are under
    it (many tasks of one tenant, each under the first bound, took the range too)."""
    others = {
        group: hoarded(set(found), ports_of(runners[group][0].info.discrete), held)
        for group, found in ports.items()
        if group in runners
    }
    over = {group: mine for group, mine in others.items() if len(mine) > MOST_OTHER_PORTS}
    principals: dict[str, list[int]] = {}
    for group in others:
        principals.setdefault(runners[group][0].principal, []).append(group)
    for groups in principals.values():
        total = sum(len(others[group]) for group in groups if group not in over)
        for group in sorted(groups, key=lambda g: len(others[g]), reverse=True):
            if total <= MOST_PRINCIPAL_OTHER_PORTS:
                break
            if group not in over:
                over[group] = others[group]
                total -= len(others[group])
    return over


def _has(ranges: Ranges, port: int) -> bool:
    return any(begin <= port <= end for begin, end in ranges.spans)


def kill_listeners(
    ports: Mapping[int, set[int]], bad: Iterable[int], pidfds: Mapping[int, int]
) -> None:
    """SIGKILL the processes holding the ports `bad` (port -> pids: `ports`), through
    the pidfds the look opened (`Looked`): never a pid that may be another's by now."""
    kill_pids(set().union(*(ports[port] for port in bad)), pidfds)


def kill_pids(pids: Iterable[int], pidfds: Mapping[int, int]) -> None:
    """SIGKILL each of `pids` through the pidfd the look opened (`Looked`)."""
    for pid in pids:
        if (fd := pidfds.get(pid)) is not None:
            with contextlib.suppress(OSError):  # (it ended meanwhile)
                signal.pidfd_send_signal(fd, signal.SIGKILL)


class StrayWatch(Protocol):
    """What the loop asks of the listeners of no task (slave.port_strays.Strays)."""

    def tenant(self, uid: int) -> bool: ...

    def executor_groups(self) -> dict[int, str]: ...

    def given_to_executor(self, group: int) -> Ranges: ...

    async def stop(
        self,
        looked: Looked,
        runners: Mapping[int, tuple[TaskRecord, Runner]],
        held: Ranges,
        log: Any,
    ) -> None: ...


async def enforce_ports(
    tasks: Mapping[tuple[str, str], TaskRecord],
    slave: Discrete,
    interval: float,
    log: Any,
    strays: StrayWatch | None = None,
) -> None:
    """Every `interval` seconds, until cancelled: kill each command task that listens
    on a port of the slave's range (`slave`'s ports) not given to it, and the processes
    that listen there; and, given `strays` (where each principal's tasks run as a user
    of its own), the processes of no task or executor that do (slave.port_strays)."""
    held = ports_of(slave)
    if not comparable():
        log.warning(
            "ports.tables_not_compared",
            detail="the kernel does not say which threads share a descriptor table (kcmp: "
            "another architecture, a kernel without it, or a seccomp profile denying it): "
            "each thread's is read, and a task of many threads makes each look slow",
        )
    while True:
        await asyncio.sleep(interval)
        runners: dict[int, tuple[TaskRecord, Runner]] = {
            r.runner.pid: (r, r.runner)
            for r in tasks.values()
            if r.runner is not None and r.runner.pid and not r.state.terminal
        }
        if not (runners or strays is not None):
            continue  # (strays: a user's leftovers are looked for though it runs nothing;
            # a slave that offers no ports still holds its tasks to MOST_OTHER_PORTS)
        outside = {g: path for g, (_, r) in runners.items() if (path := r.outside_group)}
        # (an executor's processes are its own, never strays: held to its tasks' ports)
        executors = strays.executor_groups() if strays is not None else {}
        tenant = strays.tenant if strays is not None else None
        principal_of = {**executors, **{g: r.principal for g, (r, _) in runners.items()}}
        looked = await asyncio.to_thread(
            listened_ports, set(principal_of), outside, tenant, principal_of
        )
        try:
            if looked.strays and strays is not None:
                await strays.stop(looked, runners, held, log)
            for uid, pids in looked.unread_strays.items():
                log.warning("task.port_limit_stray", uid=uid, unread=len(pids))
                kill_pids(pids, looked.pidfds)
            await _hold_to_given(looked, runners, strays, held, log)
        finally:
            looked.close()


async def _hold_to_given(
    looked: Looked,
    runners: Mapping[int, tuple[TaskRecord, Runner]],
    strays: StrayWatch | None,
    held: Ranges,
    log: Any,
) -> None:
    """Each task (or executor) that holds a port of the range not given to it, or too
    many outside it (`hoarders`): its holders killed, and the task failed (an executor
    runs on)."""
    over = hoarders(looked.ports, runners, held)
    for group, pids in looked.unread.items():  # (past its reads: killed, not judged in part)
        # its listeners read before too: one that left the task's group (and, with no PID
        # namespace of the task's, its kill) is its child all the same
        kill_pids(pids.union(*looked.ports.get(group, {}).values()), looked.pidfds)
        if group not in runners:  # an executor's: its processes past it killed
            log.warning("executor.port_limit", group=group, unread=len(pids))
            continue
        record, runner = runners[group]
        log.warning(
            "task.port_limit",
            framework_id=record.framework_id,
            task_id=record.info.task_id,
            unread=len(pids),
        )
        message = (
            f"its processes, with its principal's others here, held over "
            f"{MOST_DESCRIPTORS:,} open descriptors in all (a table threads share "
            "counted once): more than the slave reads of a tenant at a look to hold its "
            "tasks to their ports"
        )
        await runner.kill(0.0, Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message))
    for group, ports in looked.ports.items():
        if group in looked.unread and group in runners:
            continue  # (failed above)
        if group not in runners:  # an executor's: held to its tasks' ports
            given = strays.given_to_executor(group) if strays is not None else Ranges()
            if bad := squatted(set(ports), given, held):
                log.warning("executor.port_limit", group=group, ports=bad)
                kill_listeners(ports, bad, looked.pidfds)
            if len(others := hoarded(set(ports), given, held)) > MOST_OTHER_PORTS:
                log.warning("executor.port_limit", group=group, other_ports=len(others))
                kill_listeners(ports, others, looked.pidfds)
            continue
        record, runner = runners[group]
        given = ports_of(record.info.discrete)
        if (hoard := over.get(group)) is not None:
            message = (
                f"held {len(hoard)} ports outside the slave's range (bound or listening; "
                f"at most {MOST_OTHER_PORTS} a task, {MOST_PRINCIPAL_OTHER_PORTS} a "
                "principal's tasks together): the kernel's ephemeral ports, every "
                "connection's own end, are every tenant's"
            )
            log.warning(
                "task.port_limit",
                framework_id=record.framework_id,
                task_id=record.info.task_id,
                other_ports=len(hoard),
            )
            kill_listeners(ports, hoard, looked.pidfds)
            limit = Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message)
            await runner.kill(0.0, limit)
            continue
        if bad := squatted(set(ports), given, held):
            named = ", ".join(map(str, bad))
            message = (
                f"listened on port {named} of the slave's range, not given to it (its "
                f"ports: {text(given) or 'none'}): a task listens only "
                "on the ports its offer gave it ($PORT0, ...)"
            )
            log.warning(
                "task.port_limit",
                framework_id=record.framework_id,
                task_id=record.info.task_id,
                ports=bad,
            )
            # the holders first, while the look's pidfds still name them: one that left
            # the task's group (and, with no PID namespace of the task's, its kill) is
            # its child all the same
            kill_listeners(ports, bad, looked.pidfds)
            limit = Limit(TaskState.FAILED, Reason.CONTAINER_LIMITATION, message)
            await runner.kill(0.0, limit)


def text(ranges: Ranges) -> str:
    return ",".join(f"{b}" if b == e else f"{b}-{e}" for b, e in ranges.spans)
