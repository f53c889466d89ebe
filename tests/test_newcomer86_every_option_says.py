"""The drfmesos command as a newcomer types it: `--help` says what each option does, a
value that does not parse is refused naming its option, and an unknown command says
which was meant. A newcomer read
`--timeout FLOAT  [default: 10.0]` under `drfmesos state`, `why`, `quota`, `slaves ...`
(a timeout of what?), and a bare `--cpus FLOAT RANGE` under `drfmesos run`. The reference
page (docs/reference/cli.md) is made from the same help, so it said no more."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from cluster.cli import main


def commands(group: click.Group, ctx: click.Context, path: str) -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += commands(command, click.Context(command, parent=ctx), f"{path} {name}")
        else:
            found.append((f"{path} {name}", command))
    return found


def test_every_option_of_every_command_has_help() -> None:
    silent = [
        f"{path} {'/'.join(param.opts)}"
        for path, command in commands(main, click.Context(main), "drfmesos")
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert not silent, silent


def test_the_operators_timeout_says_what_it_waits_for() -> None:
    state = main.get_command(click.Context(main), "state")
    assert state is not None
    text = state.get_help(click.Context(state, info_name="state"))
    assert "Seconds to wait for the master's answer" in text


def test_a_slave_value_that_does_not_parse_names_its_option(tmp_path: Path) -> None:
    """`drfmesos slave --resources 'cpus=2;mem=2048'` (a Mesos agent's `cpus:2`, misremembered)
    said 'Invalid value: expected name:amount...', naming no option among the slave's
    thirty; each of its parsed options is named now."""
    work = ["--work-dir", str(tmp_path / "slave"), "--broker", "mqtt://127.0.0.1:1"]
    for option, value in (
        ("--resources", "cpus=2;mem=2048"),
        ("--resources", "cpus:2;fpgas:1"),  # (a custom one, not declared)
        ("--attributes", "rack"),
        ("--task-env", "=VALUE"),  # (no name)
    ):
        done = CliRunner().invoke(main, ["slave", option, value, *work])
        assert done.exit_code == 2, (option, value, done.output)
        assert f"Invalid value for {option}" in done.output, done.output
    assert not (tmp_path / "slave").exists()  # (refused before anything is made)


def test_an_unknown_command_says_which_was_meant() -> None:
    """`drfmesos agent` (a Mesos user's word) and `drfmesos stat` (a typo) said only
    'No such command'."""
    for typed, says in (
        (["agent"], "Mesos's agent is 'slave' here"),
        (["mesos-execute", "--", "true"], "Mesos's mesos-execute is 'run' here"),
        (["stat"], "Did you mean 'state'?"),
        (["qouta", "set"], "Did you mean 'quota'?"),
    ):
        done = CliRunner().invoke(main, typed)
        assert done.exit_code == 2, done.output
        assert f"No such command '{typed[0]}'" in done.output
        assert says in done.output, done.output
    done = CliRunner().invoke(main, ["zzz"])  # (nothing near: click's own words)
    assert done.exit_code == 2
    assert "No such command 'zzz'." in done.output
