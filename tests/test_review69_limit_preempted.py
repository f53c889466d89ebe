"""Review 69: preemption frees room for a framework whose role is at its quota limit,
where the allocator may not offer it.

Preemption's fair shares (`preemption.fair_allocation`) are the policy's ideal for what
everyone holds and declares, with no word of quota limits; `is_starving` and the plans
ask none either. `mallory`'s role is limited to 2 CPUs; it holds them and declares 100
tasks more. The ideal gives it half of the 8 CPUs, it "starves" at 2, and 2 of alice's 6
tasks are killed for it. The room is held for mallory, whose offers its limit cuts to
nothing: it idles through the hold, and goes back to alice. The ideal also gives alice
4 of 8, where mallory's limit leaves her 6: any other claimant may take her to 4.
"""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.preemption import PreemptionConfig
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Resources

from harness.cycle import Books, book_running, doomed

TASK = Resources(cpus=1, mem=1024)
SLAVE = Resources(cpus=4, mem=4096)


def test_a_role_at_its_limit_has_nobodys_tasks_killed_for_it() -> None:
    config = CycleConfig(
        policy="hdrf", preemption=PreemptionConfig(timeout=5.0, notice=2.0, threshold=1.0)
    )
    a, books = Allocator("hdrf"), Books()
    a.roles.set_quota("mallory", Quota(guarantee=Resources(), limit=Resources(cpus=2)))
    for i in range(2):
        a.add_slave(f"s{i}", SLAVE)
    for name in ("alice", "mallory"):
        a.add_framework(name, name)
        books.roles[name] = name
    cycle = OfferCycle(a, books, config)
    for i, name in enumerate(["alice"] * 6 + ["mallory"] * 2):
        slave = f"s{i % 2}"
        book_running(a, books, name, slave, f"t{i}", TASK, i)
    books.demand["mallory"] = [(dict(TASK.millis), 100)]  # (more than its limit lets it have)
    assert a.quota_stage.offerable("mallory", dict(SLAVE.millis)).get("cpus", 0) == 0

    # a check a second, past preemption's timeout
    victims = [(v.framework_id, v.task_id) for v in doomed(cycle, map(float, range(10)))]
    fair = cycle.preemption.fair
    assert victims == [], (
        f"mallory holds its role's limit of 2 CPUs, yet {victims} were claimed for it; "
        f"fair shares as preemption reads them: {fair}"
    )
    assert fair["mallory"] <= 2 / 8 + 1e-9, fair
    assert fair["alice"] >= 6 / 8 - 1e-9, fair
