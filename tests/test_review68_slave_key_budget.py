"""Review 68: one tenant spends a slave's whole budget of reservations and volumes, and
every other tenant's RESERVE and CREATE on that slave is refused.

The reservations reference: "A slave holds at most 1,024 resources of their own (each
reservation and each volume is one ...): a RESERVE or CREATE past that is refused". The
bound is the slave's, shared by every role and principal, and CREATE is granted to every
principal by default: a tenant with some disk reserved for its role makes 1,020 volumes
of 1 MB in one Accept (one CREATE), and another tenant, on its own role's reserved disk
of the same slave, can make no volume at all ("slave s1 would hold 1025 resources of
their own"). Mesos has no such bound; here it needs to be one a tenant cannot spend for
the others (per role or principal, say).
"""

from __future__ import annotations

from harness.master import Cluster
from harness.master import cluster as cluster
from harness.volume_budget import after_a_hogs_volumes


async def test_one_tenants_volumes_leave_another_tenant_room_for_its_own(
    cluster: Cluster,
) -> None:
    made, errors = await after_a_hogs_volumes(cluster, "a", "b", 1020)
    assert made, errors
