"""Simulator speed: simulated task events (starts and finishes) per second.

    python -m benchmarks.simulator

Runs the §7.3-style trace (400 nodes, ten users, examples/experiments/paper-7.3.yaml)
under DRF and under slot-based sharing, and the §7.2 workload (48 nodes, 8 users); DRF
both as the paper's frameworks behave (declining what they cannot use) and with offer
filters (`min_offer`: offered only slaves with room for a task), which ends the declines.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import table
from cluster.simulator import simulate
from cluster.spec import Master, load_spec

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"


def main() -> None:
    rows = []
    for name, policy, slots, min_offer in (
        ("paper-7.3", "drf", None, False),
        ("paper-7.3", "drf", None, True),
        ("paper-7.3", "slots", 12, False),
        ("paper-7.2", "drf", None, False),
        ("paper-7.2", "drf", None, True),
        ("paper-7.2", "slots", 4, False),
    ):
        spec = load_spec(EXAMPLES / f"{name}.yaml")
        for fw in spec.frameworks:
            fw.min_offer = min_offer
        spec.master = Master.model_validate(
            {
                **spec.master.model_dump(),
                "policy": policy,
                **({"slots_per_node": slots} if slots else {}),
            }
        )
        _, speed = simulate(spec)
        nodes = len(spec.cluster.nodes())
        rows.append(
            [
                name,
                policy + (" + min_offer" if min_offer else ""),
                nodes,
                f"{spec.run.duration:g}",
                speed["task_events"],
                speed["wall_seconds"],
                speed["events_per_second"],
                speed["offers"],
                speed["declines"],
            ]
        )
    print("simulator speed (task events = task starts + finishes)")
    print(
        table(
            [
                "spec",
                "policy",
                "nodes",
                "simulated s",
                "task events",
                "wall s",
                "events/s",
                "offers",
                "declines",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
