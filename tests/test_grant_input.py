"""Bad input to the operation grants, the principals file and the operator's resource
calls gets a clear error, never a wrong grant or a server error (a hostile tenant's
review: each test failed before its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from master.authz import Caller
from master.mesos_api.operator import CallError, OperatorApi
from protocol.tooling.credentials import CredentialsError, load_principals
from protocol.wire.reservations import ReservationError, check_role, conversion

VOLUME = {
    "name": "disk",
    "type": "SCALAR",
    "scalar": {"value": 64},
    "reservations": [{"type": "DYNAMIC", "role": "a", "principal": "ops"}],
    "disk": {"persistence": {"id": "v1"}, "volume": {"container_path": "data", "mode": "RW"}},
}


@pytest.mark.parametrize("roles", ["team-a", ["../x"], ["a//b"]])
def test_a_principals_roles_edited_by_hand_are_checked(tmp_path: Path, roles: object) -> None:
    # load_principals checks the roles a grant names (check_role) but takes a principal's
    # own roles as `tuple(str(r) for r in entry.get("roles", []))`: a string is split
    # into its letters -- `"roles": "team-a"` lets the principal register in roles t, e,
    # a, m and - (another team's role "a", say) and not in team-a -- and names no role
    # may have ('../x', 'a//b') are taken without a word.
    path = tmp_path / "principals.json"
    entry = {"name": "x", "kind": "framework", "roles": roles}
    path.write_text(json.dumps({"principals": [entry]}))
    with pytest.raises(CredentialsError):
        load_principals(path)


def test_a_principal_named_twice_is_refused(tmp_path: Path) -> None:
    # two entries of one name: the last wins, silently (a framework's entry and an
    # operator's of the same name: the name is an operator's)
    path = tmp_path / "principals.json"
    entries = [
        {"name": "x", "kind": "framework", "roles": ["a"]},
        {"name": "x", "kind": "operator"},
    ]
    path.write_text(json.dumps({"principals": entries}))
    with pytest.raises(CredentialsError):
        load_principals(path)


@pytest.mark.parametrize(
    "call",
    [
        {"type": "SHRINK_VOLUME", "shrink_volume": {"agent_id": {"value": "s0"},
         "volume": VOLUME, "subtract": {"value": 10**400}}},
        {"type": "RESERVE_RESOURCES", "reserve_resources": {"agent_id": {"value": "s0"},
         "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 10**400}}]}},
    ],
)  # fmt: skip
async def test_an_operators_number_too_big_for_a_float_is_a_400(call: dict[str, object]) -> None:
    # OperatorApi._operate catches MesosJSONError and ValidationError; float() of an
    # integer past a float's range (JSON has them) raises OverflowError from
    # mesos_json.resize_from_mesos and resources_from_mesos, uncaught: aiohttp answers
    # 500 and logs a traceback (the scheduler API's `_read` catches it: a 400 there).
    api = OperatorApi.__new__(OperatorApi)
    with pytest.raises(CallError) as e:
        await api._operate(call, Caller("operator", "ops", None))
    assert e.value.status == 400


@pytest.mark.parametrize("key", ["cpus(a,ops)(a,alice)", "cpus(a,alice)(a,alice)(a,alice)"])
def test_a_refinement_is_to_a_sub_role_only(key: str) -> None:
    # conversion's RESERVE asks of a refinement `offered_to(source role, new role)`,
    # which holds for the role itself: a framework granted reserve for its role a, offered
    # the operator's `cpus(a,ops)`, reserves it again in its own name on top
    # (`cpus(a,ops)(a,alice)`) -- the operator's UNRESERVE_RESOURCES of cpus(a,ops) then
    # finds nothing free -- and stacks the same role again and again. The message says
    # "a refinement goes to a sub-role"; Mesos asks a refinement for a child role.
    with pytest.raises(ReservationError, match="sub-role"):
        conversion("RESERVE", {key: 1000})


@pytest.mark.parametrize("role", ["eng/..", "a/./b", "a*b", "a@b", "x=y", "~"])
def test_a_reservation_names_only_a_role_a_framework_may_have(role: str) -> None:
    # reservations.check_role takes any `_WORD` (letters, digits and _ . - / @ + = ~ *)
    # but `*` alone and '.'/'..' whole: `eng/..`, `a/./b`, `a*b`, `a@b` pass, though no
    # framework may register in them (role_tree.check_role, credentials.check_role). An
    # operator's RESERVE_RESOURCES for one (a typo) is taken, and what it holds is offered
    # to nobody until it is unreserved.
    with pytest.raises(ReservationError):
        check_role(role)
