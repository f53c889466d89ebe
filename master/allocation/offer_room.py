"""How many more offers each framework may be given in one round (the offer cycle's bound
on the offers a framework holds: `master.cycle.offer_bound`). A framework that reaches its
room leaves the order until the round ends, so the round's walks pass it by and its slaves go
to the others in the same round -- not allocated to it and given back afterwards (at
50,000 free slaves and a bound of 5,000, a round gave each framework every slave and took
45,000 back). The slaves that nobody took meanwhile are looked at again `RETRY` seconds
later, when the full framework may have answered its offers. No I/O."""

from __future__ import annotations

from collections.abc import Callable, Mapping

RETRY = 5.0  # seconds before a slave passed over for a full framework is looked at again


class OfferRoom:
    def __init__(
        self,
        room: Mapping[str, int],
        leave: Callable[[str], bool],
        come_back: Callable[[str], None],
    ) -> None:
        """`room`: offers each framework may still be given (one not named: any number);
        `leave(framework)` takes one out of the order (False if it was not in it);
        `come_back(framework)` puts it back."""
        self._left = dict(room)
        self._leave, self._come_back = leave, come_back
        self.out: list[str] = []  # the frameworks taken out, to put back at the end
        for framework_id, left in room.items():
            if left <= 0:
                self._take_out(framework_id)

    def given(self, framework_id: str) -> None:
        """One more offer to `framework_id` in this round."""
        left = self._left.get(framework_id)
        if left is not None:
            self._left[framework_id] = left - 1
            if left <= 1:
                self._take_out(framework_id)

    def end(self) -> None:
        """The round is over: every framework taken out comes back."""
        for framework_id in self.out:
            self._come_back(framework_id)
        self.out.clear()

    def _take_out(self, framework_id: str) -> None:
        if self._leave(framework_id):
            self.out.append(framework_id)
