"""Review94: a launch waits for its own framework's renames, not another tenant's, even
when that tenant has a launch waiting too (on the sandbox collector, a real work dir).

`SandboxGC._take_all` takes first a framework that a launch waits for. With two waiting,
it took the one whose id sorts first, to its end: a tenant with thousands of ended
sandboxes and a launch of its own waiting held another's launch for all of them again,
the wait the per-framework renames were made to end (attack94 finding 2), for any
tenant whose framework id sorts before its victim's.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from protocol import logs
from protocol.transport.aio import within
from slave import sandbox_gc
from slave.sandbox_gc import SandboxGC

from harness.helpers import eventually


def ended_sandbox(work: Path, framework: str, name: str) -> None:
    path = work / "sandboxes" / framework / name
    path.mkdir(parents=True)
    then = time.time() - 1_000
    os.utime(path, (then, then))


async def test_a_launch_waits_for_its_own_renames_when_another_tenants_launch_waits_too(
    tmp_path: Path,
) -> None:
    many = 4 * sandbox_gc.CHUNK
    for i in range(many):
        ended_sandbox(tmp_path, "a-mallory", f"m{i}")  # (first by its name)
    ended_sandbox(tmp_path, "alice", "a1")
    gc = SandboxGC(tmp_path, 100.0, 60.0, 0.0, {}, {}, logs.get("test"))
    held = threading.Event()
    renamed: list[str] = []
    real = gc._take_one

    def take_one(parent: int, trash: int | None, name: str) -> None:
        if name.startswith("m"):
            held.wait(30)  # (until both launches wait)
        renamed.append(name)  # (in the one thread: the order they went in)
        real(parent, trash, name)

    gc._take_one = take_one  # type: ignore[method-assign]
    collecting = asyncio.ensure_future(gc.once())
    try:
        await eventually(lambda: {"alice", "a-mallory"} <= gc._claimed)
        mallorys = asyncio.ensure_future(gc.claimed("a-mallory", ["m0"]))
        alices = asyncio.ensure_future(gc.claimed("alice", ["a1"]))
        await eventually(lambda: {"alice", "a-mallory"} <= gc._waiting.keys())
        held.set()
        await within(alices, 30)
        await within(mallorys, 30)
    finally:
        held.set()
        await collecting
    assert len(renamed) == many + 1
    # alice's went after one hop of mallory's at most (the one under way as both waited)
    assert renamed.index("a1") <= sandbox_gc.CHUNK
