"""The optional parts of drfmesos and the pip extra that installs each (pyproject.toml).

The SDK and a slave need only the core (`pip install drfmesos`); the master's HTTP side,
ZooKeeper, the embedded broker, certificates and plots come with extras, or all of them
with `drfmesos[all]`. Each optional library is imported only where it is used, inside
`needs(...)`, so a missing one is named with the extra that brings it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

EXTRAS = {
    "master": "the master (its HTTP API, web UI and /metrics)",
    "ha": "several masters on ZooKeeper (--zk)",
    "embedded": "the embedded broker (--broker embedded)",
    "tls": "making certificates (drfmesos auth init)",
    "plots": "experiment plots",
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
