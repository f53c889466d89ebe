"""Whether a starving framework used the room preemption freed for it.

Preemption ends other tenants' tasks so that a starving framework can run one of its
declared tasks. A tenant that declares demand and then declines the room freed for it
gains nothing, but could have others' tasks killed again and again. So each claimant's
last claim is watched: a claimant that, by the end of its hold, has no task of the size
the room was freed for on a node of the claim -- none launched, or those it launched
killed or failed meanwhile -- waits before preemption frees room for it again:
FIRST_WAIT, doubling with each unused claim in a row up to LONGEST_WAIT; a used claim
clears the count. It counts as unused if it was offered the room, or if the room stood
free and held for it while it did not want it (suppressed, away, in another role); a
claim whose victims outlived the hold (the room never stood free for it) counts neither
way. There is nothing like
it in Mesos, which has no preemption; YARN gives the freed containers to the starving
application itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from master.allocation.sorter import Millis
from protocol.wire.resources import add_millis, holds

FIRST_WAIT = 60.0  # seconds without claims after the first unused one
LONGEST_WAIT = 3600.0  # the doubling stops here
STOOD_FREE = 1.0  # seconds the room stood held for it, its victims ended, to count


@dataclass(slots=True)
class _Claimed:
    until: float  # its room is held for the claimant until then
    needs: dict[str, Millis]  # by slave: the task the room there was freed for
    victims: int  # still to end
    launched: dict[str, Millis] = field(default_factory=dict)  # by slave, since the claim
    offered: bool = False  # an offer held a need's room
    used: bool = False
    victims_ended: float | None = None  # when the last ended (None: not all, or unknown)

    def judge_use(self) -> None:
        self.used = any(holds(self.launched.get(s, {}), need) for s, need in self.needs.items())


class ClaimUse:
    """Each claimant's last claim, its unused claims in a row, and its wait."""

    def __init__(self) -> None:
        self._claims: dict[str, _Claimed] = {}
        self._unused: dict[str, int] = {}  # unused claims in a row
        self._waits: dict[str, float] = {}  # no claim for it before then

    def claimed(
        self, claimant: str, until: float, needs: Mapping[str, Millis], victims: int
    ) -> None:
        """A claim freed room on each slave of `needs` for one task there, by ending
        `victims` tasks; the room is held until `until`."""
        self._claims[claimant] = _Claimed(until, dict(needs), victims)
        self._waits.pop(claimant, None)

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
        if claim is None or finished or slave_id not in claim.launched:
            return
        done = claim.launched[slave_id]
        for name, amount in resources.items():
            done[name] = max(0, done.get(name, 0) - amount)
        claim.judge_use()

    @property
    def watching(self) -> bool:
        """Whether any claim waits to be judged (else offers need not be told)."""
        return bool(self._claims)

    def offered(self, framework_id: str, slave_id: str, resources: Mapping[str, int]) -> None:
        """It was offered `resources` of the slave."""
        claim = self._claims.get(framework_id)
        if claim is not None and (need := claim.needs.get(slave_id)) is not None:
            claim.offered = claim.offered or holds(resources, need)

    def launched(self, framework_id: str, slave_id: str, resources: Mapping[str, int]) -> None:
        """It launched tasks of `resources` in all on the slave (cheap when it claims
        nothing: every launch is told)."""
        claim = self._claims.get(framework_id)
        if claim is None or slave_id not in claim.needs:
            return
        add_millis(claim.launched.setdefault(slave_id, {}), resources)
        claim.judge_use()

    def may_claim(self, claimant: str, now: float) -> bool:
        """Whether preemption may free room for it now: not while its last claim's room
        is held for it, nor while it waits for leaving one unused."""
        claim = self._claims.get(claimant)
        if claim is not None:
            if now < claim.until and not claim.used:
                return False
            del self._claims[claimant]  # (judged: used, or its hold is over)
            ended = claim.victims_ended
            stood_free = ended is not None and ended + STOOD_FREE <= claim.until
            if claim.used:
                self._unused.pop(claimant, None)
            elif claim.offered or stood_free:
                unused = self._unused[claimant] = self._unused.get(claimant, 0) + 1
                self._waits[claimant] = now + min(LONGEST_WAIT, FIRST_WAIT * 2 ** (unused - 1))
        wait = self._waits.get(claimant)
        return wait is None or now >= wait

    def waiting(self, claimant: str, now: float) -> float:
        """Seconds it still waits for leaving claims unused (0: none)."""
        return max(0.0, self._waits.get(claimant, now) - now)

    def unused(self, claimant: str) -> int:
        return self._unused.get(claimant, 0)

    def forget(self, framework_id: str) -> None:
        self._claims.pop(framework_id, None)
        self._unused.pop(framework_id, None)
        self._waits.pop(framework_id, None)
