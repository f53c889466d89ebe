"""What preemption's planning sees: the tasks that may be taken, and the books it changes
as it goes, with the rule for who may lose a task (`Cluster.may_lose`). Pure, as the rest
of `master.allocation`."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field

from master.allocation.quota import ancestors_or_self
from master.allocation.sorter import Millis
from protocol.wire.reservations import is_plain, stripped
from protocol.wire.resources import add_millis, dominant_share

EPSILON = 1e-9
PART = "\0"  # a multi-role framework's part in one role: `{framework}\0{role}` (`part_name`)


def part_name(framework_id: str, role: str) -> str:
    """A multi-role framework's part in `role`, as the ideal and planning name it (a user
    of the ideal, a member of planning's tree)."""
    return f"{framework_id}{PART}{role or '*'}"


@dataclass(frozen=True, slots=True)
class RunningTask:
    framework_id: str
    task_id: str
    slave_id: str
    resources: Millis
    started: float
    role: str | None = None  # a multi-role framework's task's role (None: its one role)


def counted(task: RunningTask) -> Millis:
    """What a task holds as shares count it: its resources by what they are, whoever's
    (`Cluster.held` is the allocator's, stripped: a task on its role's reservation holds
    `mem`, not `mem(alice)`, there)."""
    resources = task.resources
    return resources if all(is_plain(k) for k in resources) else stripped(resources)


@dataclass
class Cluster:
    """What planning changes as it goes: who holds what, what is free, what still runs.

    `paths` places each member in the tree fairness is kept in (its role's nodes, root
    first, then itself), and `fair_held` is what the ideal gives each: a victim is weighed
    where it and the claimant part ways, as its role against the claimant's role when
    they are in different roles. Without them every framework stands alone. A member is
    a framework, or a multi-role framework's part in one of its roles (`parts`: what it
    holds in each, `part_name`), as the ideal has it: its task is weighed in its role,
    and a claim of its stands in the role it is made for (`claiming`)."""

    total: Mapping[str, int]
    free: dict[str, Millis]  # by slave: free and not reserved for anyone else
    held: dict[str, Millis]  # by framework
    fair: Mapping[str, float]
    running: dict[str, list[RunningTask]] = field(default_factory=dict)  # by slave
    fair_held: Mapping[str, Millis] = field(default_factory=dict)  # by framework, in the ideal
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # by framework
    # by role: reserved for it and idle (stripped), which a guarantee counts as held
    idle: Mapping[str, Millis] = field(default_factory=dict)
    fifo: Container[str] = ()  # pools that serve their children by arrival ("": the root)
    # a multi-role framework's holdings, by role (the sum of them is its `held`)
    parts: dict[str, dict[str, Millis]] = field(default_factory=dict)
    claiming: dict[str, str] = field(default_factory=dict)  # a multi-role claimant's role
    # frameworks given room by this check's plans: none of their tasks is taken in it (the
    # room planned for them is no task that runs: it would take a running one of a
    # framework below its share, to free room for it again)
    claimed: set[str] = field(default_factory=set)
    _members: dict[tuple[str, ...], list[str]] = field(default_factory=dict, repr=False)

    def member(self, framework_id: str, role: str | None = None) -> str:
        """Where a framework stands in `paths` (a multi-role one's part in `role`: a task's,
        or where its claim is made; else its first)."""
        parts = self.parts.get(framework_id)
        if not parts:
            return framework_id
        if role is None or role not in parts:
            role = self.claiming.get(framework_id) or next(iter(parts))
        return part_name(framework_id, role)

    def take(self, task: RunningTask) -> None:
        """A task of a victim's taken: off its books (its part's too)."""
        lost = counted(task)  # (its books count it stripped)
        for books in self._books(task.framework_id, task.role):
            for n, v in lost.items():
                books[n] = books.get(n, 0) - v

    def give(self, framework_id: str, resources: Mapping[str, int]) -> None:
        """A claimant's task placed: on its books (its part's where the claim is made)."""
        for books in self._books(framework_id, None):
            add_millis(books, resources)

    def _books(self, framework_id: str, role: str | None) -> list[Millis]:
        out = [self.held.setdefault(framework_id, {})]
        parts = self.parts.get(framework_id)
        if parts:
            member = self.member(framework_id, role)
            out.append(parts[member.split(PART, 1)[1]])
        return out

    def _held_of(self, member: str) -> Millis:
        framework_id, _, role = member.partition(PART)
        if role:
            return self.parts.get(framework_id, {}).get(role, {})
        return self.held.get(member, {})

    def share(self, framework_id: str) -> float:
        return dominant_share(self.held.get(framework_id, {}), self.total)

    def over(self, framework_id: str) -> float:
        return self.share(framework_id) - self.fair.get(framework_id, 0.0)

    def group(self, member: str, claimant: str | None) -> tuple[str, ...]:
        """The node where `member`'s branch leaves the claimant's: the victim's role
        when their roles differ (the roles compete there), else the victim itself."""
        path = self.paths.get(member, (member,))
        theirs = self.paths.get(self.member(claimant), ()) if claimant is not None else ()
        for depth, node in enumerate(path):
            if depth >= len(theirs) or theirs[depth] != node:
                return path[: depth + 1]
        return path

    def group_standing(self, group: tuple[str, ...]) -> tuple[Millis, float]:
        """What a group holds, and its fair dominant share."""
        members = self._members.get(group)
        if members is None:
            members = [f for f, p in self.paths.items() if p[: len(group)] == group]
            self._members[group] = members
        held: Millis = {}
        fair: Millis = {}
        for f in members:
            add_millis(held, self._held_of(f))
            add_millis(fair, self.fair_held.get(f, {}))
        return held, dominant_share(fair, self.total)

    def _first_come(self, group: tuple[str, ...], framework_id: str) -> bool:
        """Whether the victim's branch (`group`) and the claimant's are children of a
        pool ordered by arrival: there shares do not count, and the one that came later
        takes nothing from the first (review 69: a late child of a fifo pool had the
        first one's tasks killed for half the pool)."""
        pool = group[-2] if len(group) > 1 else ""
        return pool in self.fifo and not self._alone(group, framework_id)

    def _alone(self, node: tuple[str, ...], member: str) -> bool:
        """Whether `node` is the member itself (not a role or pool it is in)."""
        return node[-1:] == (member,) or member not in self.paths

    def _at(self, node: tuple[str, ...], member: str) -> tuple[Millis, float]:
        """What `node` (the member, or a role or pool of its) holds, and its fair
        dominant share."""
        if self._alone(node, member):
            if PART in member:  # (a multi-role framework's part, in its role)
                return self._held_of(member), dominant_share(
                    self.fair_held.get(member, {}), self.total
                )
            return self.held.get(member, {}), self.fair.get(member, 0.0)
        return self.group_standing(node)

    def standing(self, task: RunningTask, claimant: str | None = None) -> tuple[float, float]:
        """How far over its fair share the victim's group is, then the victim itself."""
        f = task.framework_id
        me = self.member(f, task.role)
        held, fair = self._at(self.group(me, claimant), me)
        return dominant_share(held, self.total) - fair, self.over(f)

    def may_lose(self, task: RunningTask, claimant: str | None = None) -> bool:
        """A victim may lose `task` only if it is over its fair share, and where it meets
        the claimant it stays at or above the fair share there: itself, within one role;
        its role (or pool) when the claimant's is another, which must then be below its
        own fair share -- roles compete there, and a role at or above its share takes
        nothing from another (else two roles over their shares, with room a third cannot
        use, would take the same task from each other for ever). Three frameworks of one
        role, each over its part of the role's share, may each give up a task while the
        role as a whole is over and the claimant's is under. A multi-role victim's task is
        weighed in its own role (its part there), and where that part is what meets the
        claimant, the victim as a whole stays at or above its fair share too."""
        f = task.framework_id
        if self.over(f) <= EPSILON:
            return False
        me = self.member(f, task.role)  # (a multi-role victim: its part in the task's role)
        group = self.group(me, claimant)
        if self.fifo and claimant is not None and self._first_come(group, me):
            return False
        if claimant is not None and not self._alone(group, me):
            theirs = self.member(claimant)
            mine = self.paths.get(theirs, (theirs,))[: len(group)]
            held, fair = self._at(mine, theirs)
            if dominant_share(held, self.total) >= fair - EPSILON:
                return False  # the claimant's branch is not short where they meet
        resources = counted(task)
        if PART in me and self._alone(group, me):  # (a multi-role victim: itself as well)
            whole = self.held.get(f, {})
            after = {n: v - resources.get(n, 0) for n, v in whole.items()}
            if dominant_share(after, self.total) < self.fair.get(f, 0.0) - EPSILON:
                return False
        held, fair = self._at(group, me)
        after = {n: v - resources.get(n, 0) for n, v in held.items()}
        return dominant_share(after, self.total) >= fair - EPSILON


def pools_of(roles: Iterable[str]) -> set[str]:
    """The roles among `roles`' ancestors: pools, with roles below them."""
    out: set[str] = set()
    for role in roles:
        parts = role.split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return out


def planning_path(
    role: str, framework_id: str, tree: bool, pools: Container[str] = ()
) -> tuple[str, ...]:
    """Where a framework stands in the tree fairness is kept in, root first, as the ideal
    places it: under its role's nodes -- the default role (`*`, or none) one role as any
    other, its frameworks sharing its share, as the allocator orders it; on a tree, the
    frameworks of a role that is a pool (`pools`) together as its child `.`, beside its
    sub-roles, as the allocator's role tree puts them."""
    role = role or "*"
    nodes = ancestors_or_self(role, tree)
    if tree and role in pools:
        nodes = [*nodes, f"{role}/."]
    return (*nodes, framework_id)
