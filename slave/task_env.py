"""The environment a task or executor starts with: nothing of the slave's own.

As Mesos's agent with `--executor_environment_variables`: a task sees a default PATH,
HOME (its sandbox), TMPDIR (its sandbox's `tmp`), what the operator passes on
(`--task-env NAME` for the slave's own value, `--task-env NAME=VALUE`), what its
framework gave it, and the `MESOS_*` and `DRFMESOS_*` variables the slave sets, which
neither may override. The slave's own environment (`DRFMESOS_SECRET_FILE`, a broker URL
with credentials, ...) never reaches it.

Nor does the task's environment reach a process that runs as root. The processes that
start a task as its user (`unshare`, `setpriv`, root's `sh` that joins a cgroup) run with
ROOT_ENV alone, so the loader never reads a tenant's `LD_PRELOAD`, `LD_AUDIT`,
`LD_LIBRARY_PATH` or `GCONV_PATH` in them, nor a shell its `ENV` or `IFS`. The task's
variables are set by its first shell, already its user's, from a script it reads on
its stdin (`start_script`): never on a command line, which `ps` shows to every user.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # Mesos's
ROOT_ENV = {"PATH": DEFAULT_PATH}  # all a process the slave starts as root gets of it
UMASK = "077"  # a task's files are its user's alone, unless it loosens this itself
# the names a POSIX shell can export: a task's `sh -c` always dropped the others
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
        "TMPDIR": str(sandbox / "tmp"),  # (the host's /tmp is every tenant's)
        **operator,
        **framework,
        **slave,
        "MESOS_SANDBOX": str(sandbox),
    }


def start_script(env: Mapping[str, str], then: str) -> bytes:
    """What a task's (or executor's) first shell reads on its stdin, running as the
    task's user already: umask 077, `env` exported (each value quoted: it is data, never
    code), then `then`. Names a shell cannot export (`a.b`) are left out, as the task's
    own `sh -c` always left them out. ValueError for what no environment can hold
    (NUL, a name with '=' or none), as `execve` refuses it."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ValueError(f"an environment cannot hold the variable {name!r}")
    lines = [f"umask {UMASK}\n"]
    lines += (
        f"export {name}={shlex.quote(value)}\n"
        for name, value in env.items()
        if SHELL_NAME.fullmatch(name)
    )
    lines.append(then)
    return "".join(lines).encode(errors="surrogateescape")  # (as os.environ holds)
