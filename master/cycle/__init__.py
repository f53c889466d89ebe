"""The offer cycle, written once for the master and the simulator. Pure: no I/O, no wire
type, no clock (callers pass `now`), as `master.allocation`, which it drives.

Around the allocation policy it runs what makes offers of its decisions: the round and
the offer bound (`offer_bound`), the remainder an answer declines, suppress and revive,
offer timeouts, and the preemption check with the holds that keep freed room for its
claimant (`claims`). It reads the books it does not keep through a narrow interface
(`state.State`, as Nomad's schedulers read theirs) and returns what to do outside them as
data (`plans`): offers to send, offers to rescind, tasks to warn and to kill. The master
applies those over the bus (`master.rounds`, `master.preemptor`, the call handlers); the
simulator on its event heap (`cluster.experiments.simulator`).
"""

from master.cycle.offer_cycle import ROUND_BATCH, CycleConfig, OfferCycle
from master.cycle.plans import Kill, PreemptionPlan, RoundPlan, TimedOut
from master.cycle.state import Outstanding, State, Wish

__all__ = [
    "ROUND_BATCH",
    "CycleConfig",
    "Kill",
    "OfferCycle",
    "Outstanding",
    "PreemptionPlan",
    "RoundPlan",
    "State",
    "TimedOut",
    "Wish",
]
