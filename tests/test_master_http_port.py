"""A master whose `--http` address is taken stops at its start with the address named, as
a Mesos master that cannot bind its port exits: an operator who asked for the API and
the web UI is not left with a master that runs without them, said only in a log line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def test_a_master_whose_http_port_is_taken_stops_saying_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        master = subprocess.run(
            [sys.executable, "-m", "cluster", "master", "--broker", "embedded",
             "--http", f"127.0.0.1:{port}", "--work-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert master.returncode == 1, master.stderr[-2000:]
    last = master.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: --http 127.0.0.1:{port}: "), last
    assert "address already in use" in last
    assert "Traceback" not in master.stderr


def test_a_master_whose_certificate_cannot_be_loaded_says_so_not_the_port(
    tmp_path: Path,
) -> None:
    """A certificate that is not PEM (or a key of another one) is named, not the address
    (ssl's error is an OSError, as a taken port's is)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    master = subprocess.run(
        [sys.executable, "-m", "cluster", "master", "--broker", "embedded",
         "--http", "127.0.0.1:0", "--http-cert", str(cert), "--http-key", str(key),
         "--work-dir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert master.returncode == 1, master.stderr[-2000:]
    last = master.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: --http-cert {cert} / --http-key {key}: "), last
    assert "Traceback" not in master.stderr
