"""Why a framework is offered nothing: the question (`AskWhy`, an operator's or the
framework's own), the answer (`Why`), and its reasons, each a code and the numbers behind
it. The master computes them (`master.cycle.why`), the simulator too; the CLI, the HTTP
API, the web UI and the SDK show them. The first reason is the one that explains."""

from __future__ import annotations

from pydantic import Field

from protocol.wire.resources import Resources
from protocol.wire.values import Id, Wire
from protocol.wire.why_codes import Figure, WhyCode


class WhyReason(Wire):
    """One reason: its code, a sentence for people, and the numbers behind it (the how-to
    lists each code's)."""

    code: WhyCode
    message: str = Field(max_length=2000)
    numbers: dict[str, Figure] = Field(default_factory=dict, max_length=50)


class WhyOffered(Wire):
    """An offer a framework was made lately: what, of which slave, and how long ago."""

    slave_id: str
    resources: Resources
    seconds_ago: float = Field(ge=0)
    at: float = 0.0  # wall clock, seconds since the epoch (0: not known)


class AskWhy(Wire):
    """Operator or framework -> master: why is this framework (its id, or its name) offered
    nothing? A framework principal may ask of its own frameworks only. Answered with `Why`
    (or an Error about `AskWhy`) on the asker's `reply_to`, inside its own outbox."""

    framework: Id
    request_id: str = Field(default="", max_length=64)  # echoed in the answer


class Why(Wire):
    """Master -> asker: the reasons, the one that explains first; the offers it was made
    in the master's recent rounds, newest first; how many rounds those cover."""

    framework_id: str
    name: str
    role: str  # (a multi-role framework's first; `roles` names them all)
    request_id: str = ""  # the question's
    reasons: list[WhyReason] = Field(default_factory=list, max_length=50)
    offered: list[WhyOffered] = Field(default_factory=list, max_length=50)
    rounds: int = 0  # rounds that made offers, remembered: `offered` looks back this far
    since: float = 0.0  # seconds: how far back they go (0: no round made offers yet)
    timestamp: float = 0.0  # wall clock, when the master answered
    roles: list[str] | None = None  # a multi-role framework's

    @property
    def top(self) -> WhyReason | None:
        return self.reasons[0] if self.reasons else None
