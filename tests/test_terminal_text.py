"""What a tenant chose reaches an operator's terminal as text: `drfmesos events`, `state`
and the master's log on a terminal escape every character a terminal would obey
(tests/test_review72_event_escapes.py follows one through a live master)."""

from __future__ import annotations

import io

from rich.console import Console

from cluster.local.events import event_line
from cluster.local.view import render_state
from protocol import logs
from protocol.tooling.terminal import printable
from protocol.wire.messages import ClusterEvent
from protocol.wire.resources import Resources
from protocol.wire.views import FrameworkView, State

CLEAR = "\x1b[2J\x1b[H"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\x07"
BIDI = "\u202egnp.exe"  # a right-to-left override: reads as "exe.png"


def test_printable_escapes_what_a_terminal_obeys_and_keeps_the_rest() -> None:
    assert printable("team-a fw-1 ünïcode 日本") == "team-a fw-1 ünïcode 日本"
    assert printable(f"t{CLEAR}") == "t\\x1b[2J\\x1b[H"
    assert printable(CLIPBOARD) == "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\\x07"
    assert printable(BIDI) == "\\u202egnp.exe"
    assert printable("a\nb\tc\x9bd") == "a\\x0ab\\x09c\\x9bd"
    assert printable("o state=TASK_FINISHED", spaces=False) == "o\\x20state=TASK_FINISHED"


def test_an_event_line_holds_no_control_character_nor_a_faked_field() -> None:
    event = ClusterEvent(
        kind="launch_refused",
        framework_id="fw-1",
        task_id=f"t{CLEAR}",
        offer_id="o state=TASK_FINISHED",
        detail=f"offer o{CLIPBOARD} is not outstanding",
        timestamp=0.0,
    )
    line = event_line(event)
    assert line.isprintable(), line
    assert "state=" not in line.replace("\\x20state=", "")  # (the id's space is escaped)
    assert "\\x1b]52" in line  # (the operator still reads what was sent)


def test_drfmesos_state_prints_a_tenants_name_as_text() -> None:
    framework = FrameworkView(
        framework_id="fw-1",
        principal="mallory",
        name=f"m{CLEAR}{BIDI}",
        role="mallory",
        weight=1.0,
        active=True,
        suppressed=False,
        allocated=Resources(),
        offered=Resources(),
        dominant_share=0.0,
        running_tasks=0,
        finished_tasks=0,
    )
    state = State(
        master_id="m",
        timestamp=0.0,
        policy="drf",
        total=Resources(cpus=1),
        allocated=Resources(),
        frameworks=[framework],
        slaves=[],
        offer_count=0,
    )
    written = io.StringIO()
    Console(file=written, width=200, force_terminal=True).print(render_state(state))
    printed = written.getvalue()
    # (rich's own styles are escape sequences too: none of the tenant's may be among them)
    assert "\x1b[2J" not in printed
    assert "\u202e" not in printed
    assert "m\\x1b[2J\\x1b[H\\u202egnp.exe" in printed


def test_the_masters_log_on_a_terminal_escapes_other_parties_text() -> None:
    written = io.StringIO()
    logs.configure("info", json=False, stream=written)
    try:
        logs.get("test").warning("master.refused", task_id=f"t{CLEAR}", reason=CLIPBOARD)
    finally:
        logs.configure("warning", json=True)  # (as conftest has it)
    said = written.getvalue()
    assert "\x1b[2J" not in said
    assert "\x1b]52" not in said
    assert "t\\x1b[2J" in said
