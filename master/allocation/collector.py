"""The garbage collector paused around an allocation round (`PausedCollector`)."""

from __future__ import annotations

import gc
from types import TracebackType


class PausedCollector:
    """Python's cyclic garbage collector waits while the block runs; after it, one young
    collection takes what the block made, and the collector goes on as before (if on).

    A round makes an offer a slave (a `Resources` and an `Allocation`) and no reference
    cycles. Running, the collector would walk the young objects every 700 new ones, and
    the whole heap every time the survivors grew by a quarter of it: at 50,000 slaves,
    two or three full walks a round, a quarter of its time, freeing nothing. Paused, the
    round's objects are walked once, by the young collection at its end when one is due --
    counted in the round's time, as the one that would otherwise come with the caller's
    next allocation. The master's rounds, the simulator's and the benchmark's all pass here,
    through `Allocator.allocate`. (A class, not a `contextmanager` generator: a simulated
    run has a round every few task events, and the generator cost seven times as much.)"""

    __slots__ = ("_was_on",)

    def __enter__(self) -> None:
        self._was_on = gc.isenabled()
        gc.disable()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._was_on:
            gc.enable()
            # only when one is due (what the block made passed the young threshold): a
            # small round (e2e's, tens a second) made too few objects for one, and a young
            # collection regardless cost the master 3% of its CPU there
            if gc.get_count()[0] >= gc.get_threshold()[0]:
                gc.collect(0)
