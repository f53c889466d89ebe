"""The master's answer to "why is this framework offered nothing?": the framework found by
id or name among those the asker may see, what the shell knows of it that the offer cycle
does not (its connection, its principal's right to its role, its calls' rate limit), the
cycle's reasons (`master.cycle.why`), and the wire's `Why` made of them. One answer for
every door: the bus (`AskWhy`), the HTTP API, the web UI and the Mesos operator API."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from master.authz import RoleACL
from master.books import Books, Framework
from master.cycle import OfferCycle
from master.cycle.why import Standing
from master.intake.queues import PrincipalQueues
from protocol.wire.why import Why, WhyOffered, WhyReason

REFUSED_LATELY = 60.0  # seconds: refused calls this recent make `rate-limited` a reason
ANSWER_KEPT = 1.0  # seconds an answer is given again, if no round ran meanwhile
KEPT_MOST = 10_000  # answers kept at most (then forgotten together)
# An answer reads every slave (some 20 ms of the loop on 10,000): each principal's new
# ones may take at most BUDGET seconds of every BUDGET_WINDOW, and every principal's
# together BUDGET_ALL, so a flood of questions -- about many frameworks, from many
# principals -- costs the master that much at most, and one tenant's questions leave
# another its own budget (review 53). What an answer spends past a budget is paid for by
# the windows after it (one of 3 s holds new answers some 30 s). Past it, a question gets
# the last answer about its framework, or is refused as busy.
BUDGET, BUDGET_WINDOW = 0.1, 1.0
BUDGET_ALL = 0.25
PRINCIPALS_KEPT = 64  # principals' spending kept before those paid up are forgotten


# the HTTP status of each refusal (the web API's, and Mesos's operator API's)
REFUSED_STATUS = {"unknown-framework": 404, "ambiguous": 409, "busy": 503}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why no answer: an unknown (or another tenant's) framework, a name several share,
    or answers over their budget for now (`busy`)."""

    code: str
    message: str


class WhyAnswers:
    def __init__(
        self,
        books: Books,
        cycle: OfferCycle,
        queues: PrincipalQueues,
        roles_acl: RoleACL,
        clock: Callable[[], float],
    ) -> None:
        self.books = books
        self.cycle = cycle
        self.queues = queues
        self.roles_acl = roles_acl
        self.clock = clock  # the master's (loop time), as the cycle's `now`
        self._refused: dict[str, tuple[int, float]] = {}  # principal -> (count, when it grew)
        # (id, to an operator) -> (rounds run, when, the answer)
        self._kept: dict[tuple[str, bool], tuple[int, float, Why]] = {}
        self._window, self._spent = 0.0, 0.0  # this window's start, what is owed (all)
        self._principals: dict[str, tuple[float, float]] = {}  # the same, each asker's

    def find(self, framework: str, kind: str, principal: str) -> Framework | Refusal:
        """The framework `framework` names (its id, else its name) among those the asker
        may see: an operator every one, a framework principal its own. Another tenant's
        is unknown, in the same words as one that does not exist."""
        mine = [
            fw
            for fw in self.books.frameworks.values()
            if kind == "operator" or fw.principal == principal
        ]
        by_id = [fw for fw in mine if fw.framework_id == framework]
        named = by_id or [fw for fw in mine if fw.name == framework]
        if len(named) == 1:
            return named[0]
        if named:
            ids = ", ".join(sorted(fw.framework_id for fw in named))
            return Refusal("ambiguous", f"{len(named)} frameworks are named {framework}: {ids}")
        return Refusal("unknown-framework", f"no framework {framework} (an id or a name)")

    def answer(
        self, fw: Framework, request_id: str = "", *, operator: bool = True, principal: str = ""
    ) -> Why | Refusal:
        """Its reasons now -- to an operator naming other frameworks and roles, to its
        tenant counting them (a tenant may not learn which frameworks exist); the same
        answer again to a question asked within ANSWER_KEPT seconds and no round between,
        or past the asker's (`principal`'s) budget or every asker's (its `timestamp` says
        when it was made)."""
        now = self.clock()
        rounds = self.cycle.offers_log.rounds
        key = (fw.framework_id, operator)
        kept = self._kept.get(key)
        fresh = kept is not None and kept[0] == rounds and now - kept[1] < ANSWER_KEPT
        self._window, self._spent = _paid(self._window, self._spent, now, BUDGET_ALL)
        window, spent = _paid(*self._principals.get(principal, (now, 0.0)), now, BUDGET)
        wait = max(_waits(spent, BUDGET), _waits(self._spent, BUDGET_ALL))
        if kept is not None and (fresh or wait):
            return kept[2].model_copy(update={"request_id": request_id})
        if wait:
            return Refusal("busy", f"too many questions of why at once: ask again in {wait:.0f} s")
        started = time.perf_counter()
        why = self._answer(fw, now, request_id, operator)
        cost = time.perf_counter() - started
        self._spent += cost
        if len(self._principals) >= PRINCIPALS_KEPT:  # (forget the paid up)
            self._principals = {p: ws for p, ws in self._principals.items() if ws[1] > 0}
        self._principals[principal] = (window, spent + cost)
        if len(self._kept) >= KEPT_MOST:
            self._kept.clear()
        self._kept[key] = (rounds, now, why)
        return why

    def _answer(self, fw: Framework, now: float, request_id: str, operator: bool) -> Why:
        wall = time.time()
        # the rounds since it came (its registration, on the loop's clock): a framework of
        # 4 s was told of 32 rounds in 251 s that it could not have been offered in
        rounds, oldest = self.cycle.offers_log.after(now - max(0.0, wall - fw.registered_at))
        reasons, offered = self.cycle.why(
            fw.framework_id, now, self.standing(fw, now), others_named=operator
        )
        return Why(
            framework_id=fw.framework_id,
            name=fw.name,
            role=fw.role,
            roles=fw.roles,
            request_id=request_id,
            reasons=[WhyReason(code=r.code, message=r.message, numbers=r.numbers) for r in reasons],
            offered=[
                WhyOffered(
                    slave_id=o.offer.slave_id,
                    resources=o.offer.resources,
                    seconds_ago=round(now - o.at, 3),
                    at=round(wall - (now - o.at), 3),
                )
                for o in offered
            ],
            rounds=rounds,
            since=round(now - oldest, 3) if oldest is not None else 0.0,
            timestamp=wall,
        )

    def standing(self, fw: Framework, now: float) -> Standing:
        """What the shell knows of `fw` that the cycle does not."""
        counts = self.queues.counts.get(fw.principal)
        queued = counts.queued if counts is not None else 0
        refused = counts.refused if counts is not None else 0
        seen, grew = self._refused.get(fw.principal, (0, now))
        if refused != seen:
            self._refused[fw.principal] = (refused, now)
            grew = now
        # (the intake counts refusals since the master started: they count here while
        # the count grew in the last REFUSED_LATELY seconds, or since it was last asked)
        lately = refused if refused and now - grew <= REFUSED_LATELY else 0
        _, limit = self.queues.limit_of(fw.principal)
        return Standing(
            connected=fw.connected,
            role_refused=self.roles_acl.check(fw.principal, fw.role) or "",
            calls_queued=queued,
            calls_refused=lately,
            qps=limit.qps,
            capacity=limit.capacity,
            maintenance={
                slave_id: out.status
                for slave_id, out in self.books.maintenance.items()
                if slave_id in self.books.slaves
            },
        )


def _paid(window: float, spent: float, now: float, budget: float) -> tuple[float, float]:
    """(the window `now` is in, what is still owed): each window that began since
    `window` pays `budget` of what was `spent`."""
    windows = int((now - window) // BUDGET_WINDOW)
    if windows <= 0:
        return window, spent
    return window + windows * BUDGET_WINDOW, max(0.0, spent - budget * windows)


def _waits(owed: float, budget: float) -> float:
    """Seconds until what is `owed` is paid enough for a new answer (0: now)."""
    return 0.0 if owed < budget else math.ceil(owed / budget) * BUDGET_WINDOW
