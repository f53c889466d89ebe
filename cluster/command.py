"""The `drfmesos` command's entry point, which loads the command itself (`cluster.cli`)
first: a Ctrl-C while its modules load -- the first few tenths of a second of every
`drfmesos ...` -- stops it quietly, as one a moment later does, not with a traceback of
whichever import it landed in."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # a shell's exit status for a command stopped by SIGINT


def main() -> None:
    try:
        from cluster.cli import main as command
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        sys.exit(INTERRUPTED)
    command()
