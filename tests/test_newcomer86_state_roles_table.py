"""`drfmesos state`'s roles table: a newcomer read a last column with no title and
nothing in it, under every role of the sharing tutorial. It is there, titled `note`,
only when a role's guarantee cannot be met, and says why."""

from __future__ import annotations

from rich.console import Console

from cluster.local.view import render_state
from protocol.wire.resources import Resources
from protocol.wire.views import RoleView, State


def roles_table(roles: list[RoleView]) -> list[str]:
    state = State(
        master_id="m",
        timestamp=0.0,
        policy="hdrf",
        total=Resources(cpus=4),
        allocated=Resources(),
        frameworks=[],
        slaves=[],
        offer_count=0,
        roles=roles,
    )
    console = Console(record=True, width=160)
    console.print(render_state(state))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    start = lines.index("roles")
    return lines[start + 1 : start + 4]  # its top border, its header and the rule below


def test_no_untitled_empty_column_when_every_guarantee_can_be_met() -> None:
    top, header, _ = roles_table([RoleView(role="eng", weight=1.0, share=0.5, promise=1.0)])
    assert header.split() == ["┃", "role", "┃", "weight", "┃", "promise", "┃", "share", "┃",
                              "guarantee", "┃", "limit", "┃"]  # fmt: skip
    assert not top.endswith("┳━━┓")  # (the untitled column's corner)


def test_a_role_whose_guarantee_cannot_be_met_has_a_note() -> None:
    roles = [
        RoleView(role="eng", weight=1.0, share=0.5),
        RoleView(role="big", weight=1.0, share=0.0, unsatisfiable="more cpus than the cluster"),
    ]
    _, header, _ = roles_table(roles)
    assert header.split()[-2:] == ["note", "┃"]
