"""Review 79: every tenant's tasks share the slave's session keyring: one tenant's task
reads the keys another's keeps there.

A process's session keyring is inherited by its children across fork, exec and a change
of user: the slave's chain (unshare, setpriv, the wrapper, the task) gives each task a
new user, PID, IPC and mount namespace, and keeps the keyring. A slave run as a systemd
service has a session keyring of its own (systemd's `KeyringMode=private`, the default
for system services), and one started from a login shell has pam_keyinit's; every task
then holds it, and so possesses every key linked there: the keyring's possessor
permissions, not its owner's, decide. alice's task keeps a secret in `@s`, as `keyctl
padd user NAME @s` (or a Kerberos `KEYRING:session` cache) does; mallory's task, another
user in another PID namespace, searches `@s` and reads it. (runc gives each container a
session keyring of its own, `_ses.<id>`, for this reason.)

docs/how-to/isolation.md, root mode: a task "sees no other sandbox, no other task's
environment or processes, and no secret of the slave's"; the project's promise is that
one whose tasks run on a slave beside yours reaches nothing of yours. A tenant relies on
what its task keeps in its own session being its own.

A real slave as root with task users and PID namespaces (harness.shared_slave), whose
process, as systemd starts a service, has a session keyring; the tasks call
add_key/keyctl through /usr/bin/python3's ctypes (no keyutils needed).
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil

import pytest

from protocol.wire.messages import KillTask, TaskState

from harness.helpers import eventually
from harness.shared_slave import ALICE, MALLORY, T, shared_slave

SECRET = "alice-keyring-secret-5e1b"
KEYCTL, KEYCTL_JOIN_SESSION_KEYRING = 250, 1  # x86_64's keyctl(2), and its operation

KEYS = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SESSION = -3  # KEY_SPEC_SESSION_KEYRING
if sys.argv[1] == "keep":
    secret = sys.argv[2].encode()
    key = libc.syscall(248, b"user", b"alice-token", secret, len(secret), SESSION)
    print("kept" if key > 0 else "not kept: " + os.strerror(ctypes.get_errno()), flush=True)
else:
    key = libc.syscall(250, 10, SESSION, b"user", b"alice-token", 0)  # KEYCTL_SEARCH
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(250, 11, key, buf, 256) if key > 0 else -1  # KEYCTL_READ
    print("read:", buf.raw[:n].decode() if n > 0 else os.strerror(ctypes.get_errno()))
"""


def python(*args: str) -> str:
    return shlex.join(["/usr/bin/python3", "-I", "-c", KEYS, *args])


def join_a_session_keyring() -> None:
    """This process's (and so the slave's) own anonymous session keyring, as systemd gives
    a service's."""
    if os.uname().machine != "x86_64":
        pytest.skip("keyctl(2)'s number here is x86_64's")
    libc = ctypes.CDLL(None, use_errno=True)
    joined = libc.syscall(KEYCTL, ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None)
    if joined < 0:
        pytest.skip(f"no session keyring: {os.strerror(ctypes.get_errno())}")


async def test_a_tenants_task_reads_no_key_another_tenants_task_keeps_in_its_session() -> None:
    if shutil.which("/usr/bin/python3") is None:
        pytest.skip("no python3 a task's user may run")
    join_a_session_keyring()
    try:
        await alice_and_mallory()
    finally:
        join_a_session_keyring()  # (a new one: what the tasks put in this one goes with it)


async def alice_and_mallory() -> None:
    """alice's task keeps her secret in its session keyring; mallory's then looks there."""
    async with shared_slave() as s:
        await s.master.run("alice", ALICE, "a1", python("keep", SECRET) + "; exec sleep 300")
        await s.master.reaches(ALICE, "a1", TaskState.RUNNING)
        await eventually(lambda: "kept" in s.output_so_far(ALICE, "a1"), timeout=20)
        assert s.output(ALICE, "a1").strip() == "kept"
        await s.master.run("mallory", MALLORY, "m1", python("read"))
        await s.master.ends(MALLORY, "m1")
        seen = s.output(MALLORY, "m1")
        await s.master.bus.publish(
            T.slave("slave", s.master.slave_id), KillTask(framework_id=ALICE, task_id="a1")
        )
        await s.master.ends(ALICE, "a1")
    assert SECRET not in seen, f"mallory's task read alice's key from its session: {seen!r}"
