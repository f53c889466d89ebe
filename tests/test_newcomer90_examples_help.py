"""An example's `--help` is where a newcomer who runs it as ports.md says looks first:
web_service.py's said its first docstring line alone, cut mid-sentence ("INSTANCES web
servers on each slave, each listening on a")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_the_web_service_examples_help_says_its_first_paragraph_whole() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "web_service.py"), "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # (argparse wraps it to the terminal)
    assert "each listening on a port its offer gave it, written only against the public API" in said
