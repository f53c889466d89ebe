"""The retained state snapshot stays publishable whatever tenants write: names and status
messages past its budget leave its tasks counted, not listed (a snapshot over the
broker's limit was dropped, and every tool read a stale one with no warning)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from master.master import LISTED_TEXT, MasterConfig
from protocol.wire.messages import CommandInfo, State, TaskInfo, TaskState, TaskView
from protocol.wire.resources import Resources

from harness.helpers import Inbox, in_process_cluster, open_transport


def test_a_tasks_name_is_a_label_not_a_document() -> None:
    fields: dict[str, Any] = {"task_id": "t", "slave_id": "s", "resources": Resources(cpus=1)}
    TaskInfo(**fields, name="n" * 1024, command=CommandInfo(value="true"))
    with pytest.raises(ValidationError):
        TaskInfo(**fields, name="n" * 1025, command=CommandInfo(value="true"))


@pytest.mark.parametrize("listed", [True, False])
async def test_a_snapshot_too_wordy_to_list_its_tasks_counts_them(
    tmp_path: Path, listed: bool
) -> None:
    config = MasterConfig(allocation_interval=0.1, state_interval=0.05)
    async with (
        in_process_cluster("wordy", tmp_path, config, slaves=0) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        words = LISTED_TEXT // 4 if listed else 2 * LISTED_TEXT
        said = "x" * (words // 4)  # four tasks' messages: an executor's to say
        real_state = c.master.views.state

        def wordy(include_tasks: bool = True) -> State:
            view = TaskView(
                task_id="t", framework_id="f", slave_id="s", state=TaskState.RUNNING,
                resources=Resources(cpus=1), message=said,
            )  # fmt: skip
            state = real_state(include_tasks)
            return state.model_copy(update={"master_id": "wordy", "tasks": [view] * 4})

        c.master.views.state = wordy  # type: ignore[method-assign]
        ops = await open_transport(stack, c.broker.connector(None), "ops")
        snapshots = Inbox()
        await ops.subscribe(c.topics.state, snapshots)
        c.master.outbox.state_changed()
        state = await snapshots.wait_for(State, lambda s: s.master_id == "wordy")
        assert len(state.tasks) == (4 if listed else 0)
