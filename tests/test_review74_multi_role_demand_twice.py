"""Review 74: a multi-role framework's declared demand is wanted in full in each of its
roles, so its fair share is up to its demand times its roles, and the honest tenants
beside it are owed less.

`fair_allocation` gives a multi-role framework a user in each role, each wanting what it
holds there plus everything it declared (`want[...] += amount * count` per role). mallory,
allowed roles `m` and `e`, declares 2 tasks <1 CPU, 1 GB> in all; alice in `e` declares 8,
the hog in `m` wants more of what it runs; 8 CPUs. Counted once, wherever it goes,
mallory is owed 2 CPUs (and alice 4 with mallory's demand in `m`, 2 with it in `e`); as
the ideal has it she is owed 4 -- 2 in each role -- and alice and the hog 2 each.
Since 67c2df5 planning weighs each part on its own (`fair_held` of `mallory\\0e`): alice
at 3 tasks reads over her share in `e` (2), a victim there for mallory's claim, though
mallory asked for 2 tasks in all. (The ideal's double count predates today; planning
now acts on it part by part.) The docs: a fair share is "capped by" what a framework
"holds and still wants".

Fixed: its parts still want its demand in each role (wherever it may go), under one cap
they share -- what it holds in all its roles and declared (`ideal`'s `caps`).
"""

from __future__ import annotations

from master.allocation.fair_shares import Contender, fair_allocation

TASK = {"cpus": 1000, "mem": 1024}
TOTAL = {"cpus": 8000, "mem": 8192}


def test_a_multi_role_framework_is_owed_no_more_than_it_declared() -> None:
    mallory = Contender(
        "mallory", "m", 2.0, {}, True, demand=[(TASK, 2)], tenant="mallory",
        roles=(("m", {}, 1.0), ("e", {}, 1.0)),
    )  # fmt: skip
    alice = Contender("alice", "e", 1.0, {}, True, demand=[(TASK, 8)], tenant="alice")
    hog = Contender("hog", "m", 1.0, {}, True, shape=TASK, tenant="hog")
    for policy in ("hdrf", "drf"):
        found = fair_allocation(policy, TOTAL, [mallory, alice, hog], {})
        cpus = {f: resources.get("cpus", 0.0) for f, (_, resources) in found.items()}
        assert cpus["mallory"] <= 2.0 + 1e-9, (
            f"{policy}: mallory declared 2 tasks of 1 CPU in all and is owed "
            f"{cpus['mallory']:g} CPUs; alice {cpus['alice']:g}, the hog {cpus['hog']:g}"
        )
