"""Review 69: preemption takes back tasks, never offers, so a tenant that sits on offers
keeps a starving tenant at nothing however long preemption's timeout has passed.

With the master's defaults (no `--offer-timeout`, as Mesos) and preemption on, mallory
comes to the idle cluster first and answers no offer: every slave is offered to it and
stays so. alice then comes, declaring 8 tasks: her fair share is 4, she runs 0 and
starves, and preemption finds no victim -- mallory runs no task; what it holds is
offers, which nothing rescinds. mallory holds the whole cluster (twice its fair share)
for as long as it likes; the docs' hostile-tenant list asks operators for an offer
timeout, but `--preemption-timeout` is sold as "a starving framework gets its share
back".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_tenant import FAIR, PREEMPTION, Tenant, rounds_later, settle, tenants

pytestmark = pytest.mark.timeout(60)


async def test_offers_held_unanswered_are_taken_back_for_a_starving_tenant(
    tmp_path: Path,
) -> None:
    async with tenants(tmp_path, **PREEMPTION) as c:  # (no offer timeout: the default)
        attacker = Tenant(answer=False)
        await c.tenant("mallory", attacker)
        await settle(c, lambda: attacker.offers >= 2)  # both slaves, held unanswered
        victim = Tenant(declare=8)
        await c.tenant("alice", victim)
        await rounds_later(c, 60)  # 3 s: ten times preemption's timeout and notice
        held = len(c.master.books.offers)
        assert c.running("alice") >= FAIR, (
            f"alice, fair share {FAIR} tasks, runs {c.running('alice')} after 60 rounds; "
            f"mallory runs {c.running('mallory')} and holds {held} offers unanswered"
        )
