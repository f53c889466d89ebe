"""The web UI's live feed: what changed, every tick, to every open page.

A view of the cluster small enough to send often (totals, frameworks with their shares
and fair shares, roles, counters) is built once a tick and compared with the last one;
each page gets only the entries that changed, plus the events since the last tick. A new
page gets the whole view first, with the shares of the last HISTORY ticks, which the
master keeps whether or not a page is open (a reload, or a page opened on a quiet cluster,
draws its chart from them). Slaves and tasks are not in the feed: the page asks for
the part it shows (`/api/v1/slaves?offset=`, `/api/v1/tasks?framework=`), so a cluster of
thousands costs the feed nothing more. Offers come and go many times a second: the feed
counts them but does not list them (the event stream on the bus has every one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from typing import Any

from protocol.wire.messages import ClusterEvent, State

QUEUE = 64  # ticks a slow page may fall behind before it is dropped
HISTORY = 600  # ticks of shares kept for a page that opens (a reload keeps its chart)
# the offer loop's own chatter: counted in the view (outstanding offers), not listed
QUIET = frozenset({"offer", "accept", "decline", "rescind"})


def view_of(state: State) -> dict[str, Any]:
    """What the feed shows of a state snapshot, keyed so that changes can be found."""
    return {
        "cluster": {
            "master_id": state.master_id,
            "policy": state.policy,
            "total": state.total.to_dict(),
            "allocated": state.allocated.to_dict(),
            "slaves": state.slaves_registered,
            "offers": state.offer_count,
            "tasks": sum(f.running_tasks for f in state.frameworks),
            "refused": state.refused,
            "preemption": state.preemption.model_dump(mode="json") if state.preemption else None,
        },
        "frameworks": {
            f.framework_id: f.model_dump(mode="json", exclude={"demand"}) for f in state.frameworks
        },
        "roles": {r.role: r.model_dump(mode="json") for r in state.roles},
    }


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The parts of `new` that differ from `old`: a section's changed keys (None: gone)."""
    out: dict[str, Any] = {}
    if old.get("cluster") != new["cluster"]:
        out["cluster"] = new["cluster"]
    for section in ("frameworks", "roles"):
        before, after = old.get(section, {}), new[section]
        changed = {k: v for k, v in after.items() if before.get(k) != v}
        changed.update({k: None for k in before if k not in after})
        if changed:
            out[section] = changed
    return out


class LiveFeed:
    def __init__(self) -> None:
        self.last: dict[str, Any] = {}
        self._latest: State | None = None  # with no page open, the view is made on demand
        self.pages: set[asyncio.Queue[str]] = set()
        self._events: list[ClusterEvent] = []
        # every tick's shares, {framework: [dominant, fair]}, whether or not a page is open
        self.history: deque[tuple[float, dict[str, list[float | None]]]] = deque(maxlen=HISTORY)
        self.names: dict[str, str] = {}  # of the frameworks in `history`, gone ones too

    def watched(self) -> bool:
        """Whether a page watches: the feed takes events only then."""
        return bool(self.pages)

    def event(self, event: ClusterEvent) -> None:
        if self.pages and event.kind not in QUIET:
            self._events.append(event)

    def tick(self, state: State) -> None:
        """Send each page what changed since the last tick (nothing, if nothing did)."""
        self._latest = state
        self._remember(state)
        if not self.pages:  # nobody watching: no view, no diff, just the state to start from
            return
        new = view_of(state)
        changes = diff(self.last, new)
        self.last = new
        events, self._events = self._events[-200:], []
        if not (changes or events):
            return
        changes["t"] = time.time()
        changes["events"] = [e.model_dump(mode="json") for e in events]
        self._send("changes", changes)

    def _remember(self, state: State) -> None:
        shares = {f.framework_id: [f.dominant_share, f.fair_share] for f in state.frameworks}
        for f in state.frameworks:
            self.names.setdefault(f.framework_id, f.name)
        if len(self.history) == HISTORY:  # the oldest tick goes: so may names only it had
            gone = set(self.history[0][1]) - set(shares)
            if gone and not any(gone & set(s) for _, s in list(self.history)[1:]):
                for framework_id in gone:
                    self.names.pop(framework_id, None)
        self.history.append((state.timestamp, shares))

    def _send(self, kind: str, body: dict[str, Any]) -> None:
        message = f"event: {kind}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"
        for page in list(self.pages):
            try:
                page.put_nowait(message)
            except asyncio.QueueFull:  # too slow to keep up: it reconnects and starts over
                self.pages.discard(page)
                with contextlib.suppress(asyncio.QueueFull):
                    page.put_nowait("")  # wake it up; an empty message means "go away"

    def open(self) -> asyncio.Queue[str]:
        """A new page: the whole view first, then changes."""
        page: asyncio.Queue[str] = asyncio.Queue(QUEUE)
        if not self.pages and self._latest is not None:  # the first page: the view from now
            self.last = view_of(self._latest)
        body = {
            **self.last,
            "t": time.time(),
            "events": [],
            "history": list(self.history),
            "names": self.names,
        }
        page.put_nowait(f"event: snapshot\ndata: {json.dumps(body, separators=(',', ':'))}\n\n")
        self.pages.add(page)
        return page

    def close(self, page: asyncio.Queue[str]) -> None:
        self.pages.discard(page)
