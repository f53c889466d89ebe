"""What the HTTP server says about its clients, as one structured line each.

aiohttp logs a request it cannot parse (an over-long request line, garbage on the port)
with a multi-line traceback, before any credential is checked: anyone who can reach the
port could fill the master's disk. A client's protocol error is not our failure, so it
becomes one short `http.bad_request` line, at most a few a second (with how many were
left out); a failure of ours is still logged with its traceback. A request refused for
who sent it (no credentials, the wrong ones, a bad call) is a line too, a few a second per
principal or, before credentials, per client address (`RefusedLines`), its fields cut.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from master.refusal_sampling import RefusalSampling
from protocol import logs

LINES_PER_SECOND = 5  # bad-request lines logged at most
ADDRESSES_KEPT = 4096  # client addresses whose refused requests' lines are counted, at most


class ClientErrors(logging.Logger):
    """The logger aiohttp's request handler is given (`AppRunner(..., logger=...)`)."""

    def __init__(self, log: Any) -> None:
        super().__init__("drfmesos.http", logging.DEBUG)
        self.out = log
        self._window = 0.0
        self._lines = 0
        self.left_out = 0

    def handle(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            self._client_error(error, record)
        elif record.levelno >= logging.WARNING:  # ours: the whole story
            self.out.error("http.failed", message=logs.clip(record.getMessage()), exc_info=error)

    def _client_error(self, error: HttpProcessingError, record: logging.LogRecord) -> None:
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._window, self._lines = now, 0
        if self._lines >= LINES_PER_SECOND:
            self.left_out += 1
            return
        self._lines += 1
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else None
        self.out.warning(
            "http.bad_request",
            remote=str(remote),
            status=error.code,
            error=logs.clip(f"{type(error).__name__}: {error.message}", 200),
            unlogged=self.left_out,
        )
        self.left_out = 0


FLUSH_AFTER = 1.0  # seconds after a line is left out that what was left out is told


class RefusedLines:
    """The lines about HTTP requests refused for their sender, as the bus's refusals are
    logged (`master.outbox.Outbox.refuse`): a few a second for each principal (each line
    saying how many were left out since its last, by event: `unlogged_by_code`), for each
    client address before credentials are known, and every other party's text in them cut
    to `logs.MAX_TEXT` characters a field: neither a flood of bad requests nor what they
    carry makes the master's log long."""

    def __init__(self, log: Any) -> None:
        self.out = log
        self.sampling = RefusalSampling(most_keys=ADDRESSES_KEPT)
        self._flush: asyncio.TimerHandle | None = None  # (`_flush_later`)

    def refused(
        self,
        event: str,
        *,
        principal: str = "",
        remote: str | None = None,
        code: str = "",
        **fields: Any,
    ) -> None:
        """Log `event` about a request of `principal` (none: of the client at `remote`),
        if its sender's lines are not over their rate; one left out is counted by its
        `code` (none: by its event)."""
        key = f"principal {principal}" if principal else f"address {remote}"
        said: dict[str, Any] = {"principal": principal} if principal else {}
        if code:
            said["code"] = code
        said = {"event": event, "remote": remote, **said, **fields}
        sampled = self.sampling.line(key, code or event, time.monotonic(), said)
        if sampled is None:
            self._flush_later()
            return
        self._emit(said, sampled)

    def _emit(self, said: dict[str, Any], sampled: dict[str, Any]) -> None:
        """A line, its fields cut (only when it is logged: most of a flood's are not)."""
        cut = {k: logs.clip(v) if isinstance(v, str) else v for k, v in said.items()}
        self.out.info(**cut, **sampled)

    def _flush_later(self) -> None:
        """Log what was left out once its senders' rates let it (`RefusalSampling.due`),
        FLUSH_AFTER from now, and again while some is left."""
        if self._flush is None or self._flush.cancelled():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # (no loop: read where it is asked, by a test)
                return
            self._flush = loop.call_later(FLUSH_AFTER, self._flush_now)

    def _flush_now(self) -> None:
        self._flush = None
        for _, said, sampled in self.sampling.due(time.monotonic()):
            self._emit(said, sampled)
        if self.sampling.unlogged:
            self._flush_later()

    def close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
