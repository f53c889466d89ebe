"""An edit of the roles file made while the master runs is kept, not erased (newcomer91).

The master reads its roles file once, at its start, and writes it anew after each run-time
change (`drfmesos weights set`, `quota set`). An operator who edited the file by hand
meanwhile (a new role, a weight changed) saw the edit applied nowhere and then erased by
the next change, without a word. Now the master keeps what it would write over beside
the file, `<name>.edited-<time>`, and says so in a warning that names both.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from master.master import MasterConfig
from master.roles_file import load_roles
from protocol.wire.messages import SetWeights

from harness.helpers import eventually, in_process_cluster, open_transport

FILE = "roles:\n  eng/web: {weight: 2}\n"
EDIT = "roles:\n  eng/web: {weight: 3}\n  eng/ml: {weight: 5}\n"


async def weigh(tmp_path: Path, edit: str | None) -> tuple[Path, list[Path], list[Any]]:
    """A master on a roles file (edited by hand to `edit` once it runs, if given), then
    `drfmesos weights set eng/batch=1`: the file, what was kept beside it, the warnings."""
    roles = tmp_path / "roles.yaml"
    roles.write_text(FILE)
    config = dataclasses.replace(MasterConfig(), roles=roles)
    async with (
        in_process_cluster("edits", tmp_path, config, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        ops = await open_transport(stack, c.connect, "ops", inbox=c.topics.operator("ops"))
        if edit is not None:
            roles.write_text(edit)
        with capture_logs() as logs:
            await ops.publish(
                c.topics.inbound("operator", "ops"), SetWeights(weights={"eng/batch": 1})
            )
            await eventually(lambda: c.master.allocator.roles.weight("eng/batch") == 1)
            await eventually(lambda: "eng/batch" in load_roles(roles).roles)
            if edit is not None:  # (said once the file's write is back from its thread)
                await eventually(lambda: any(e["event"] == "roles.file_edited" for e in logs))
    return roles, kept_beside(roles), [e for e in logs if e["event"] == "roles.file_edited"]


def kept_beside(roles: Path) -> list[Path]:
    return sorted(roles.parent.glob(f"{roles.name}.edited-*"))


async def test_a_hand_edit_is_kept_beside_the_file_and_said(tmp_path: Path) -> None:
    roles, kept, warnings = await weigh(tmp_path, EDIT)
    written = load_roles(roles).roles
    assert set(written) == {"eng/web", "eng/batch"}  # the master's, as it runs
    assert written["eng/web"].weight == 2
    assert [k.read_text() for k in kept] == [EDIT]  # the edit, as its writer wrote it
    assert len(warnings) == 1
    assert warnings[0]["kept"] == str(kept[0])


async def test_a_file_nobody_edited_is_written_with_nothing_kept(tmp_path: Path) -> None:
    """The master's own layout differs from the operator's (comments, order): only what
    the file says, not how, counts as an edit."""
    _, kept, warnings = await weigh(tmp_path, None)
    assert (kept, warnings) == ([], [])
