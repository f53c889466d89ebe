"""Simulator speed: simulated task events (starts and finishes) per second.

    python -m benchmarks.simulator

Runs the §7.3-style trace (400 nodes, ten users, examples/experiments/paper-7.3.yaml)
under DRF and under slot-based sharing, and the §7.2 workload (48 nodes, 8 users).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import table
from cluster.simulator import simulate
from cluster.spec import Master, load_spec

EXAMPLES = Path(__file__).parent.parent / "examples" / "experiments"


def main() -> None:
    rows = []
    for name, policy, slots in (
        ("paper-7.3", "drf", None),
        ("paper-7.3", "slots", 12),
        ("paper-7.2", "drf", None),
        ("paper-7.2", "slots", 4),
    ):
        spec = load_spec(EXAMPLES / f"{name}.yaml")
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
                policy,
                nodes,
                f"{spec.run.duration:g}",
                speed["task_events"],
                speed["wall_seconds"],
                speed["events_per_second"],
            ]
        )
    print("simulator speed (task events = task starts + finishes)")
    print(
        table(["spec", "policy", "nodes", "simulated s", "task events", "wall s", "events/s"], rows)
    )


if __name__ == "__main__":
    main()
