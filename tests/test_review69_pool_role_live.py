"""Review 69, live: a tenant in role `eng` takes `eng/web` below its half of `eng` by
registering frameworks in `eng` (`test_review69_pool_role_frameworks` on the books alone).

A secured master (hdrf, preemption on) and two slaves of 4 CPUs; tasks <1 CPU, 64 MB>.
alice (role `eng/web`) takes the idle cluster. mallory, allowed role `eng` under three
principals (as `test_hostile_tenant`'s), runs a framework under each, declaring 8 tasks.
The allocator's order gives `eng`'s own frameworks and `eng/web` half of the cluster
each: alice 4, mallory's three 4 between them. Preemption reads a quarter for each of the
four and took alice to 2, mallory's to 6.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.helpers import eventually
from harness.review69 import Filler, rig

FAIR = 4  # tasks: half of 8 CPUs, each child of eng's
MALLORY = ("mallory", "mallory-2", "mallory-3")
PRINCIPALS = [
    ("master", "master"),
    ("slave-a", "slave"),
    ("slave-b", "slave"),
    ("alice", "framework", "eng/web"),
    *((name, "framework", "eng") for name in MALLORY),
    ("ops", "operator"),
]
SLAVES = (("slave-a", "sa"), ("slave-b", "sb"))
pytestmark = pytest.mark.timeout(60)


async def test_frameworks_in_a_pool_role_do_not_take_its_sub_role_below_its_half(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, PRINCIPALS, SLAVES) as c:
        alice = Filler(declare=8, floor=FAIR)
        await c.framework("alice", alice, role="eng/web")
        await eventually(lambda: c.running("alice") == 8, timeout=15)
        for name in MALLORY:
            await c.framework(name, Filler(declare=8, floor=1), role="eng")
        await eventually(lambda: c.running(*MALLORY) >= FAIR, timeout=20)
        start = c.master.offer_rounds.count  # then long past preemption's timeout and notice
        await eventually(lambda: c.master.offer_rounds.count >= start + 40, timeout=20)
        assert alice.lowest is not None
        assert alice.lowest >= FAIR, (
            f"alice (eng/web) fell to {alice.lowest} of her {FAIR}; mallory's frameworks in "
            f"eng run {c.running(*MALLORY)}; fair shares as preemption reads them: "
            f"{c.master.preemptor.preemption.fair}"
        )
        assert c.running(*MALLORY) <= FAIR + 1
