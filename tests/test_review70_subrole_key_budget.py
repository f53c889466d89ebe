"""Review 70: the slave's bound of 1,024 reservations and volumes per top-level role is
shared by every tenant under that role: one tenant's volumes on `eng/a` leave a tenant
of `eng/b` no room to make one on its own reserved disk.

cbbdaea made the bound (review 68) one per top-level role, "a tenant: its sub-roles' are
its own" (`resource_operations._tenant`: the first segment of the role). On a tree of
roles the tenants are commonly sub-roles of one parent (Mesos's own example: eng/frontend,
eng/backend; a principal's `roles` list names its role exactly, `may_use_role`): mallory,
of role `eng/a`, with disk reserved for `eng/a`, makes 1,023 volumes of 1 MB in one CREATE
(granted by default), and bob, of role `eng/b`, with 64 MB reserved for `eng/b` on the same
slave, can make none ("role eng would hold 1025 resources of its own"). Review 68's case
again, one level down.
"""

from __future__ import annotations

from harness.master import Cluster
from harness.master import cluster as cluster
from harness.volume_budget import after_a_hogs_volumes


async def test_one_sub_roles_volumes_leave_a_sibling_sub_role_room_for_its_own(
    cluster: Cluster,
) -> None:
    made, errors = await after_a_hogs_volumes(cluster, "eng/a", "eng/b", 1022)
    assert made, errors
