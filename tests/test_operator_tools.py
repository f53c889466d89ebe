"""`drfmesos state` as an operator reads it: whole when piped, and `--json` a consistent
document (offers and tasks both listed)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import cluster.local.view
from cluster.cli import main
from cluster.local.demo import framework_table
from protocol.wire.messages import FrameworkView, Offer, State, TaskState, TaskView
from protocol.wire.resources import Resources

WIDE = Resources(cpus=12.5, mem=65536, disk=250000, gpus=2)


def snapshot() -> State:
    framework = FrameworkView(
        framework_id="fw-0123456789abcdef0123", principal="a-rather-long-principal-name",
        name="parameter-sweep-framework", role="research/parameter-sweeps", weight=1,
        active=True, suppressed=False, allocated=WIDE, offered=Resources(), dominant_share=0.5,
        running_tasks=1, finished_tasks=0, fair_share=0.5,
    )  # fmt: skip
    return State(
        master_id="master-0123456789abcdef",
        timestamp=0,
        policy="hdrf",
        total=WIDE,
        allocated=WIDE,
        frameworks=[framework],
        slaves=[],
        offer_count=1,
        offers=[
            Offer(
                offer_id="o1",
                framework_id=framework.framework_id,
                slave_id="s1",
                hostname="node-1",
                resources=Resources(mem=512),
            )
        ],
        tasks=[
            TaskView(
                task_id="t1",
                framework_id=framework.framework_id,
                slave_id="s1",
                state=TaskState.RUNNING,
                resources=WIDE,
            )
        ],
    )


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> State:
    snap = snapshot()

    async def fetch(*_args: object, **_options: object) -> State:
        return snap

    monkeypatch.setattr(cluster.local.view, "fetch_state", fetch)
    return snap


def test_state_piped_shows_every_column_whole(state: State) -> None:
    out = CliRunner().invoke(main, ["state", "--broker", "mqtt://127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    assert "…" not in out.output  # nothing cut to the 80 columns of no terminal
    for whole in ("a-rather-long-principal-name", "research/parameter-sweeps", str(WIDE)):
        assert whole in out.output


def test_state_json_lists_offers_as_it_lists_tasks(state: State) -> None:
    out = CliRunner().invoke(main, ["state", "--json", "--broker", "mqtt://127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert [o["offer_id"] for o in doc["offers"]] == ["o1"]
    assert [t["task_id"] for t in doc["tasks"]] == ["t1"]
    assert doc["offer_count"] == 1


HOSTILE_NAMES = ("[/bold][link=http://x]EV[/link][blink]IL", "[red]x", ":smile: [", "a\\[b]")


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_tenants_name_is_shown_as_written_never_read_as_markup(state: State, name: str) -> None:
    """A framework's name is its tenant's: rich markup in it once failed `drfmesos state`
    for every operator (MarkupError) until the framework was torn down."""
    state.frameworks[0].name = name
    state.tasks[0].task_id = name
    out = CliRunner().invoke(main, ["state", "--broker", "mqtt://127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    assert out.output.count(name) == 3  # its framework's row; its task's id and framework


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_the_demos_table_shows_a_name_as_written(state: State, name: str) -> None:
    from rich.console import Console

    state.frameworks[0].name = name
    console = Console(record=True, width=200)
    console.print(framework_table(state, 1.0))
    assert name in console.export_text()


@pytest.mark.parametrize(
    "bad", ["team-a=inf", "=2", "x=1e308", "x=-1", "x=nan", "x", f"{'r' * 201}=1"]
)
def test_a_bad_weight_is_a_usage_error_not_a_traceback(bad: str) -> None:
    out = CliRunner().invoke(main, ["weights", "set", bad, "--broker", "mqtt://127.0.0.1:1"])
    assert out.exit_code == 2, out.output  # click's usage error: nothing was sent
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
