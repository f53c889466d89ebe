"""A page of slaves for /api/v1/slaves, without sorting or copying them all.

At 50,000 slaves a request that sorted every id to return a page of 100 built a
50,000-entry list each time. A page is the `offset + limit` smallest in the sort's order
(heapq keeps only those), and the total is counted as the slaves are walked: the cost
is one pass over the slaves and a heap the size of the page's end.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any, Protocol


class Listed(Protocol):
    slave_id: str
    hostname: str
    last_seen: float


def slave_page(
    slaves: Mapping[str, Listed], sort: str, offset: int, limit: int, search: str = ""
) -> tuple[list[str], int]:
    """The ids of the page, in `sort`'s order (by id, or by `last_heartbeat`: the longest
    unheard first; a `-` before reverses it), among the slaves whose id or hostname holds
    `search`; and how many those are."""
    total = 0

    def matching() -> Any:
        nonlocal total
        for s in slaves.values():
            if not search or search in s.slave_id or search in s.hostname:
                total += 1
                yield s

    if sort.lstrip("-") == "last_heartbeat":
        key: Any = lambda s: (s.last_seen, s.slave_id)  # noqa: E731
    else:
        key = lambda s: s.slave_id  # noqa: E731
    pick = heapq.nlargest if sort.startswith("-") else heapq.nsmallest
    chosen = pick(offset + limit, matching(), key=key)
    return [s.slave_id for s in chosen[offset:]], total
