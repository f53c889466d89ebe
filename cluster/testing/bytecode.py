"""One bytecode cache for every Python process a test run or a benchmark starts."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def keep_bytecode() -> None:
    """This process, and every process it starts from now, keeps the bytecode of what it
    imports in one cache outside the checkout, kept between runs
    (`$XDG_CACHE_HOME/drfmesos/pycache`, or `$DRFMESOS_PYCACHE`), even where
    PYTHONDONTWRITEBYTECODE is set, as it is in many containers: else every process
    compiles the project again, about 0.1 CPU-s each (0.3 with the tests'), which a
    benchmark's 25 slave processes spend beside the master it measures (an installed
    wheel's bytecode is compiled at install). The checkout gets no __pycache__ either
    way. A prefix already set (by hand, or by the process that started this one) is kept."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    prefix = Path(os.environ.get("DRFMESOS_PYCACHE") or cache / "drfmesos" / "pycache")
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # nowhere to keep it: compile as before
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = str(prefix)  # this process too: what it imports from here
    sys.dont_write_bytecode = False
