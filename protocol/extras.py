"""The optional parts of drfmesos and the pip extra that installs each (pyproject.toml).

The SDK and a slave need only the core (`pip install drfmesos`); the master's HTTP side,
ZooKeeper, the embedded broker, certificates and plots come with extras, or all of them
with `drfmesos[all]`. Each optional library is imported only where it is used, inside
`needs(...)`, so a missing one is named with the extra that brings it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

EXTRAS = {
    "master": "the master (its HTTP API, web UI and /metrics)",
    "ha": "several masters on ZooKeeper (--zk)",
    "embedded": "the embedded broker (--broker embedded)",
    "tls": "making certificates (drfmesos auth init)",
    "plots": "experiment plots",
}


# the libraries each extra brings that drfmesos imports (pyproject.toml's lists, by module)
MODULES = {
    "master": ("aiohttp", "prometheus_client"),
    "ha": ("kazoo",),
    "embedded": ("amqtt",),
    "tls": ("cryptography",),
    "plots": ("matplotlib",),
}


class MissingExtra(ImportError):
    """An optional library is not installed; the message says which extra brings it."""


@contextlib.contextmanager
def needs(extra: str) -> Iterator[None]:
    """Import an optional library in this block; if it is missing, say which extra to
    install rather than raising a bare ModuleNotFoundError."""
    try:
        yield
    except ModuleNotFoundError as e:
        raise MissingExtra(
            f"{EXTRAS[extra]} needs {e.name}, which is not installed: "
            f"pip install 'drfmesos[{extra}]' (or 'drfmesos[all]')"
        ) from e


def missing(*extras: str) -> dict[str, list[str]]:
    """Of `extras`, those with a library that does not import, with those libraries."""
    absent: dict[str, list[str]] = {}
    for extra in extras:
        for module in MODULES[extra]:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError:
                absent.setdefault(extra, []).append(module)
    return absent


def need_all(*extras: str) -> None:
    """Before a command that uses several extras starts anything: name every one missing,
    in one message with one pip line, rather than the first one it would have stopped at."""
    absent = missing(*extras)
    if not absent:
        return
    lines = [f"  {extra}: {EXTRAS[extra]}; missing {', '.join(absent[extra])}" for extra in absent]
    raise MissingExtra(
        "this needs extras that are not installed:\n"
        + "\n".join(lines)
        + f"\npip install 'drfmesos[{','.join(absent)}]' (or 'drfmesos[all]')"
    )


class UntestedVersion(ImportError):
    """A library we reach into (see the adapters that call `require`) is at a version we
    have not tested; its private parts may have changed."""


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def require(dist: str, at_least: str, below: str) -> None:
    """Stop at import, saying so, when `dist` is not in [at_least, below): the range
    pyproject.toml pins and the adapter's conformance test was run against."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(dist)
    except PackageNotFoundError:
        return  # (not installed at all: the import itself says so, with its extra)
    if not _release(at_least) <= _release(found) < _release(below):
        raise UntestedVersion(
            f"drfmesos uses {dist}'s internals and was tested with {dist}>={at_least},<{below}; "
            f"{found} is installed: pip install '{dist}>={at_least},<{below}'"
        )
