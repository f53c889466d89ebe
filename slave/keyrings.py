"""A session keyring of its own for each process the slave starts as a tenant's user.

A process's session keyring (`@s`) is inherited across fork, exec and a change of user:
`unshare`, `setpriv` and `nsenter` pass the slave's on, and a slave that systemd starts
(`KeyringMode=private`) or a login shell started has one. Every task would then possess
it, and possession, not ownership, opens a keyring: one tenant's task would read and
clear the keys another's keeps in its session (a Kerberos `KEYRING:session` cache, a
`keyctl padd user ... @s`). So each task, custom executor and COMMAND health check joins a
new anonymous session keyring in the slave's child, between its fork and its exec, as
root, before the chain drops to the task's user (runc gives each container one so), and
possesses that one alone. glibc has no keyctl(): the system call, by its number.

Where the kernel has no keys (ENOSYS) or a seccomp filter refuses keyctl (EPERM, as
Docker's default profile does), there is no keyring to share either: nothing is done.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())  # keyctl(2)'s number
KEYCTL_JOIN_SESSION_KEYRING = 1
NO_KEYRINGS = (errno.ENOSYS, errno.EPERM)  # no keys to share here
_libc = ctypes.CDLL(None, use_errno=True)


def own_session_keyring() -> None:
    """Join a new anonymous session keyring (subprocess's `preexec_fn`: in the child,
    before its exec). OSError if the kernel has keys and would not."""
    if KEYCTL is None:
        return  # (an architecture whose number is not here: the slave's start line says so)
    joined = _libc.syscall(KEYCTL, ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None)
    if joined < 0 and (code := ctypes.get_errno()) not in NO_KEYRINGS:
        raise OSError(code, os.strerror(code))
