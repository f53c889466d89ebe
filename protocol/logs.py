"""structlog, configured once for every drfmesos process.

JSON lines when stderr is not a terminal (for machines and log shippers), a readable
coloured line when it is. Ids travel as fields: bind them once with
`log = log.bind(framework_id=...)` and every line carries them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from protocol.tooling.terminal import printable

LEVELS = ("debug", "info", "warning", "error")


_generation = 0  # how many times configure() ran: a logger made under an older one is remade
# the level configure() set: a line under it is dropped by _Logger before anything is
# assembled for it (0 until configure() runs: a library's logger leaves it to logging)
_dropped_below = 0


def configure(level: str = "info", *, json: bool | None = None, stream: Any = None) -> None:
    global _generation, _dropped_below
    stream = stream or sys.stderr
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    renderer: Any = (
        # a value JSON does not know (Resources, say) is written as its str(): formatted
        # only for a line that is written, not for every one a level drops
        structlog.processors.JSONRenderer(default=str)
        if json
        else structlog.dev.ConsoleRenderer(colors=True)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            # (JSON escapes control characters itself; the console writes str values as
            # they are, to a terminal that obeys them)
            *([] if json else [_printable_values]),
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
    # aiomqtt warns on every publish once more than ten await their PUBACK (we pipeline
    # thousands on purpose), and paho logs a connection the broker ended as an ERROR, in a
    # line of its own: the bus says so itself (bus.disconnected, structured).
    logging.getLogger("mqtt").setLevel(logging.CRITICAL)
    _dropped_below = _level_number(level)
    _generation += 1


def _printable_values(
    _logger: Any, _name: str, fields: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A line for a terminal: other parties' text in its str values (an id, a name, a
    refusal's words) escaped where a terminal would obey it (`protocol.tooling.terminal`);
    a traceback keeps its lines."""
    for key, value in fields.items():
        if type(value) is str and not value.isprintable():
            lines = value.split("\n") if key == "exception" else [value]
            fields[key] = "\n".join(map(printable, lines))
    return fields


def _level_number(level: str) -> int:
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"unknown log level {level!r}; one of {', '.join(LEVELS)}")
    return number


MAX_TEXT = 400  # characters of another party's free text in one log field


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """Another party's free text, cut for a log line: nobody makes our lines long."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def get(name: str, **ids: Any) -> Any:
    """A bound logger for one component, with its ids as fields."""
    return _Logger(name, ids)


def _library_logger(name: str, ids: dict[str, Any]) -> Any:
    """Where a process that configured nothing (a framework written against the SDK) logs:
    through stdlib logging, as `drfmesos.NAME`, so the application decides what is shown
    (left alone, Python prints warnings and errors to stderr). A library must not configure
    logging for the whole process, so nothing here does."""
    return structlog.wrap_logger(
        logging.getLogger(f"drfmesos.{name}"),
        processors=[
            structlog.stdlib.filter_by_level,
            _traceback_by_stdlib,
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"]),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    ).bind(component=name, **ids)


def _traceback_by_stdlib(
    _logger: Any, method: str, fields: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """stdlib's `Logger.exception` prints the traceback under the line, as Python prints
    one: the line need not carry it a second time, escaped into one field."""
    if method == "exception":
        fields.pop("exc_info", None)
    return fields


class _Logger:
    """structlog's lazy logger, assembled once per `configure()`.

    Loggers made at import time must follow a later configure(), so they stay lazy; but
    structlog's lazy proxy assembles a new logger on every call (about 3 us, even for a
    line its level drops, and the task loop makes several a task). This one keeps what it
    assembled until configure() runs again. (`structlog.configure` called directly, not
    through `configure`, is followed by loggers not yet used, not by ones already used.)
    """

    __slots__ = ("_generation", "_ids", "_logger", "_name")

    def __init__(self, name: str, ids: dict[str, Any]) -> None:
        self._name, self._ids = name, ids
        self._logger: Any = None
        self._generation = -1

    def _assembled(self) -> Any:
        if self._generation != _generation:
            if structlog.is_configured():
                lazy = structlog.get_logger(self._name, component=self._name, **self._ids)
                self._logger = lazy.bind()
            else:
                self._logger = _library_logger(self._name, self._ids)
            self._generation = _generation
        return self._logger

    def bind(self, **ids: Any) -> Any:
        return self._assembled().bind(**ids)

    # the levels, spelt out: a lookup that falls through to __getattr__ costs more than them
    # (a line its level drops returns at once: the filtering logger's no-op was a second
    # call with the fields packed again, after the generation's check, and a task's way
    # through a slave logs three at info)
    def debug(self, event: str, **fields: Any) -> Any:
        if _dropped_below > logging.DEBUG:
            return None
        return self._assembled().debug(event, **fields)

    def info(self, event: str, **fields: Any) -> Any:
        if _dropped_below > logging.INFO:
            return None
        return self._assembled().info(event, **fields)

    def warning(self, event: str, **fields: Any) -> Any:
        return self._assembled().warning(event, **fields)

    def error(self, event: str, **fields: Any) -> Any:
        return self._assembled().error(event, **fields)

    def exception(self, event: str, **fields: Any) -> Any:
        return self._assembled().exception(event, **fields)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._assembled(), name)
