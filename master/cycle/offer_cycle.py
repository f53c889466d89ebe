"""The offer cycle's steps, each whole: a round, an answer's remainder declined, suppress
and revive, offers timed out, the preemption check and its kills. Each changes the
allocator's books itself and returns what only a shell can do (`master.cycle.plans`).

When to run them is the shell's: the master's loops keep time (a round every allocation
interval and `ROUND_BATCH` after a free, the timers four times a second); the simulator
puts them on its event heap. The same books give the same decisions in both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from master.allocation.allocator import Allocator
from master.allocation.collector import PausedCollector
from master.allocation.fair_shares import Contender
from master.allocation.ledger import Allocation, Answer, AtOnce
from master.allocation.preemption import Preemption, PreemptionConfig, fits, room_for
from master.allocation.sorter import Millis
from master.cycle import offer_bound, why
from master.cycle.claims import contender, hold_claim, hold_until, planning_cluster
from master.cycle.offer_log import Offered, OfferLog
from master.cycle.plans import Kill, PreemptionPlan, RoundPlan, TimedOut
from master.cycle.state import State
from master.cycle.why import Told
from protocol.wire.resources import Resources

ROUND_BATCH = 0.005  # seconds: frees within this window share one round
TIMED_OUT_REFUSE = 5.0  # an offer let time out counts as declined this long (Mesos's 5 s)
MAX_TIMED_OUT_REFUSE = 300.0  # doubled for each in a row, up to this


@dataclass(frozen=True)
class CycleConfig:
    policy: str = "drf"  # as the master's --policy (the ideal preemption measures with)
    allocation_interval: float = 1.0
    offer_timeout: float | None = None  # off by default, as in Mesos
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)  # off by default
    record_offers: bool = True  # keep the recent rounds' offers for `why` (off: to measure)


class OfferCycle:
    """One allocator's offer cycle, reading the rest of the books through `state`."""

    def __init__(self, allocator: Allocator, state: State, config: CycleConfig) -> None:
        self.allocator = allocator
        self.state = state
        self.config = config
        self.preemption = Preemption(config.preemption)  # its memory: timers, victims, counts
        self._timed_out: dict[str, int] = {}  # offers each let time out since it last answered
        self._smallest: dict[str, Resources] = {}  # offer filters set by `wants_offers`
        self.offers_log = OfferLog()  # the recent rounds' offers (for `why`)
        # each refuse_seconds a round was given: (`_whole_refusal`, `_refusal`) of it
        self._refusals: dict[float | None, tuple[float, float | None]] = {}

    # -- the round ---------------------------------------------------------------------------
    def round(
        self,
        now: float,
        answer: Answer | None = None,
        refuse_seconds: float | None = None,
    ) -> RoundPlan:
        """Who is offered which slave's free resources: at most MAX_OFFERS_HELD offers
        held by each framework (`offer_bound`); what a round would give one past that
        goes back to the pool, kept from it for OFFERS_HELD_REFUSE so that the next
        rounds offer it to others.

        `answer` (a shell whose frameworks answer at once, the simulator's): what of an
        offer a framework uses, asked as the round makes it (`ledger.Answer`). An offer it
        declines whole was never outstanding -- not booked, not in the plan, counted
        nowhere -- its framework refuses that slave for `refuse_seconds` as `decline`
        would have it, and the slave is offered on down the order in the same round, as
        the master's next round would offer it once the decline is back (ROUND_BATCH
        later); of one it uses in part only what it uses is in the plan, and it refuses the
        rest as `decline` would have it; where the allocator can tell them apart
        (`Allocator.allocate`: elsewhere an offer is in the plan whole, to be answered)."""
        a = self.allocator
        held = self.state.offers_held()
        slaves = len(a.slaves)
        bounded = held or slaves > offer_bound.MAX_OFFERS_HELD  # (else nobody can reach it)
        room = offer_bound.room(held, a.frameworks, slaves) if bounded else None
        at_once = None
        if answer is not None:
            refusals = self._refusals.get(refuse_seconds)
            if refusals is None:  # (one refuse_seconds a shell, the usual: worked out once)
                refusals = self._whole_refusal(refuse_seconds), self._refusal(refuse_seconds)
                self._refusals[refuse_seconds] = refusals
            at_once = AtOnce(answer, *refusals)
        allocations = a.allocate(now, room=room, at_once=at_once)
        if not room or not allocations:
            self._offered(now, allocations)
            return RoundPlan(allocations)
        offered, held_back = offer_bound.within_bound(allocations, held)
        self._offered(now, offered)
        for b in held_back:
            a.recover(
                b.framework_id,
                b.slave_id,
                b.resources,
                role=b.role,
                refuse_seconds=offer_bound.OFFERS_HELD_REFUSE,
                now=now,
            )
        return RoundPlan(offered, held_back)

    def _offered(self, now: float, offered: list[Allocation]) -> None:
        """What a round offered, told to the offers log and to whoever watches claims."""
        if self.config.record_offers:
            self.offers_log.record(now, offered)
        if (use := self.preemption.claim_use).watching:
            for o in offered:
                use.offered(o.framework_id, o.slave_id, o.resources.millis)

    # -- answers -----------------------------------------------------------------------------
    def launched(self, framework_id: str, slave_id: str, resources: Resources) -> None:
        """It launched tasks of `resources` in all on the slave (from an offer)."""
        self.preemption.claim_use.launched(framework_id, slave_id, resources.millis)

    def decline(
        self,
        framework_id: str,
        slave_id: str,
        resources: Resources,
        refuse_seconds: float | None,
        now: float,
        role: str | None = None,
        *,
        whole: bool = False,
    ) -> bool:
        """Offered resources a framework did not use (declined, or left over by what it
        launched) go back to the pool, kept from it on that slave for `refuse_seconds`
        (its filter; none if None or 0), and at least one allocation interval, as Mesos
        keeps it (MESOS-4302: a shorter filter lapses before the next round could honour
        it); a multi-role framework's filter is its offer's `role`'s. An offer declined
        `whole` is kept from it that long with a filter of 0 too: what it declines goes
        to the next in the order (where Mesos keeps no filter for 0, a framework first in
        the order, holding nothing, is offered it straight back and keeps it from one
        that wants it by declining). True if anything went back: a round is worth running."""
        if not resources:
            return False
        refusal = self._whole_refusal(refuse_seconds) if whole else self._refusal(refuse_seconds)
        if (use := self.preemption.claim_use).watching:  # (if it holds a task's room)
            use.declined(framework_id, slave_id, resources.millis)
        self.allocator.recover(
            framework_id, slave_id, resources, role=role, refuse_seconds=refusal, now=now
        )
        return True

    def _refusal(self, refuse_seconds: float | None) -> float | None:
        """A decline filter lasts at least one allocation interval."""
        if refuse_seconds:
            return max(refuse_seconds, self.config.allocation_interval)
        return refuse_seconds

    def _whole_refusal(self, refuse_seconds: float | None) -> float:
        """An offer declined whole is filtered one allocation interval even with 0."""
        return self._refusal(refuse_seconds) or self.config.allocation_interval

    def answered(self, framework_id: str) -> None:
        """It answered an offer: the next one it lets time out is filtered from
        TIMED_OUT_REFUSE again."""
        self._timed_out.pop(framework_id, None)

    def set_offer_filters(
        self, framework_id: str, minimum: list[Resources] | None, roles: Sequence[str] = ()
    ) -> None:
        """What a framework's offers must hold at least one of (Mesos's
        `min_allocatable_resources`), in place of the master's minimum: [] anything,
        None the master's minimum again; a multi-role framework's in `roles` (none: all)."""
        self._smallest.pop(framework_id, None)
        self.allocator.set_min_allocatable(framework_id, minimum, roles)

    # -- suppress and revive -------------------------------------------------------------------
    def suppress(self, framework_id: str, roles: Sequence[str] = ()) -> None:
        """No offers until revive: it leaves the order (and costs the rounds nothing); a
        multi-role framework in `roles` (none: all)."""
        self.allocator.suppress(framework_id, roles)

    def revive(
        self, framework_id: str, roles: Sequence[str] = (), now: float | None = None
    ) -> None:
        """Offers again, everywhere: its suppression and every filter cleared (a round is
        worth running); a multi-role framework's in `roles` (none: all). With `now`, a
        decline's floor of one allocation interval stands (`decline`'s `whole`)."""
        keep = None if now is None else now + self.config.allocation_interval
        self.allocator.revive(framework_id, roles, keep)

    def unsuppress(self, framework_id: str, roles: Sequence[str] = ()) -> None:
        """Offers again, its filters kept (a (re-)subscription naming no suppression, as
        Mesos's allocator unsuppresses it: not a REVIVE); a multi-role framework in `roles`
        (none: all)."""
        self.allocator.revive(framework_id, roles, keep_until=math.inf)

    def suppressed(self, framework_id: str) -> bool:
        return self.allocator.suppressed(framework_id)

    def wants_offers(
        self, framework_id: str, wants: bool, smallest: Resources | None = None
    ) -> bool:
        """A framework that suppresses its offers while it has nothing to launch and
        revives them when it has (as the simulator's do): suppressed or revived as that
        changes; with `smallest`, offered only slaves with room for it (its offer filter,
        kept to the size of its next task). True if it was revived: a round is worth
        running."""
        if smallest is not None:
            now = self._smallest.get(framework_id)
            if now is not smallest and now != smallest:  # (a stage's tasks share their size)
                self._smallest[framework_id] = smallest
                self.allocator.set_min_allocatable(framework_id, [smallest])
        suppressed = self.allocator.suppressed(framework_id)
        if wants and suppressed:
            self.revive(framework_id)
            return True
        if not wants and not suppressed:
            self.suppress(framework_id)
        return False

    # -- offer timeouts ------------------------------------------------------------------------
    def expired(self, now: float) -> list[TimedOut]:
        """Offers unanswered past the offer timeout, to rescind. Unlike Mesos (which offers
        them straight back), each counts as declined for TIMED_OUT_REFUSE seconds, doubled
        for each offer its framework let time out in a row (up to MAX_TIMED_OUT_REFUSE):
        back at once, it went to the one that let it time out, first again in the DRF
        order with its share at 0, and a framework that never answers (hung, or hostile)
        kept every free resource from the others."""
        timeout = self.config.offer_timeout
        hoarding, starving = self._over_fair_share_while_starving(now)
        if not timeout and not hoarding:
            return []
        sat = self.preemption.config.timeout or 0.0  # (a hoarder's offer, outstanding that long)
        out: list[TimedOut] = []
        for offer in list(self.state.outstanding()):
            age = now - offer.created_at
            if not (timeout and age > timeout) and not (
                offer.framework_id in hoarding
                and age > sat
                and _of_use(offer.resources.millis, starving)
            ):
                continue
            fid = offer.framework_id
            in_a_row = self._timed_out[fid] = self._timed_out.get(fid, 0) + 1
            refuse = min(TIMED_OUT_REFUSE * 2 ** min(in_a_row - 1, 16), MAX_TIMED_OUT_REFUSE)
            self.allocator.recover(
                fid,
                offer.slave_id,
                offer.resources,
                role=offer.role,
                refuse_seconds=refuse,
                now=now,
            )
            out.append(TimedOut(offer.offer_id, fid, offer.slave_id, offer.resources, refuse))
        return out

    def _over_fair_share_while_starving(
        self, now: float
    ) -> tuple[set[str], list[tuple[str, list[Millis]]]]:
        """With preemption on and a framework (or a role short of its guarantee) starved
        past its timeout, the frameworks over their fair shares: their offers outstanding
        longer than that timeout are taken back as timed out. Preemption ends tasks, and a
        framework that sat on offers unanswered (no --offer-timeout, Mesos's default)
        kept a starving one at nothing with no task to end (review 69). Those frameworks;
        and the starving, each its role and task shapes: an offer
        none of them could run a task in is left alone (review 70: another's offer of its
        own reservation, or room too small for the starving one's tasks, was taken back
        for nothing)."""
        p = self.preemption
        timeout = p.config.timeout
        if timeout is None or not p.starving_since:
            return set(), []
        # (one whose claim is yet to be judged, or that waits for leaving one unused, takes
        # nothing back either)
        starving = [
            p.wanted[who]
            for who, since in p.starving_since.items()
            if now - since >= timeout and who in p.wanted and p.settled(who, now)
        ]
        if not starving:
            return set(), []
        a = self.allocator
        known = [
            (fid, fair) for fid, fair in p.fair.items() if a.clients.first(fid) in a.frameworks
        ]
        return {fid for fid, fair in known if a.dominant_share(fid) > fair + 1e-9}, starving

    # -- preemption ----------------------------------------------------------------------------
    @property
    def preempting(self) -> bool:
        return self.preemption.config.on

    def contenders(self, now: float) -> list[Contender]:
        """Every framework as preemption sees it (the fair shares are computed on these)."""
        return [contender(self.allocator, wish) for wish in self.state.wishes(now)]

    def check(self, now: float) -> PreemptionPlan:
        """Preemption's check (when it is on): fair shares and starvation timers updated,
        and a claim for whoever has starved long enough. Each claim's victims are doomed,
        to be killed at the plan's `kill_at`, and the room they free is held for the
        claimant until its offer can go out."""
        if not self.preempting:
            return PreemptionPlan()
        a, notice = self.allocator, self.preemption.config.notice
        contenders = self.contenders(now)
        framework_ids = [c.framework_id for c in contenders]
        cluster = planning_cluster(a, framework_ids, self.state.running(), self.preemption.doomed)
        until = hold_until(now, notice, self.config.allocation_interval)
        with PausedCollector():  # (planning's trial books make no cycles: as a round's)
            claims = self.preemption.check(
                now,
                self.config.policy,
                contenders,
                cluster,
                a.roles.pool_weights(),
                a.quotas,
                a.roles.is_tree(),
                hold_until=until,
                fifo_pools=a.roles.fifo_pools(),
            )
        use = self.preemption.claim_use
        for claim in claims:
            hold_claim(a, claim, until)
            book = a.frameworks.get(claim.claimant)
            filters = book.filters if book is not None else {}
            for plan in claim.plans:  # (a slave whose decline stands: turned down already)
                kept_from = filters.get(plan.slave_id)
                if kept_from is not None and kept_from.expires > now:
                    use.declined(claim.claimant, plan.slave_id)
        return PreemptionPlan(claims, now + notice)

    def kills_due(self, now: float) -> list[Kill]:
        """Victims whose notice is over and that run still, to kill (each once); those
        that ended meanwhile are forgotten."""
        kills = []
        for framework_id, task_id, doomed in self.preemption.due(now):
            if self.state.task_live(framework_id, task_id):
                kills.append(Kill(framework_id, task_id, doomed.slave_id))
            else:
                self.preemption.doomed.pop((framework_id, task_id), None)
        return kills

    def task_ended(
        self,
        framework_id: str,
        task_id: str,
        *,
        finished: bool,
        ran: float,
        now: float | None = None,
        on: tuple[str, Resources] | None = None,
    ) -> bool:
        """A task ended (at `now`; `on`: its slave and resources, if known): True if it
        was a victim that did not finish on its own (its work, `ran` seconds of it, is
        thrown away)."""
        use = self.preemption.claim_use
        if on is not None and use.watching:
            # (a task preempted for another's claim used the room while it ran, as one
            # that finished: its end is not the claimant's doing)
            preempted = (framework_id, task_id) in self.preemption.doomed
            use.task_ended(framework_id, on[0], on[1].millis, finished or preempted)
        if not self.preemption.doomed:
            return False
        return self.preemption.ended(framework_id, task_id, finished=finished, ran=ran, now=now)

    # -- why not -----------------------------------------------------------------------------------
    def why(
        self,
        framework_id: str,
        now: float,
        standing: why.Standing | None = None,
        *,
        fair_share: bool = True,
        others_named: bool = True,
    ) -> tuple[list[why.Reason], list[Offered]]:
        """Why a framework (one the allocator knows) is offered nothing, the reason that
        explains first (`master.cycle.why`); and what the recent rounds offered it. Its
        fair share is preemption's as last computed (`fair_share`: said at all)."""
        reasons = why.explain(
            self.allocator,
            self.state,
            framework_id,
            now,
            standing,
            fair=self.preemption.fair if fair_share else None,
            others_named=others_named,
        )
        wait, unused = self.preemption.waiting(framework_id, now)
        if reasons and reasons[0].code in why.ALL_ALLOCATED and wait:
            first = reasons[0]
            whose = (
                f"it left the room freed for it unused {unused} time(s) in a row"
                if unused
                else "claims in its role were left unused"
            )
            reasons[0] = why.Reason(
                first.code,
                f"{first.message}; preemption frees no room for it for {wait:.0f} s more: {whose}",
                {
                    **first.numbers,
                    "preemption_wait": round(wait, 1),
                    "claims_unused": float(unused),
                },
            )
        return reasons, self.offers_log.offered(framework_id)

    def why_first(self, framework_id: str, now: float) -> Told | None:
        """The code of the reason `why` gives first (no fair share said), and how to say
        it, made only when asked (`master.cycle.why.first`): for the simulator, which asks
        at every sample and keeps each sentence only the first time."""
        return why.first(self.allocator, self.state, framework_id, now)

    # -- frameworks ------------------------------------------------------------------------------
    def slave_removed(self, slave_id: str) -> None:
        """A slave removed: the rooms claims freed on it are asked of nobody."""
        self.preemption.claim_use.slave_removed(slave_id)

    def forget(self, framework_id: str, now: float | None = None) -> None:
        """A framework left (at `now`, if known): its timers, victims it no longer owns,
        its count of offers let time out and its offer filter go."""
        self.preemption.forget(framework_id, now)
        self._timed_out.pop(framework_id, None)
        self._smallest.pop(framework_id, None)


def _of_use(offered: Mapping[str, int], starving: list[tuple[str, list[Millis]]]) -> bool:
    """Whether one of the starving could run a task of its in the offer (what of it its
    role may use)."""
    return any(
        fits(shape, room_for(offered, role)) for role, shapes in starving for shape in shapes
    )
