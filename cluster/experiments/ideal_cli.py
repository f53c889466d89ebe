"""`drfmesos ideal SPEC`: the allocation a policy would reach for a spec, tasks infinitely
divisible (see `master.allocation.ideal`), as a table or JSON."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cluster.experiments.ideal_timeline import (
    arrival_order,
    as_allocated,
    limits,
    pools,
    user_of,
)
from cluster.experiments.spec import Spec, SpecError, load_spec
from master.allocation.fair_shares import IDEAL_POLICY
from master.allocation.ideal import POLICIES, IdealError, Share, exact, ideal
from protocol.wire.resources import Resources

EXACT = tuple(p for p in POLICIES if p != "ceei")  # policies whose ideal is exact


def spec_ideal(spec: Spec, policy: str) -> dict[str, Share]:
    """The ideal for a spec under the allocator's `policy` (`as_allocated`: weighed as
    the allocator weighs): its cluster's totals and each framework's first task size."""
    total = sum((r for _, r in spec.cluster.nodes()), Resources())
    users = [  # trace- and job-driven frameworks have no one task shape: left out
        user_of(fw, task)
        for fw in arrival_order(spec.frameworks, policy)
        if (task := fw.task or (fw.changes[0].task if fw.changes else None)) is not None
    ]
    weights = spec.role_weights()
    question, weighed = as_allocated(policy, users, spec.frameworks, weights)
    return ideal(
        question,
        {r: exact(v) for r, v in total.items()},
        weighed,
        pools(weights),
        limits(spec.master.quota),
    )


def as_json(policy: str, shares: dict[str, Share]) -> dict[str, object]:
    """`{"policy": P, "frameworks": {NAME: {"tasks", "dominant_share", "resources"}}}`;
    numbers as floats, with each exact fraction beside it as a string where the policy's
    ideal is exact (ceei's is a numerical solution, snapped to a nearby fraction)."""

    def num(f: Fraction) -> float:
        return float(f)

    def row(s: Share) -> dict[str, object]:
        out: dict[str, object] = {
            "tasks": num(s.tasks),
            "dominant_share": num(s.dominant_share),
            "resources": {r: num(v) for r, v in sorted(s.resources.items())},
        }
        if IDEAL_POLICY.get(policy, policy) in EXACT:
            out["exact"] = {
                "tasks": str(s.tasks),
                "dominant_share": str(s.dominant_share),
                "resources": {r: str(v) for r, v in sorted(s.resources.items())},
            }
        return out

    return {"policy": policy, "frameworks": {name: row(s) for name, s in shares.items()}}


@click.command("ideal")
@click.argument("spec_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--policy",
    type=click.Choice(tuple(IDEAL_POLICY)),
    default=None,
    help="The allocator's policy, as the master weighs it (drf: weighted by roles; "
    "slots: DRF). Default: the spec's master policy.",
)
@click.option("--json", "json_out", is_flag=True, help="JSON instead of a table.")
def ideal_command(spec_path: Path, policy: str | None, json_out: bool) -> None:
    """The continuous allocation POLICY reaches for SPEC: infinitely divisible tasks,
    exact fractions, progressive filling (the paper's §4)."""
    try:
        spec = load_spec(spec_path)
        chosen = policy or spec.master.policy
        shares = spec_ideal(spec, chosen)
    except (SpecError, IdealError) as e:
        raise click.ClickException(str(e)) from None
    if json_out:
        click.echo(json.dumps(as_json(chosen, shares), indent=2))
        return
    table = Table(title=f"{spec.name}: the {chosen} ideal", title_justify="left")
    for col in ("framework", "tasks", "dominant share", "resources"):
        table.add_column(col, justify="left" if col in ("framework", "resources") else "right")
    for name, s in shares.items():
        resources = ", ".join(f"{r} {_fmt(v)}" for r, v in sorted(s.resources.items()))
        table.add_row(
            name, _fmt(s.tasks), f"{float(s.dominant_share):.1%} ({s.dominant_share})", resources
        )
    Console().print(table)


def _fmt(value: Fraction) -> str:
    return str(value) if value.denominator == 1 else f"{float(value):.4g} ({value})"
