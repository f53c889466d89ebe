"""What Mesos's APIs use of a master, and nothing more: its books and policy to read as
Mesos's JSON, its counters, its change listeners (the operator stream), the one way a
call goes in (the intake), and the sinks and topics a scheduler stream is served by.
Built from the master's parts by the composition root (`master.mesos_api.doors`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from master.allocation.allocator import Allocator
from master.authz import Caller
from master.books import Books
from master.changes import Changes
from master.config import MasterInfo
from master.counters import SlaveChurn
from master.why_answers import Refusal
from protocol.wire.messages import Gone, Wire
from protocol.wire.topics import Topics
from protocol.wire.why import Why


@dataclass(frozen=True)
class MasterSide:
    info: MasterInfo
    books: Books
    allocator: Allocator
    churn: SlaveChurn
    tasks_ended: Mapping[str, int]  # by terminal state
    changes: Changes
    rounds_run: Callable[[], int]  # allocation rounds so far
    web_ui: Callable[[], str]  # where the master serves HTTP ("" before it does)
    call: Callable[[Wire, Caller], Awaitable[None]]  # a call in, as over the bus
    connection_gone: Callable[[Caller, Gone], Awaitable[None]]  # as the bus's Last Will
    # a framework's topic served by a stream: what the master says there goes to its sink
    sinks: dict[str, Callable[[Wire], None]]
    topics: Topics
    # why a framework is offered nothing (framework, asker's kind, principal)
    why_of: Callable[[str, str, str], Why | Refusal]
