"""Which user a principal's tasks run as, on a slave that switches users (as root).

By default each principal gets a uid of its own from a range no account uses
(`--task-uids`), its group the same number: no /etc/passwd entry is needed to run as it.
The map is the machine's, not the slave's (`--task-uid-map`, a JSON file under a lock):
every slave process on one host, and every logical slave of a fleet, gives a principal
the same uid and never gives one principal's to another, across restarts. It is keyed
by cluster and principal: two clusters' `alice`s on one machine are two users. An operator may
name the user instead (`--task-users`, a YAML file):

    users:
      alice: alice        # the account alice: its uid, its group and its groups
      bob: 2001           # uid 2001, group 2001
      etl: "2002:3000"    # uid 2002, group 3000

No task runs as root or as the slave's own user; a uid the operator names may not lie in
the range the slave hands out (it would be another principal's), nor be named for two
principals (each would reach the other's tasks).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_UIDS = range(1_000_000_000, 1_001_000_000)  # far above accounts and subuid ranges
DEFAULT_MAP = Path("/var/lib/drfmesos/task-uids.json")


class TaskUsersError(ValueError):
    """A mapping that cannot be used, or a uid that cannot be had; the message says why."""


@dataclass(frozen=True)
class TaskUser:
    uid: int
    gid: int
    account: str | None = None  # a named account: its supplementary groups come along
    # a user no account has: the name its tasks are told, and its copies of /etc/passwd
    # and /etc/group with its line (slave.task_accounts), bound in their mount namespace
    name: str | None = None
    accounts: tuple[str, str] | None = None

    def __str__(self) -> str:
        return self.account or f"{self.uid}:{self.gid}"


def parse_uid_range(text: str) -> range:
    """`START-END` (inclusive) -> a range; above 0 and below 2**32 - 1 (the kernel's -1)."""
    try:
        start, end = (int(part) for part in text.split("-"))
    except ValueError:
        raise TaskUsersError(f"a uid range is START-END, not {text!r}") from None
    if not 0 < start <= end < 2**32 - 1:
        raise TaskUsersError(f"a uid range lies within 1-{2**32 - 2}: {text!r}")
    return range(start, end + 1)


class UidMap:
    """The machine's map of principals to uids: read and extended under a lock on a file
    beside it (an `flock`, so slaves in other processes wait too), written whole and
    renamed into place. A principal's uid never changes, so what this process has read
    it keeps. Its calls touch the disk: call them in a thread."""

    _open: dict[Path, UidMap] = {}  # (one a file in a process: its logical slaves share it)
    _opening = threading.Lock()

    def __init__(self, path: Path, uids: range) -> None:
        self.path, self.uids = path, uids
        self._known: dict[str, int] = {}
        self._lock = threading.Lock()  # (threads of this process: flock is per open file)

    @classmethod
    def at(cls, path: Path, uids: range) -> UidMap:
        with cls._opening:
            found = cls._open.get(path)
            if found is None or found.uids != uids:
                found = cls._open[path] = cls(path, uids)
            return found

    def uid_of(self, cluster: str, principal: str) -> int:
        """`principal`'s uid in `cluster`: a principal of one name in two clusters on one
        machine is two tenants, with a uid each (a cluster's principals are its own)."""
        key = f"{cluster}/{principal}"  # (neither holds a "/": both are topic segments)
        if (uid := self._known.get(key)) is not None:
            return uid
        with self._lock, self._locked():
            uids = self._read()
            if key not in uids:
                uids[key] = self._free(set(uids.values()))
                self._write(uids)
            self._known = uids
        return uids[key]

    def _free(self, taken: set[int]) -> int:
        for uid in self.uids:
            if uid in taken:
                continue
            try:
                pwd.getpwuid(uid)  # an account's: never a tenant's
            except KeyError:
                return uid
        raise TaskUsersError(
            f"every uid of the task range {self.uids.start}-{self.uids.stop - 1} is taken "
            f"({self.path}): widen --task-uids"
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> dict[str, int]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise TaskUsersError(f"cannot read the task uid map {self.path}: {e}") from None
        uids = raw.get("principals") if isinstance(raw, dict) else None
        if not isinstance(uids, dict) or not all(
            isinstance(p, str) and isinstance(u, int) for p, u in uids.items()
        ):
            raise TaskUsersError(f"{self.path} is not a task uid map")
        # a map written before it was keyed by cluster named principals alone: theirs
        # are the default cluster's (their uids stay taken whatever it was)
        return {p if "/" in p else f"default/{p}": u for p, u in uids.items()}

    def _write(self, uids: dict[str, int]) -> None:
        text = json.dumps(
            {
                "about": "drfmesos slaves: the uid each cluster/principal's tasks run as",
                "principals": uids,
            },
            indent=1,
            sort_keys=True,
        )
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def load_operator_users(path: Path, uids: range) -> dict[str, TaskUser]:
    """The operator's `--task-users` file: principal -> the user its tasks run as."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise TaskUsersError(f"cannot read --task-users {path}: {e}") from None
    entries = raw.get("users", {}) if isinstance(raw, dict) else None
    if not isinstance(entries, dict) or set(raw) - {"users"}:
        raise TaskUsersError(f"--task-users {path}: one key, 'users', mapping principals to users")
    users: dict[str, TaskUser] = {}
    holders: dict[int, str] = {}  # uid -> the principal it was given to
    for principal, spec in entries.items():
        user = _user(str(spec), f"--task-users {path}: {principal}")
        if user.uid in uids:
            raise TaskUsersError(
                f"--task-users {path}: {principal}'s uid {user.uid} lies in --task-uids "
                f"{uids.start}-{uids.stop - 1}, where the slave gives principals theirs"
            )
        if (other := holders.setdefault(user.uid, str(principal))) != str(principal):
            raise TaskUsersError(
                f"--task-users {path}: {principal} and {other} would run as one user "
                f"(uid {user.uid}): each could read and signal the other's tasks"
            )
        users[str(principal)] = user
    return users


def _user(spec: str, what: str) -> TaskUser:
    """An account's name, `uid`, or `uid:gid`; never root, never the slave's own user."""
    head, _, gid = spec.partition(":")
    if head.isdigit() and (not gid or gid.isdigit()):
        user = TaskUser(int(head), int(gid or head))
    else:
        try:
            account = pwd.getpwnam(spec)
        except KeyError:
            raise TaskUsersError(f"{what}: no account {spec!r} on this host") from None
        user = TaskUser(account.pw_uid, account.pw_gid, spec)
    if user.uid in (0, os.geteuid()) or user.gid == 0:
        raise TaskUsersError(f"{what}: {spec} is root or the slave's own user")
    return user


class TaskUsers:
    """The user a principal's tasks run as: the operator's, else the machine's map's."""

    def __init__(
        self,
        uid_map: UidMap,
        operator: dict[str, TaskUser],
        cluster: str = "default",
        accounts: Callable[[str, TaskUser], TaskUser] | None = None,
    ) -> None:
        """`accounts`: names a principal's user where no account has it, writing its
        copies of the host's account files where its tasks bind them
        (`task_accounts.with_accounts`, blocking; `with_name` where they cannot)."""
        self.uid_map, self.operator, self.cluster = uid_map, operator, cluster
        self._accounts = accounts
        # (an operator's uid that no account has is named by its first look-up)
        self._known: dict[str, TaskUser] = {} if accounts else dict(operator)

    def is_tenant(self, uid: int) -> bool:
        """Whether principals' tasks may run as `uid` here (the machine's range, or an
        operator's user)."""
        return uid in self.uid_map.uids or any(u.uid == uid for u in self.operator.values())

    def known(self, principal: str) -> TaskUser | None:
        """Without touching the disk: the user if this slave has looked it up before."""
        return self._known.get(principal)

    def look_up(self, principal: str) -> TaskUser:
        """(Touches the disk the first time a principal is seen: call it in a thread.)"""
        user = self._known.get(principal)
        if user is None:
            user = self.operator.get(principal)
            if user is None:
                uid = self.uid_map.uid_of(self.cluster, principal)
                user = TaskUser(uid, uid)
            if self._accounts is not None:
                user = self._accounts(principal, user)
            self._known[principal] = user
        return user
