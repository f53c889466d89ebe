"""Seen as a newcomer sharing a cluster (docs/tutorials/sharing.md): the operator set
`eng/batch`'s limit to the cpus its framework already held, and `drfmesos why batch`
answered `task-fits-no-slave ... fits none of them with what it has free now` and said
nothing of the limit. With cpus free on the slave that answer is false on its face (the
task fits what is free) and points nowhere: what keeps the framework's tasks away is its
role's limit, and only `quota-limit` says so, and what to do (wait for its own tasks, or
an operator raises it). Books in memory, as tests/test_why.py keeps them."""

from __future__ import annotations

from master.allocation.allocator import Allocator
from master.allocation.quota import Quota
from master.cycle import CycleConfig, OfferCycle
from protocol.wire.resources import Limit, Resources
from protocol.wire.why_codes import WhyCode

from harness.cycle import Books

TASK = Resources(cpus=0.5, mem=256)


def test_a_role_at_its_cpu_limit_is_told_its_limit_first() -> None:
    allocator, books = Allocator("drf"), Books()
    allocator.add_framework("batch", "eng/batch")
    books.roles["batch"] = "eng/batch"
    allocator.add_slave("s0", Resources(cpus=4, mem=4096))
    allocator.roles.set_quota("eng/batch", Quota(Resources(), Limit(cpus=1)))
    allocator.allocate_existing("batch", "s0", Resources(cpus=1, mem=512))  # its 2 tasks
    books.demand["batch"] = [(dict(TASK.millis), 4)]  # it wants 4 more of them
    cycle = OfferCycle(allocator, books, CycleConfig())
    assert allocator.free("s0").contains(TASK)  # (3 cpus free: the task fits them)

    reasons, _ = cycle.why("batch", 1.0)
    assert reasons, "no reason"
    first = reasons[0]
    assert first.code == WhyCode.QUOTA_LIMIT, [(r.code, r.message) for r in reasons]
    assert first.numbers["at_limit"] == ["cpus"]
    # and nothing it says claims the task does not fit what is free
    for r in reasons:
        assert r.code != WhyCode.TASK_FITS_NO_SLAVE, r.message


def test_a_role_at_its_cpu_limit_on_a_full_slave_is_told_its_limit_too() -> None:
    """As in the tutorial: `web` holds the other 3 cpus, so nothing is free either. That
    it fits no free room is true, and first; but room that frees will not come to it while
    its role holds its limit, and the answer must say that as well."""
    allocator, books = Allocator("drf"), Books()
    for fid, role in (("batch", "eng/batch"), ("web", "eng/web")):
        allocator.add_framework(fid, role)
        books.roles[fid] = role
    allocator.add_slave("s0", Resources(cpus=4, mem=4096))
    allocator.roles.set_quota("eng/batch", Quota(Resources(), Limit(cpus=1)))
    allocator.allocate_existing("batch", "s0", Resources(cpus=1, mem=512))
    allocator.allocate_existing("web", "s0", Resources(cpus=3, mem=1536))
    books.demand["batch"] = [(dict(TASK.millis), 4)]
    cycle = OfferCycle(allocator, books, CycleConfig())

    reasons, _ = cycle.why("batch", 1.0)
    codes = [r.code for r in reasons]
    assert WhyCode.QUOTA_LIMIT in codes, [(r.code, r.message) for r in reasons]
    limit = reasons[codes.index(WhyCode.QUOTA_LIMIT)]
    assert limit.numbers["at_limit"] == ["cpus"]
    assert "at its limit of cpus:1" in limit.message
