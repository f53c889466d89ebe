"""The environment a task or executor starts with: nothing of the slave's own.

As Mesos's agent with `--executor_environment_variables`: a task sees a default PATH,
HOME (its sandbox), what the operator passes on (`--task-env NAME` for the slave's own
value, `--task-env NAME=VALUE`), what its framework gave it, and the `MESOS_*` and
`DRFMESOS_*` variables the slave sets, which neither may override. The slave's own
environment (`DRFMESOS_SECRET_FILE`, a broker URL with credentials, ...) never reaches it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Mesos's


def parse_task_env(specs: Iterable[str], own: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`--task-env` values: `NAME=VALUE`, or `NAME` for the slave's own value (left out
    if the slave has none)."""
    env = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not name or "\0" in spec:
            raise ValueError(f"--task-env takes NAME or NAME=VALUE, not {spec!r}")
        if sep:
            env[name] = value
        elif name in own:
            env[name] = own[name]
    return env


def task_environment(
    operator: Mapping[str, str],
    framework: Mapping[str, str],
    slave: Mapping[str, str],
    sandbox: Path,
) -> dict[str, str]:
    """A task's whole environment: the defaults, the operator's, the framework's, then
    the slave's own variables for it (its ids, its sandbox)."""
    return {
        "PATH": DEFAULT_PATH,
        "HOME": str(sandbox),
        **operator,
        **framework,
        **slave,
        "MESOS_SANDBOX": str(sandbox),
    }
