"""Which user a principal's tasks run as: the operator's `--task-users` file and the
machine's uid map, read and checked as a slave's start does (no process is run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slave.task_users import TaskUsers, TaskUsersError, UidMap, load_operator_users

UIDS = range(1_000_000_000, 1_001_000_000)


def users_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task-users.yaml"
    path.write_text(text)
    return path


def test_two_principals_named_to_one_uid_are_refused_at_start(tmp_path: Path) -> None:
    """alice and mallory on one uid would each read and signal the other's tasks."""
    path = users_file(tmp_path, "users:\n  alice: 2001\n  mallory: '2001:3000'\n")
    with pytest.raises(TaskUsersError, match=r"mallory and alice would run as one user"):
        load_operator_users(path, UIDS)


def test_distinct_users_are_taken(tmp_path: Path) -> None:
    path = users_file(tmp_path, "users:\n  alice: 2001\n  bob: '2002:3000'\n")
    found = load_operator_users(path, UIDS)
    assert {p: (u.uid, u.gid) for p, u in found.items()} == {
        "alice": (2001, 2001),
        "bob": (2002, 3000),
    }


def test_root_the_slaves_user_and_the_slaves_range_are_refused(tmp_path: Path) -> None:
    for spec in ("0", str(os.geteuid()), "2001:0", str(UIDS.start)):
        with pytest.raises(TaskUsersError):
            load_operator_users(users_file(tmp_path, f"users:\n  alice: '{spec}'\n"), UIDS)


def test_one_principals_name_in_two_clusters_is_two_users(tmp_path: Path) -> None:
    """Two clusters' slaves on one machine share its uid map: alice of one cluster never
    runs as alice of the other (each would reach the other's tasks), and each keeps her
    uid across restarts (a map read again)."""
    path = tmp_path / "task-uids.json"
    one = TaskUsers(UidMap(path, UIDS), {}, "prod")
    other = TaskUsers(UidMap(path, UIDS), {}, "test")
    prod, test = one.look_up("alice").uid, other.look_up("alice").uid
    assert prod != test
    assert TaskUsers(UidMap(path, UIDS), {}, "prod").look_up("alice").uid == prod
    assert TaskUsers(UidMap(path, UIDS), {}, "test").look_up("alice").uid == test


def test_a_map_keyed_by_principal_alone_is_the_default_clusters(tmp_path: Path) -> None:
    path = tmp_path / "task-uids.json"
    path.write_text(json.dumps({"principals": {"alice": UIDS.start}}))
    assert TaskUsers(UidMap(path, UIDS), {}).look_up("alice").uid == UIDS.start
    assert TaskUsers(UidMap(path, UIDS), {}, "prod").look_up("alice").uid != UIDS.start
