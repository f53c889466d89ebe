"""A Python that tasks running as other users can run, for the tests whose executors are
Python programs (the Mesos adapter, pymesos) on a slave that switches users.

The suite's own Python may lie where no other user can reach (pyenv under /root, 0700):
a task user's `exec` of it is refused, as an operator's slave would say at its start
(`isolation.python_unreachable`). As an operator would install one where all can read,
this copies the distributions drfmesos's executors need (its dependencies, aiohttp,
pymesos) into a directory any user may read, once a machine, and hands tasks an
interpreter of the same minor version that any user may run, through the slave's
`--task-env` (`DRFMESOS_PYTHON`, `PYTHONPATH`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import shutil
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOTS = ["drfmesos", "aiohttp", "prometheus-client", "pymesos", "http-parser"]
HOME = Path("/tmp/drfmesos-task-python")


def _closure() -> list[md.Distribution]:
    seen: dict[str, md.Distribution] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [d for n, d in seen.items() if n != "drfmesos"]  # (the checkout is read as is)


def _interpreter() -> str | None:
    """A python of this minor version that any user may run."""
    from slave.tenancy import unreachable_by_others

    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}"):
        if os.path.exists(candidate) and unreachable_by_others(Path(candidate)) is None:
            return candidate
    return None


def _blocked(path: Path) -> str | None:
    from slave.tenancy import unreachable_by_others

    return unreachable_by_others(path)


def task_python_env() -> dict[str, str]:
    """`--task-env` values giving tasks a Python with drfmesos and its dependencies;
    skipped (a failure in CI) where this host has none any user may run."""
    repo = Path(__file__).resolve().parent.parent
    interpreter = _interpreter()
    why = None
    if interpreter is None:
        why = "no python of this version any user may run"
    elif (blocked := _blocked(repo)) is not None:
        why = f"the checkout is out of other users' reach ({blocked})"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"tasks as other users need a Python they can run: {why}")
        pytest.skip(why)
    dists = _closure()
    key = hashlib.sha256(
        "".join(sorted(f"{d.metadata['Name']}={d.version}" for d in dists)).encode()
    ).hexdigest()[:12]
    site = HOME / key
    if not site.exists():
        tmp = HOME / f".{key}.{os.getpid()}"
        for dist in dists:
            for file in dist.files or []:
                source = Path(str(dist.locate_file(file)))
                if source.is_file() and ".." not in file.parts:
                    target = tmp / file
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target)
        for path in [HOME, *tmp.rglob("*"), tmp]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        try:
            tmp.rename(site)
        except OSError:  # (another worker made it meanwhile)
            shutil.rmtree(tmp, ignore_errors=True)
    return {"DRFMESOS_PYTHON": str(interpreter), "PYTHONPATH": f"{site}:{repo}"}


def task_env_args() -> list[str]:
    """`task_python_env` as `drfmesos slave` arguments."""
    return [
        arg
        for name, value in task_python_env().items()
        for arg in ("--task-env", f"{name}={value}")
    ]
