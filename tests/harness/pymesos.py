"""An unmodified pymesos program run by a test: whether pymesos is here, and the
program's lines read one at a time until the test is done with it."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
from collections.abc import AsyncIterator

import pytest


def need_pymesos() -> None:
    if importlib.util.find_spec("pymesos") and importlib.util.find_spec("http_parser"):
        return
    if os.environ.get("CI"):
        pytest.fail("pymesos is not installed; .ci/run installs it (.ci/pymesos.sh)")
    pytest.skip("pymesos is not installed (bash .ci/pymesos.sh)")


class Framework:
    """The pymesos program, its lines read one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[list[str]] = []

    async def first(self, *words: str, timeout: float = 60.0) -> list[str]:
        """The first line read that starts with `words`, reading on until one does."""
        for line in self.lines:
            if tuple(line[: len(words)]) == words:
                return line
        return await self.until(*words, timeout=timeout)

    async def until(self, *words: str, timeout: float = 60.0) -> list[str]:
        """Read lines until one starts with `words`; that line."""
        assert self.process.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.process.stdout.readline()
                assert raw, f"the framework ended before {words}: {self.lines[-5:]}"
                line = raw.decode().split()
                self.lines.append(line)
                if tuple(line[: len(words)]) == words:
                    return line


@contextlib.asynccontextmanager
async def running(process: asyncio.subprocess.Process) -> AsyncIterator[Framework]:
    """The program, ended when the block is (its stdin closed, then killed if need be)."""
    try:
        yield Framework(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
