"""A Ctrl-C while `drfmesos` loads its modules stops it quietly (newcomer88: one in the
first few tenths of a second printed a traceback of whichever import it landed in)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# the interrupt lands as the command's own module is imported, as a Ctrl-C there would
INTERRUPTED_IMPORT = textwrap.dedent(
    """
    import sys

    class Interrupting:
        def find_spec(self, name, path=None, target=None):
            if name == "cluster.cli":
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, Interrupting())
    from cluster.command import main
    main()
    """
)


def test_a_ctrl_c_while_the_command_loads_says_stopped_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "stopped"


def test_the_command_runs_through_its_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cluster", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("drfmesos")
