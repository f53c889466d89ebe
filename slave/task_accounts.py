"""A task user's own line in the /etc/passwd and /etc/group its tasks see.

The users a slave makes for principals (slave.task_users) are uids no account has, so a
task asking who it is was told nobody: `id -un` and `whoami` failed, and so did what
looks itself up with getpwuid(3) -- Java's `user.name`, Hadoop's login (which ends a
Spark or MapReduce task at its start), ssh, Python's `getpass` without $USER. Each such
user gets a copy of the host's two files with one line more, its own, which its tasks'
first shell (root's) binds over /etc/passwd and /etc/group in their mount namespace
(slave.confine.mounts_script): the host's files are untouched, and no task sees another
principal's line.

The copies are root's and readable by all (a task reads its /etc/passwd), in a directory
of root's alone (no task reaches another principal's copy by its path, nor learns who
else runs here), written anew by each slave process the first time it looks a principal
up, so that an account added to the host since shows. A user that is an account already,
or an operator's uid that one has, gets none: the host's files name it.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
from dataclasses import replace
from pathlib import Path

from protocol.tooling.credentials import write_private
from slave.task_users import TaskUser

HOST_PASSWD, HOST_GROUP = Path("/etc/passwd"), Path("/etc/group")
ACCOUNTS_DIR = "accounts"  # in the slave's work dir
# a name every tool takes for a user's (shadow-utils' and POSIX's portable set, 32 at most)
LOGIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
HOME = "/nonexistent"  # (a task's home is its sandbox, $HOME: one user runs many tasks)
SHELL = "/bin/sh"


def login_name(principal: str, uid: int) -> str:
    """The name a principal's task is told it has: the principal's own where that is a
    user's name no account or group on this host has (a second `root` or `sudo` would be
    read as the host's by whoever looks the name up), else `task-UID`."""
    if LOGIN_NAME.fullmatch(principal):
        try:
            pwd.getpwnam(principal)
        except KeyError:
            try:
                grp.getgrnam(principal)
            except KeyError:
                return principal
    return f"task-{uid}"


def with_name(principal: str, user: TaskUser) -> TaskUser:
    """`user` named (its tasks' $USER and $LOGNAME), unless an account has its uid (then
    as it is): where its tasks have no mount namespace to bind account files in."""
    try:
        pwd.getpwuid(user.uid)
        return user  # (an account's: its name is the account's)
    except KeyError:
        return replace(user, name=login_name(principal, user.uid))


def with_accounts(
    directory: Path,
    principal: str,
    user: TaskUser,
    passwd: Path = HOST_PASSWD,
    group: Path = HOST_GROUP,
) -> TaskUser:
    """`user` named, with its copies of the host's files written (`TaskUser.accounts`),
    unless an account has its uid (then as it is). (Blocking: call it in a thread.)"""
    named = with_name(principal, user)
    if named.name is None:
        return user  # (an account's: the host's files name it)
    try:
        host_passwd, host_group = passwd.read_text(), group.read_text()
    except OSError:
        return user  # (a host with no such files: nothing to add a line to)
    name = named.name
    # (absolute: the task's first shell binds them from its sandbox, whatever the slave's
    # --work-dir was relative to)
    directory = directory.absolute()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # (root's alone, whatever made it before)
    entry = f"{name}:x:{user.uid}:{user.gid}:drfmesos principal {name}:{HOME}:{SHELL}\n"
    passwd_copy = directory / f"{user.uid}.passwd"
    write_private(passwd_copy, _plus(host_passwd, entry), 0o644)  # (its tasks read it)
    gids = {line.split(":")[2] for line in host_group.splitlines() if line.count(":") >= 3}
    line = f"{name}:x:{user.gid}:\n" if str(user.gid) not in gids else ""
    group_copy = directory / f"{user.uid}.group"
    write_private(group_copy, _plus(host_group, line), 0o644)
    return replace(user, name=name, accounts=(str(passwd_copy), str(group_copy)))


def _plus(text: str, line: str) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line
