"""Hierarchical policies on the real allocator, random trees: promises kept, books balanced."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.experiments.simulator import Simulation
from cluster.experiments.spec import Spec
from master.allocation.allocator import Allocator
from master.allocation.ideal import User, flattened_weights, ideal
from master.allocation.quota import Quota
from master.allocation.tree_ideal import Leaf, tree_filling
from protocol.wire.resources import Resources

from harness.allocation import fill

SLAVE = Resources(cpus=8, mem=8192)
SEGMENTS = st.sampled_from(["a", "b", "c"])
LEAVES = st.lists(st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join), min_size=1, max_size=5)
# sizes that divide a slave evenly: what a leaf misses is the policy's doing, not packing's
TASK = st.tuples(st.sampled_from([0, 0.5, 1, 2]), st.sampled_from([0, 512, 1024, 2048])).filter(
    lambda t: t != (0, 0)
)


def build(leaves: list[str], weights: dict[str, int], sizes: list[tuple[float, int]],
          slaves: int) -> tuple[Allocator, dict[str, Resources], list[str]]:  # fmt: skip
    roles = sorted(set(leaves))  # a role that is also a pool competes as its child "."
    allocator = Allocator("hdrf")
    for role, weight in weights.items():
        allocator.roles.set_weight(role, weight)
    tasks = {}
    for i, role in enumerate(roles):
        cpus, mem = sizes[i % len(sizes)]
        tasks[f"fw-{i}"] = Resources(cpus=cpus, mem=mem)
        allocator.add_framework(f"fw-{i}", role)
    for s in range(slaves):
        allocator.add_slave(f"s{s}", SLAVE)
    return allocator, tasks, roles


WEIGHTS = st.dictionaries(
    st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join), st.integers(1, 5), max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    leaves=LEAVES,
    weights=WEIGHTS,
    mem=st.lists(st.sampled_from([256, 512, 1024, 2048]), min_size=5, max_size=5),
    slaves=st.integers(10, 30),
)
def test_hdrf_never_keeps_one_leaf_short_while_another_is_over(
    leaves: list[str], weights: dict[str, int], mem: list[int], slaves: int
) -> None:
    """One resource contended: an offer is a whole slave, so a leaf's share moves a slave's
    worth at a time and its promise is kept to within that. What hdrf must never do is
    leave one leaf more than that below its promise while another is more than that above."""
    allocator, tasks, roles = build(leaves, weights, [(0, m) for m in mem], slaves)
    fill(allocator, tasks)
    total = allocator.total
    gap = {}
    for i, role in enumerate(roles):
        fw = f"fw-{i}"
        grain = 1 / slaves + tasks[fw].dominant_share(total)
        promise = allocator.roles.promise(role) or 0.0
        gap[role] = (allocator.allocation(fw).dominant_share(total) - promise) / grain
    short = [r for r, g in gap.items() if g < -1 - 1e-9]
    over = [r for r, g in gap.items() if g > 1 + 1e-9]
    assert not (short and over), f"short of promise: {short}, over it: {over} ({gap})"
    held = sum((allocator.allocation(f) for f in tasks), Resources())
    assert allocator.allocated_total() == held  # the books balance


@settings(max_examples=60, deadline=None)
@given(
    leaves=LEAVES,
    weights=WEIGHTS,
    mem=st.lists(st.sampled_from([256, 512, 1024, 2048]), min_size=5, max_size=5),
    caps=st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=5, max_size=5),
    slaves=st.integers(10, 30),
)
def test_hdrf_keeps_every_uncapped_leafs_promise_beside_leaves_that_want_no_more(
    leaves: list[str], weights: dict[str, int], mem: list[int], caps: list[int | None], slaves: int
) -> None:
    """Some frameworks want only a few tasks and then decline everything, staying active
    (their low share must not pull their pools ahead of the rest): once the cluster
    settles, no framework without a cap is more than an offer short of its promise while
    another is more than an offer over its own.

    (Not "every one within an offer of its promise": a whole-slave offer moves a leaf of
    a small promise further from it than one of a large promise, and at a tie the leaf
    with fewer allocations goes first, so a large promise can end more than one offer
    short while the small ones are within an offer over -- leaves a, b, b/a, a weighing
    2, 14 slaves: a 8 slaves against 9.3, b and b/a 3 each against 2.3.)"""
    allocator, tasks, roles = build(leaves, weights, [(0, m) for m in mem], slaves)
    capped = {f"fw-{i}": c for i, c in enumerate(caps[: len(roles)]) if c is not None}
    running = fill(allocator, tasks, caps=capped)
    total = allocator.total
    gap = {}  # an uncapped framework's distance from its promise, in offers
    for i, role in enumerate(roles):
        fw = f"fw-{i}"
        if fw in capped:
            assert running[fw] <= capped[fw]
            continue
        grain = 1 / slaves + tasks[fw].dominant_share(total)  # an offer is a whole slave
        promise = allocator.roles.promise(role) or 0.0
        gap[role] = (allocator.allocation(fw).dominant_share(total) - promise) / grain
    short = [r for r, g in gap.items() if g < -1 - 1e-9]
    over = [r for r, g in gap.items() if g > 1 + 1e-9]
    assert not (short and over), f"short of promise: {short}, over it: {over} ({running})"


@settings(max_examples=60, deadline=None)
@given(leaves=LEAVES, weights=WEIGHTS, sizes=st.lists(TASK, min_size=5, max_size=5),
       slaves=st.integers(2, 20))  # fmt: skip
def test_hdrf_leaves_no_leaf_below_its_promise_while_a_slave_has_room_for_it(
    leaves: list[str], weights: dict[str, int], sizes: list[tuple[float, int]], slaves: int
) -> None:
    """Several resources: once the cluster settles, a leaf below its promise has no slave
    with room for one of its tasks (it is never left waiting on resources that are free)."""
    allocator, tasks, roles = build(leaves, weights, sizes, slaves)
    fill(allocator, tasks)
    total = allocator.total
    for i, role in enumerate(roles):
        fw = f"fw-{i}"
        if allocator.allocation(fw).dominant_share(total) < (allocator.roles.promise(role) or 0):
            room = [s for s in allocator.slaves if allocator.free(s).contains(tasks[fw])]
            assert not room, f"{role} is below its promise while {room} could take its task"
    held = sum((allocator.allocation(f) for f in tasks), Resources())
    assert allocator.allocated_total() == held


@settings(max_examples=40, deadline=None)
@given(
    policy=st.sampled_from(["hdrf", "naive-hdrf", "flat", "drf", "wdrf", "asset", "cpu", "fifo"]),
    roles=LEAVES,
    ops=st.lists(st.tuples(st.sampled_from(["round", "finish", "leave", "pause", "resume"]),
                           st.integers(0, 9)), min_size=5, max_size=40),
    limit=st.one_of(st.none(), st.integers(1, 16)),
)  # fmt: skip
def test_every_policy_keeps_the_books_balanced(
    policy: str, roles: list[str], ops: list[tuple[str, int]], limit: int | None
) -> None:
    """Random rounds, tasks ending, frameworks pausing and leaving, under quota: what the
    allocator says is allocated is what its frameworks hold, and never more than a slave
    has, whatever the policy."""
    allocator = Allocator(policy)
    tree = policy in ("hdrf", "naive-hdrf", "flat")
    leaves = [r if tree else r.replace("/", ".") for r in sorted(set(roles))]
    names = []
    for i, role in enumerate(leaves):
        allocator.add_framework(f"f{i}", role)
        names.append(f"f{i}")
    for s in range(3):
        allocator.add_slave(f"s{s}", SLAVE)
    if limit is not None:  # on a pool (tree) or a role (side by side)
        limited = leaves[0].split("/")[0] if tree else leaves[0]
        allocator.roles.set_quota(limited, Quota(Resources(), limit=Resources(cpus=limit)))
    task = Resources(cpus=1, mem=512)
    t = 0.0
    for op, k in ops:
        t += 1
        live = [n for n in names if n in allocator.frameworks]
        if not live:
            break
        who = live[k % len(live)]
        if op == "round":
            offers = allocator.allocate(t)
            for role, quota in allocator.quotas.items():  # offers count: checked before use
                assert quota.limit is not None
                held_cpus = allocator.roles.held(role).get("cpus", 0)
                assert held_cpus <= quota.limit.get_millis("cpus"), (role, held_cpus)
            for offer in offers:
                rest = offer.resources
                if rest.contains(task):
                    rest = rest - task
                if rest:
                    allocator.recover(
                        offer.framework_id, offer.slave_id, rest, refuse_seconds=k, now=t
                    )
        elif op == "finish":
            for slave in allocator.slaves:
                held = allocator.held(who, slave)
                if held:
                    allocator.recover(who, slave, held)
                    break
        elif op == "leave":
            allocator.remove_framework(who)
        elif op == "pause":
            allocator.deactivate(who)
        else:
            allocator.activate(who)
        held = sum((allocator.allocation(f) for f in allocator.frameworks), Resources())
        assert allocator.allocated_total() == held
        for slave in allocator.slaves:
            assert SLAVE.contains(allocator.held_on(slave))
        for role, quota in allocator.quotas.items():
            if quota.limit is not None:
                assert quota.limit.get_millis("cpus") >= allocator.roles.held(role).get("cpus", 0)


# -- the ideal: exact, so the promise and Pareto efficiency hold to the letter ----------------
IDEAL_TASK = st.tuples(st.integers(0, 4), st.integers(0, 4)).filter(lambda t: t != (0, 0))
IDEAL_USERS = st.lists(
    st.tuples(
        st.lists(SEGMENTS, min_size=0, max_size=3).map(tuple),  # its pool
        IDEAL_TASK,
        st.integers(1, 4),  # its weight
        st.one_of(st.none(), st.integers(0, 30)),  # its cap (tasks)
    ),
    min_size=1,
    max_size=8,
)
POOL_WEIGHTS = st.dictionaries(
    st.lists(SEGMENTS, min_size=1, max_size=3).map(tuple), st.integers(1, 5), max_size=6
)
TOTAL = {"cpus": Fraction(40), "mem": Fraction(60)}


def tree_users(spec: list[tuple[tuple[str, ...], tuple[int, int], int, int | None]]) -> list[User]:
    return [
        User(f"u{i}", {"cpus": c, "mem": m}, weight=w, path=path, limit=cap)
        for i, (path, (c, m), w, cap) in enumerate(spec)
    ]


def promise_of(users: list[User], pools: dict[tuple[str, ...], int]) -> dict[str, Fraction]:
    """Each user's promise: down its path, each node's weight over its siblings' (the
    flattened weights are exactly that product)."""
    return flattened_weights(users, pools)


@settings(max_examples=300, deadline=None)
@given(spec=IDEAL_USERS, pools=POOL_WEIGHTS, policy=st.sampled_from(["hdrf", "naive-hdrf"]))
def test_the_tree_ideal_is_feasible_and_pareto_efficient(
    spec: list[tuple[tuple[str, ...], tuple[int, int], int, int | None]],
    pools: dict[tuple[str, ...], int],
    policy: str,
) -> None:
    """Nothing is used beyond capacity, and every user either has the tasks it wants or
    needs a resource that is all used up: nothing is left that a wanting user could use."""
    users = tree_users(spec)
    shares = ideal(policy, TOTAL, users, pools)
    used = {r: sum((s.resources.get(r, Fraction(0)) for s in shares.values()), Fraction(0))
            for r in TOTAL}  # fmt: skip
    assert all(used[r] <= TOTAL[r] for r in TOTAL), used
    full = {r for r in TOTAL if used[r] == TOTAL[r]}
    for u in users:
        capped = u.limit is not None and shares[u.name].tasks == u.limit
        blocked = any(u.task[r] and r in full for r in TOTAL)
        assert capped or blocked, f"{u.name} wants more and nothing stops it: {shares}"


@settings(max_examples=300, deadline=None)
@given(spec=IDEAL_USERS, pools=POOL_WEIGHTS)
def test_hdrf_gives_every_user_its_promise_or_all_it_wants(
    spec: list[tuple[tuple[str, ...], tuple[int, int], int, int | None]],
    pools: dict[tuple[str, ...], int],
) -> None:
    """Every user gets at least its promise of its dominant resource, or the tasks it
    wants if that is less: whatever the others want, however the tree is shaped."""
    users = tree_users(spec)
    shares = ideal("hdrf", TOTAL, users, pools)
    promise = promise_of(users, pools)
    for u in users:
        one = max(Fraction(u.task[r]) / TOTAL[r] for r in TOTAL)  # one task's dominant share
        wanted = promise[u.name] if u.limit is None else min(promise[u.name], u.limit * one)
        assert shares[u.name].dominant_share >= wanted, (u.name, shares, promise)


# groups of users alike: their pool, task size (the ideal gives the users of one size one
# `use`), weight, cap in twentieths of a dominant share per unit of weight (alike where
# equal) or none, and how many
FOLDABLE = st.lists(
    st.tuples(
        st.lists(SEGMENTS, min_size=0, max_size=3).map(tuple),
        st.sampled_from([(1, 1), (1, 2), (2, 1), (0, 1)]),
        st.integers(1, 2),
        st.one_of(st.none(), st.integers(0, 3)),
        st.integers(1, 4),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(groups=FOLDABLE, pools=POOL_WEIGHTS, policy=st.sampled_from(["hdrf", "naive-hdrf"]))
def test_a_folded_tree_fills_exactly_as_the_whole_tree(
    groups: list[tuple[tuple[str, ...], tuple[int, int], int, int | None, int]],
    pools: dict[tuple[str, ...], int],
    policy: str,
) -> None:
    """Pools of one leaf folded into it, and sibling leaves alike into one: every user's
    share is what the whole tree gives it, to the last digit of its fraction."""
    uses: dict[tuple[int, int], dict[str, Fraction]] = {}
    leaves = []
    for path, (cpus, mem), weight, cap, count in groups:
        top = max(cpus, mem)
        use = uses.setdefault((cpus, mem), {"cpus": Fraction(cpus, top), "mem": Fraction(mem, top)})
        limit = None if cap is None else Fraction(cap, 20) * weight
        for _ in range(count):
            leaves.append(Leaf(f"u{len(leaves)}", path, Fraction(weight), use, limit))
    weights = {path: Fraction(w) for path, w in pools.items()}
    folded = tree_filling(policy, ["cpus", "mem"], leaves, weights)
    assert folded == tree_filling(policy, ["cpus", "mem"], leaves, weights, fold=False)


def test_a_satisfied_leaf_no_longer_holds_its_pool_back() -> None:
    """The issue's tree: x (1) beside p (2), p's leaves p/a (1) and p/b (3); CMD in p/b
    wants just two small tasks. X keeps its promise, 1/3; the rest of p's goes to PA."""
    users = [
        User("X", {"cpus": 1, "mem": 256}, path=("x",)),
        User("PA", {"cpus": 1, "mem": 256}, path=("p", "a")),
        User("CMD", {"cpus": Fraction(1, 10), "mem": 32}, path=("p", "b"), limit=2),
    ]
    pools = {("x",): 1, ("p",): 2, ("p", "a"): 1, ("p", "b"): 3}
    for policy in ("hdrf", "naive-hdrf"):
        shares = ideal(policy, {"cpus": 8, "mem": 8192}, users, pools)
        assert shares["X"].dominant_share == Fraction(1, 3)
        assert shares["PA"].dominant_share == Fraction(77, 120)  # p's 2/3 less CMD's 1/40
        assert shares["CMD"].tasks == 2


def test_the_issues_tree_on_the_allocator_gives_x_its_third() -> None:
    """The issue's tree on the real allocator: CMD runs its two small tasks and declines
    everything after, staying active, while X's and PA's tasks end and are replaced, one
    slave at a time. CMD's low share must not pull p ahead of x: X keeps its third."""
    allocator = Allocator("hdrf")
    for role, weight in {"x": 1, "p": 2, "p/a": 1, "p/b": 3}.items():
        allocator.roles.set_weight(role, weight)
    tasks = {
        "X": Resources(cpus=1, mem=256),
        "PA": Resources(cpus=1, mem=256),
        "CMD": Resources(cpus=0.1, mem=32),
    }
    for name, role in (("X", "x"), ("PA", "p/a"), ("CMD", "p/b")):
        allocator.add_framework(name, role)
    for s in range(9):  # slaves of one task each: an offer is one task
        allocator.add_slave(f"s{s}", Resources(cpus=1, mem=1024))
    running = fill(allocator, tasks, caps={"CMD": 2})
    for turn in range(40):  # one task of X or of PA ends; its slave is offered again
        name = ("X", "PA")[turn % 2]
        slave = next((s for s in allocator.slaves if allocator.held(name, s)), None)
        if slave is not None:
            allocator.recover(name, slave, allocator.held(name, slave))
            running[name] -= 1
        for fw, n in fill(allocator, tasks, caps={"CMD": 0}).items():
            running[fw] += n
    assert running["CMD"] == 2
    assert running["X"] >= 8 / 3 - 1  # its third of the 8 slaves, less one offer
    assert running["X"] + running["PA"] == 8


@settings(max_examples=40, deadline=None)
@given(
    leaves=LEAVES,
    weights=WEIGHTS,
    sizes=st.lists(TASK, min_size=5, max_size=5),
    caps=st.lists(st.one_of(st.none(), st.integers(1, 6)), min_size=5, max_size=5),
    slaves=st.integers(2, 12),
    one_resource=st.booleans(),
)
def test_the_simulators_settled_hdrf_allocation_keeps_promises_and_wastes_nothing(
    leaves: list[str],
    weights: dict[str, int],
    sizes: list[tuple[float, int]],
    caps: list[int | None],
    slaves: int,
    one_resource: bool,
) -> None:
    """The simulator, the master's allocator inside, long tasks so the cluster settles:
    nothing is held beyond a slave; a framework that wants more has no slave with room
    for its task (Pareto); and, when the tasks contend for one resource, no leaf is more
    than an offer short of its promise while another is more than an offer over its own.

    (Not when they contend for several: with tasks that never end, the first round
    settles everything, and it weighs each whole-slave offer at all of the slave. A
    framework using only CPU returns the memory of its slave to one using only memory,
    and the two end up far past their promises on slaves that one needing both could
    not use -- Mesos's offers do the same. Task churn evens it out; the live and
    simulated experiments show that.)"""
    if one_resource:  # memory only
        sizes = [(0, mem or 512) for _, mem in sizes]
    roles = sorted(set(leaves))
    frameworks = []
    for i, role in enumerate(roles):
        cpus, mem = sizes[i % len(sizes)]
        fw: dict[str, object] = {
            "name": f"fw-{i}",
            "role": role,
            "task": {"cpus": cpus, "mem": mem},
            "duration": {"fixed": 10_000},
            "tasks_per_offer": "fill",
        }
        if caps[i % len(caps)] is not None:
            fw["max_running"] = caps[i % len(caps)]
        frameworks.append(fw)
    spec = Spec.model_validate(
        {
            "cluster": {"slaves": [{"count": slaves, "resources": SLAVE.to_dict()}]},
            # (declines filter for longer than a round, as Mesos's default: a decline
            # whose filter lapses by the next round would take every offer of that slave)
            "master": {
                "policy": "hdrf",
                "weights": weights,
                "allocation_interval": 1,
                "refuse_seconds": 5,
            },
            "frameworks": frameworks,
            "run": {"duration": 40, "sample_interval": 40},
        }
    )
    sim = Simulation(spec)
    sim.run()
    a = sim.allocator
    total = a.total
    for slave in a.slaves:
        assert SLAVE.contains(a.held_on(slave))
    gap = {}  # a leaf's distance from its promise, in offers
    for i, role in enumerate(roles):
        name = f"fw-{i}"
        task = Resources(cpus=sizes[i % len(sizes)][0], mem=sizes[i % len(sizes)][1])
        grain = 1 / slaves + task.dominant_share(total)  # an offer is a whole slave
        gap[name] = (
            a.allocation(name).dominant_share(total) - (a.roles.promise(role) or 0)
        ) / grain
        room = [s for s in a.slaves if a.free(s).contains(task)]
        if sim.cycle.suppressed(name):  # all it wants runs
            continue
        assert not room, f"{name} wants more and {room} could take its task"
    # (with fewer slaves than leaves, a leaf can be more than one whole-slave offer short
    # of a large promise while every other one is within an offer of its own: offers are
    # indivisible. What it must never do is keep one short while another is over.)
    if not one_resource:
        return
    uncapped = {f"fw-{i}" for i in range(len(roles)) if caps[i % len(caps)] is None}
    short = [n for n in uncapped if gap[n] < -1 - 1e-9]
    over = [n for n, g in gap.items() if g > 1 + 1e-9]
    assert not (short and over), f"short of promise: {short}, over it: {over} ({gap})"
