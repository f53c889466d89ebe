"""`drfmesos demo`, the README's first command, run as a user runs it."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from protocol.transport.aio import within


def leftovers(run_dir: Path) -> list[int]:
    """Processes still running from the demo's run dir (by command line or working dir)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if str(run_dir) in cmdline or cwd.startswith(str(run_dir)):
            found.append(int(entry.name))
    return found


@pytest.mark.slow(35)
async def test_the_demo_runs_a_b_and_c_and_leaves_nothing_behind(tmp_path: Path) -> None:
    # 127.0.0.1:5050 held by something else (as on a machine with a master of its own
    # running): the demo serves its web UI on a free port, and says where
    with socket.socket() as held:
        ours = await _hold(held, ("127.0.0.1", 5050))
        await _run_demo(tmp_path, ours)


async def _hold(sock: socket.socket, address: tuple[str, int]) -> bool:
    """Bind `address`, waiting while another test's demo probes it (a probe binds it for
    an instant: taken then, the port would be free again when our demo looks); whether
    we hold it (else another process listens there, and may let it go any moment: the
    compose test's cluster, say)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while True:
        try:
            sock.bind(address)
        except OSError:
            if _listening(address) or loop.time() > deadline:
                return False
            await asyncio.sleep(0.05)  # a probe's instant: poll until it is gone
            continue
        sock.listen()
        return True


def _listening(address: tuple[str, int]) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(address) == 0


async def _run_demo(tmp_path: Path, held: bool) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster",
        "demo",
        "--duration",
        "30",
        "--time-scale",
        "0.05",
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "100", "TMPDIR": str(tmp_path)},
    )
    out, _ = await within(proc.communicate(), 110)
    text = out.decode()
    assert proc.returncode == 0, text
    if held:  # (else whoever held it may have let it go before the demo looked)
        assert "127.0.0.1:5050 is taken: a free port instead" in text
        assert re.search(r"web UI: http://127\.0\.0\.1:(?!5050/)\d+/", text), text
    assert re.search(r"web UI: http://127\.0\.0\.1:\d+/", text), text
    final: dict[str, float] = {}
    for line in text.splitlines():  # the last table printed wins
        m = re.match(r"^│ ([ABC]) .*?([0-9.]+)% ", line)
        if m:
            final[m.group(1)] = float(m.group(2))
    assert set(final) == {"A", "B", "C"}, text
    assert all(share > 0 for share in final.values()), final
    # its run dir (a temp dir: no --run-dir) held its logs and its throwaway secrets: no
    # process of it is left, and neither is the dir
    [run_dir] = re.findall(r"logs and work dirs in (\S+) \(removed when it stops", text)
    assert Path(run_dir).parent == tmp_path
    assert leftovers(Path(run_dir)) == []
    assert not await asyncio.to_thread(os.path.lexists, run_dir)


def test_the_demos_slaves_offer_ports_of_their_own() -> None:
    """The demo's slaves share one host's network: each offers a range of its own (one
    port offered by two slaves went to two tasks, and the second's bind failed), below
    the kernel's ephemeral ports."""
    from cluster.local.demo import SLAVES, demo_ports
    from protocol.wire.discrete import Ranges

    ranges = [Ranges.parse(f"[{demo_ports(i)}]") for i in range(SLAVES)]
    for i, a in enumerate(ranges):
        assert a.size > 0
        assert max(end for _, end in a.spans) < 32768
        for b in ranges[i + 1 :]:
            assert not a.overlaps(b)
