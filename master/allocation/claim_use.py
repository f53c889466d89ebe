"""Whether a starving framework used the room preemption freed for it.

Preemption ends other tenants' tasks so that a starving framework can run one of its
declared tasks. A tenant that declares demand and then declines the room freed for it
gains nothing, but could have others' tasks killed again and again. So each claimant's
last claim is watched: a claimant that, by the end of its hold, has no task of the size
the room was freed for on every node of the claim -- none launched, those it launched
killed or failed meanwhile, or tasks that ended at once followed by the room turned down
when it came back (a token task beside a refusal of the rest too) -- waits before
preemption frees room for it again:
FIRST_WAIT, doubling with each unused claim in a row up to LONGEST_WAIT; a used claim
clears the count. It counts as unused if it was offered a room it left, or declined an
offer of a claimed slave whose room it left (judged TAKE_AFTER after its victims' end
where they outlived the hold), or if the room stood free and held for it while it did not
want it (suppressed, away, in another role), or if the claimant left with its claim
unjudged. A room another took first (its victims outlived the hold, and it was
everybody's as it freed), or that never reached it, counts neither way.

The count and the wait are kept for the claimant's principal and for each of its roles,
and it may claim only while none of them waits: another framework of the principal's own
does not start afresh (review 58), nor does one of another principal in the same role
claim at once -- a tenant given three principals in one role had three waits, and
claimed three times as often as with one. Each wait doubles with its key's unused
claims in a row. But a principal that has left no claim unused since its last used one
-- a newcomer to the role, or an honest role-mate -- waits a role's wait only
FIRST_WAIT from when it was set, never a role-mate's doubled history (review 74); a
tenant's second principal has its one such claim, and then waits with the first. (The
principal's key still counts: a principal allowed in several roles would have one wait
a role.) There is nothing like it in Mesos, which has no preemption; YARN gives the
freed containers to the starving application itself.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field

from master.allocation.sorter import Millis
from protocol.wire.resources import add_millis, holds, sub_millis_clamped

FIRST_WAIT = 60.0  # seconds without claims after the first unused one
LONGEST_WAIT = 3600.0  # the doubling stops here
STOOD_FREE = 1.0  # seconds the room stood held for it, its victims ended, to count
TAKE_AFTER = 5.0  # seconds to take a room whose victims ended after its hold


Key = tuple[str, str]  # ("principal", name) or ("role", name): whose a count and wait are


def keys_of(claimant: str, tenant: str = "", roles: Iterable[str] = ()) -> tuple[Key, ...]:
    """Whose a claimant's count and wait are: its principal's (a framework of none is its
    own), and each of its roles'."""
    return (("principal", tenant or claimant), *(("role", role or "*") for role in roles))


@dataclass(slots=True)
class _Claimed:
    until: float  # its room is held for the claimant until then
    needs: dict[str, Millis]  # by slave: the tasks the rooms there were freed for, summed
    victims: int  # still to end
    keys: tuple[Key, ...]  # whose the count and the wait are: its principal, its roles
    launched: dict[str, Millis] = field(default_factory=dict)  # by slave, since the claim
    finished: dict[str, Millis] = field(default_factory=dict)  # of those, ended finished
    # the slaves where an offer held its room, and those it declined an offer of
    offered: set[str] = field(default_factory=set)
    declined: set[str] = field(default_factory=set)
    turned_back: set[str] = field(default_factory=set)  # declined after it launched there
    since_back: dict[str, Millis] = field(default_factory=dict)  # launched there since
    victims_ended: float | None = None  # when the last ended (None: not all, or unknown)

    @property
    def used(self) -> bool:
        """Every node of the claim runs tasks of the size its rooms were freed for (one
        task in one room of eight is no use of the other seven's victims): known before
        its hold ends. Tasks that finished count only when it is judged, and only where it
        did not turn the room down after them (`_left`)."""
        return not any(
            s in self.turned_back
            or not holds(_less(self.launched.get(s, {}), self.finished.get(s, {})), need)
            for s, need in self.needs.items()
        )

    def _left(self) -> list[str]:
        """The slaves whose room it has not used: no tasks of the size launched there
        (running, or ended finished), or the room declined after them -- a framework that
        fills the room with tasks that end at once and turns it down when it comes back
        used nothing of it (review 69: its victims were killed claim after claim)."""
        return [
            s
            for s, need in self.needs.items()
            if s in self.turned_back or not holds(self.launched.get(s, {}), need)
        ]

    def judged_at(self) -> float:
        """When it is judged (if not used before): its hold's end, or a while after its
        victims' end where they outlived the hold."""
        ended = self.victims_ended
        if ended is None or ended + STOOD_FREE <= self.until:
            return self.until
        return ended + TAKE_AFTER

    def left_unused(self) -> bool | None:
        """Judged unused (True), used (False), or neither (None: the rooms it left never
        reached it, nor stood free held for it)."""
        left = self._left()
        if not left:
            return False
        ended = self.victims_ended
        if ended is not None and ended + STOOD_FREE <= self.until:
            return True  # (it stood free, held for it: it did not take it)
        # a room left is its doing if it was offered it, or turned its slave down; one
        # another took first (its victims outlived the hold, and it was everybody's as it
        # freed) or that never reached it is not
        turned_down = self.offered | self.declined
        return True if any(s in turned_down for s in left) else None


def _less(held: Millis, gone: Millis) -> Millis:
    return {n: v - gone.get(n, 0) for n, v in held.items()} if gone else held


class ClaimUse:
    """Each claimant's last claim; the unused claims in a row, and the wait, of each
    principal and each role (`keys_of`)."""

    def __init__(self) -> None:
        self._claims: dict[str, _Claimed] = {}  # by framework
        self._keys: dict[str, tuple[Key, ...]] = {}  # framework: whose (as its claims said)
        self._unused: dict[Key, int] = {}  # by key: unused claims in a row
        self._waits: dict[Key, float] = {}  # by key: no claim for it before then
        self._set_at: dict[Key, float] = {}  # by key: when its wait was set (`_wait`)

    def claimed(
        self,
        claimant: str,
        until: float,
        needs: Mapping[str, Millis],
        victims: int,
        tenant: str = "",
        roles: Iterable[str] = (),
    ) -> None:
        """A claim freed room on each slave of `needs` for one task there, by ending
        `victims` tasks; the room is held until `until`. `tenant`: whose it is (its
        principal), `roles`: the claimant's."""
        keys = self._keys[claimant] = keys_of(claimant, tenant, roles)
        self._claims[claimant] = _Claimed(until, dict(needs), victims, keys)
        for key in keys:
            self._waits.pop(key, None)

    def victim_ended(self, claimant: str, now: float | None) -> None:
        """A task ended for the claimant's claim (`now`: when; None: unknown)."""
        claim = self._claims.get(claimant)
        if claim is not None and claim.victims > 0:
            claim.victims -= 1
            if not claim.victims and now is not None:
                claim.victims_ended = now

    def task_ended(
        self, framework_id: str, slave_id: str, resources: Mapping[str, int], finished: bool
    ) -> None:
        """A task of its ended: one killed or failed on a node of its claim before the claim
        is judged is no use of it (one launched and killed at once used nothing)."""
        claim = self._claims.get(framework_id)
        if claim is None or slave_id not in claim.launched:
            return
        if finished:  # (it used the room while it ran: judged at the claim's end)
            add_millis(claim.finished.setdefault(slave_id, {}), resources)
            return
        sub_millis_clamped(claim.launched[slave_id], resources)

    @property
    def watching(self) -> bool:
        """Whether any claim waits to be judged (else offers need not be told)."""
        return bool(self._claims)

    def offered(self, framework_id: str, slave_id: str, resources: Mapping[str, int]) -> None:
        """It was offered `resources` of the slave."""
        claim = self._claims.get(framework_id)
        need = claim.needs.get(slave_id) if claim is not None else None
        if claim is not None and need is not None and holds(resources, need):
            claim.offered.add(slave_id)

    def declined(
        self, framework_id: str, slave_id: str, resources: Mapping[str, int] | None = None
    ) -> None:
        """It declined `resources` of the slave (an offer whole, or what it left of one),
        or (None) turned the slave down before its room was freed: what holds the room's
        tasks counts as the room turned down, unless it runs them there already (review
        70: a token task launched, the rest refused, was no decline of it; an offer of
        the slave's memory alone, declined beside the room's tasks running, was counted
        as one, and the claimant made to wait for a claim it had used)."""
        claim = self._claims.get(framework_id)
        if claim is None or slave_id not in claim.needs:
            return
        need = claim.needs[slave_id]
        if resources is not None:  # (an offer, or the rest of one it launched on)
            running = _less(claim.launched.get(slave_id, {}), claim.finished.get(slave_id, {}))
            if not holds(resources, need) or holds(running, need):
                return  # (too little for the room's task, or it runs the room's task)
        claim.declined.add(slave_id)
        if slave_id in claim.launched:
            claim.turned_back.add(slave_id)
            claim.since_back[slave_id] = {}

    def launched(self, framework_id: str, slave_id: str, resources: Mapping[str, int]) -> None:
        """It launched tasks of `resources` in all on the slave (cheap when it claims
        nothing: every launch is told)."""
        claim = self._claims.get(framework_id)
        if claim is None or slave_id not in claim.needs:
            return
        add_millis(claim.launched.setdefault(slave_id, {}), resources)
        if slave_id in claim.turned_back:  # (it came back to the room: all of it, not a
            # token task beside a refusal of the rest -- review 70)
            back = claim.since_back.setdefault(slave_id, {})
            add_millis(back, resources)
            if holds(back, claim.needs[slave_id]):
                claim.turned_back.discard(slave_id)

    def may_claim(
        self,
        claimant: str,
        now: float,
        tenant: str = "",
        slaves: Container[str] | None = None,
        roles: Iterable[str] = (),
    ) -> bool:
        """Whether preemption may free room for it now: not while its last claim's room
        is held for it, nor while its principal (`tenant`) or one of its `roles` waits
        for leaving one unused. `slaves`: those there now (a room on a slave lost since
        is not asked of it; a claim left with none counts neither way)."""
        claim = self._claims.get(claimant)
        if claim is not None and slaves is not None:
            claim.needs = {s: need for s, need in claim.needs.items() if s in slaves}
            if not claim.needs:
                del self._claims[claimant]
                claim = None
        if claim is not None:
            # (an offer of the room it had tells, once the hold is over)
            judge_at = claim.until if claim.offered else claim.judged_at()
            if not claim.used and now < judge_at:
                return False
            del self._claims[claimant]  # (judged: used, or its time is over)
            self._judge(claim, now)
        return not self._wait(keys_of(claimant, tenant, roles), now)

    def _wait(self, keys: Iterable[Key], now: float) -> float:
        """Seconds the longest wait of `keys` has still to run (0: none). The first key
        is the principal's: one that has left no claim unused since its last used one
        (a newcomer, an honest role-mate) waits a role's doubled wait only FIRST_WAIT
        from when it was set, and inherits nobody's history; one that has waits it all."""
        waits, keys = self._waits, tuple(keys)
        clean = bool(keys) and not self._unused.get(keys[0])
        longest = 0.0
        for key in keys:
            until = waits.get(key)
            if until is None:
                continue
            if clean and key[0] == "role":
                until = min(until, self._set_at.get(key, until) + FIRST_WAIT)
            longest = max(longest, until - now)
        return longest

    def _judge(self, claim: _Claimed, now: float) -> None:
        verdict = claim.left_unused()
        for key in claim.keys:
            if verdict is False:
                self._unused.pop(key, None)
            elif verdict:
                unused = self._unused[key] = self._unused.get(key, 0) + 1
                self._waits[key] = now + min(LONGEST_WAIT, FIRST_WAIT * 2 ** (unused - 1))
                self._set_at[key] = now

    def settled(
        self, claimant: str, now: float, tenant: str = "", roles: Iterable[str] = ()
    ) -> bool:
        """Neither a claim of its still to be judged nor a wait of its principal's
        (`tenant`) or its roles' (else those its claims named) for leaving one unused."""
        if claimant in self._claims:
            return False
        keys = keys_of(claimant, tenant, roles) if tenant or roles else self._whose(claimant)
        return not self._wait(keys, now)

    def _whose(self, claimant: str) -> tuple[Key, ...]:
        return self._keys.get(claimant) or keys_of(claimant)

    def waiting(
        self, claimant: str, now: float, tenant: str = "", roles: Iterable[str] = ()
    ) -> float:
        """Seconds it (its principal `tenant`, or one of its `roles`; else those its
        claims named) still waits for claims left unused (0: none)."""
        keys = keys_of(claimant, tenant, roles) if tenant or roles else self._whose(claimant)
        return self._wait(keys, now)

    def unused(self, claimant: str, tenant: str = "") -> int:
        """The claims its principal (`tenant`, else the one its claims named) left unused
        in a row: its own, not a role-mate's."""
        key = keys_of(claimant, tenant)[0] if tenant else self._whose(claimant)[0]
        return self._unused.get(key, 0)

    def slave_removed(self, slave_id: str) -> None:
        """A slave is gone: the rooms on it are not asked of their claimants (a claim left
        with none is judged neither way), though it may come back before they are judged."""
        for claimant, claim in list(self._claims.items()):
            if claim.needs.pop(slave_id, None) is not None:
                claim.launched.pop(slave_id, None)
                if not claim.needs:
                    del self._claims[claimant]

    def forget(self, framework_id: str, now: float | None = None) -> None:
        """A framework gone: its claim goes, judged as it stands (`now`: when; a claimant
        that leaves before using its room left it unused, so that a tenant cannot escape
        the count by subscribing another framework); its tenant's count and wait stay
        (but those of a framework that was its own tenant); its roles' stay."""
        claim = self._claims.pop(framework_id, None)
        own = ("principal", framework_id)
        if claim is not None and now is not None and claim.keys[0] != own:
            if not claim.used:
                claim.offered.update(claim.needs)  # (left: as good as turned down)
            self._judge(claim, now)
        if self._keys.pop(framework_id, (own,))[0] == own:
            self._unused.pop(own, None)
            self._waits.pop(own, None)
            self._set_at.pop(own, None)
