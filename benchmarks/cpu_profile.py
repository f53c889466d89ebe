"""Run a module under cProfile counting CPU time, not wall time (`python -m
benchmarks.cpu_profile OUT.prof -m module args...`): on a shared machine a wall-clock
profile charges a function for the time the process waited for a core."""

from __future__ import annotations

import cProfile
import runpy
import sys
import time


def main() -> None:
    out, flag, module, *args = sys.argv[1:]
    if flag != "-m":
        raise SystemExit("usage: python -m benchmarks.cpu_profile OUT.prof -m MODULE [ARGS...]")
    sys.argv = [module, *args]
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()
