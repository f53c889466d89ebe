"""structlog, configured once for every drfmesos process.

JSON lines when stderr is not a terminal (for machines and log shippers), a readable
coloured line when it is. Ids travel as fields: bind them once with
`log = log.bind(framework_id=...)` and every line carries them.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "info", *, json: bool | None = None, stream: Any = None) -> None:
    stream = stream or sys.stderr
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # Libraries log through stdlib logging; keep them quiet unless asked.
    logging.basicConfig(level=logging.WARNING, stream=stream)
    # amqtt logs every client that drops as an ERROR; that is routine for us.
    logging.getLogger("amqtt").setLevel(logging.CRITICAL)
    logging.getLogger("transitions").setLevel(logging.ERROR)
    # aiomqtt warns on every publish once more than ten await their PUBACK: we pipeline
    # thousands on purpose.
    logging.getLogger("mqtt").setLevel(logging.ERROR)


def configure_default() -> None:
    """For library use (a framework written against the SDK that configured nothing):
    warnings and errors to stderr, instead of structlog's default of everything to stdout."""
    if not structlog.is_configured():
        configure("warning")


def _level_number(level: str) -> int:
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {level!r}; one of {', '.join(LEVELS)}")
    return number


def get(name: str, **ids: Any) -> Any:
    """A bound logger for one component, with its ids as fields."""
    # get_logger stays lazy, so loggers made at import time follow a later configure().
    return structlog.get_logger(name, component=name, **ids)
