"""Which of a process's threads have file-descriptor tables of their own.

Threads share their process's table unless one was made without it (`clone` without
CLONE_FILES, or `unshare(CLONE_FILES)`): reading every thread's table read the same one
once a thread, and a tenant's process of 2,000 threads and 20,000 descriptors cost a
look 40 million reads (84 s of the slave's CPU). The kernel says whether two threads
share one (`kcmp(2)`, KCMP_FILES), so each table is read once. Where it cannot say
(another architecture, a kernel without it, a seccomp profile that denies it), every
thread is its own table, and read as before.
"""

from __future__ import annotations

import ctypes
import errno
import platform

KCMP_FILES = 2
# kcmp's number on the 64-bit architectures (a 32-bit Python's would be another's call)
_KCMP = (
    {"x86_64": 312, "aarch64": 272, "riscv64": 272, "ppc64le": 354, "ppc64": 354, "s390x": 343}.get(
        platform.machine()
    )
    if ctypes.sizeof(ctypes.c_void_p) == 8
    else None
)
_libc = ctypes.CDLL(None, use_errno=True) if _KCMP is not None else None


def share_files(a: int, b: int) -> bool | None:
    """Whether threads `a` and `b` share one descriptor table; None when the kernel
    cannot say. One that has exited meanwhile shares none (its table read on its own
    finds nothing: were it `a`, every thread after it would read as sharing its)."""
    if _libc is None or _KCMP is None:
        return None
    answer = _libc.syscall(_KCMP, ctypes.c_long(a), ctypes.c_long(b), KCMP_FILES, 0, 0)
    if answer == 0:
        return True
    if answer > 0:
        return False
    return False if ctypes.get_errno() == errno.ESRCH else None


def comparable() -> bool:
    """Whether this kernel, here, says which threads share a table (asked of this
    process's own thread: what the slave may do to its tasks' it may do to its own)."""
    import threading  # (a thread id: this one's)

    tid = threading.get_native_id()
    return share_files(tid, tid) is True


def distinct_tables(threads: list[int], allowance: int) -> tuple[list[list[int]], int, bool]:
    """The threads of each table `threads` have (most share one), in the order met, the
    comparisons that took, and whether the kernel told them apart; it stops once the
    comparisons pass `allowance`. Where the kernel cannot compare, each thread alone
    (each table read as it is)."""
    tables: list[list[int]] = []
    cost = 0
    for tid in threads:
        for table in tables:
            cost += 1
            same = share_files(table[0], tid)
            if same is None:
                return [[t] for t in threads], cost, False
            if same:
                table.append(tid)
                break
        else:
            tables.append([tid])
        if cost > allowance:
            break
    return tables, cost, True
