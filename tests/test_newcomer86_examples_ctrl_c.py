"""The examples a how-to runs for ever (`examples/web_service.py`, in ports.md) or until
their tasks end (`examples/hello_framework.py`) are stopped with Ctrl-C: they say so in a
line and exit 130, as a shell's command does, where they printed a KeyboardInterrupt
traceback twice over (asyncio's CancelledError, then the interrupt)."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.mark.parametrize(("example", "name"), [("web_service.py", "web-service"),
                                               ("hello_framework.py", "hello")])  # fmt: skip
async def test_ctrl_c_stops_an_example_without_a_traceback(example: str, name: str) -> None:
    # a port bound but not listening (so no one else's broker comes there meanwhile):
    # the driver waits for a broker, and says so at warning
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    broker = f"mqtt://127.0.0.1:{held.getsockname()[1]}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLES / example), "--broker", broker,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    said = b""
    try:
        async with asyncio.timeout(40):
            while b"bus.waiting_for_broker" not in said:  # (it is running its driver)
                line = await proc.stderr.readline()
                assert line, said
                said += line
            proc.send_signal(signal.SIGINT)
            _, rest = await proc.communicate()
    finally:
        held.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    err = (said + rest).decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert f"{name}: stopped" in err
