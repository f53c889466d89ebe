"""A task is told who it is: its user, which no account has, is named in the /etc/passwd
and /etc/group its mount namespace sees (slave.task_accounts), so `id -un`, `whoami`
and getpwuid(3) (Java's `user.name`, Hadoop's login, ssh) answer, and $USER and
$LOGNAME say the same; no task sees another principal's line, nor reaches its copy."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

import pytest

from slave.task_accounts import login_name, with_accounts
from slave.task_users import TaskUser

from harness.shared_slave import ALICE, MALLORY, shared_slave


def _free_uid() -> int:
    for uid in range(1_500_000_000, 1_500_001_000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no free uid")


def _host_files(tmp_path: Path) -> tuple[Path, Path]:
    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\nbob:x:1000:1000::/home/bob:/bin/sh")
    group.write_text("root:x:0:\nbob:x:1000:\n")
    return passwd, group


def test_a_user_no_account_has_gets_its_line_in_copies_of_the_hosts_files(
    tmp_path: Path,
) -> None:
    passwd, group = _host_files(tmp_path)
    uid = _free_uid()
    named = with_accounts(tmp_path / "accounts", "alice", TaskUser(uid, uid), passwd, group)
    assert named.name == "alice"
    assert named.accounts is not None
    copy_passwd, copy_group = (Path(p) for p in named.accounts)
    assert copy_passwd.read_text().splitlines() == [
        "root:x:0:0:root:/root:/bin/sh",
        "bob:x:1000:1000::/home/bob:/bin/sh",  # (the host's last line had no newline)
        f"alice:x:{uid}:{uid}:drfmesos principal alice:/nonexistent:/bin/sh",
    ]
    assert copy_group.read_text().splitlines()[-1] == f"alice:x:{uid}:"
    assert stat.S_IMODE((tmp_path / "accounts").stat().st_mode) == 0o700  # nobody else's
    assert stat.S_IMODE(copy_passwd.stat().st_mode) == 0o644  # its task reads it
    assert passwd.read_text().count("\n") == 1  # the host's files untouched


def test_a_group_the_host_has_is_not_named_twice(tmp_path: Path) -> None:
    passwd, group = _host_files(tmp_path)
    uid = _free_uid()
    named = with_accounts(tmp_path / "accounts", "etl", TaskUser(uid, 1000), passwd, group)
    assert named.accounts is not None
    assert Path(named.accounts[1]).read_text() == group.read_text()


def test_a_principal_named_as_an_account_or_oddly_is_told_its_uid() -> None:
    """A second `root` or `sudo` would be read as the host's by whoever looks the name up; a name
    with a colon or a space would break the file."""
    uid = _free_uid()
    assert login_name("root", uid) == f"task-{uid}"
    assert login_name(grp.getgrgid(0).gr_name, uid) == f"task-{uid}"  # (a group's name)
    assert login_name("team:ops", uid) == f"task-{uid}"
    assert login_name("a b", uid) == f"task-{uid}"
    assert login_name("x" * 33, uid) == f"task-{uid}"
    assert login_name("etl-nightly.2", uid) == "etl-nightly.2"


def test_a_user_an_account_has_is_left_as_it_is(tmp_path: Path) -> None:
    account = pwd.getpwuid(os.getuid())
    user = TaskUser(account.pw_uid, account.pw_gid)
    assert with_accounts(tmp_path / "accounts", "alice", user) is user
    assert not (tmp_path / "accounts").exists()


async def test_a_task_is_told_its_principals_name_and_sees_no_other_tenants() -> None:
    async with shared_slave() as s:
        await s.master.run("mallory", MALLORY, "m1", "id -un")
        await s.master.ends(MALLORY, "m1")
        accounts = s.work / "accounts"
        script = f"""
            id -un; whoami; id -gn; echo "$USER $LOGNAME"
            grep -c '^mallory:' /etc/passwd
            ( : >> /etc/passwd ) 2>/dev/null && echo wrote-passwd
            ls {accounts} 2>/dev/null || echo no-listing
            cat {accounts}/*.passwd 2>/dev/null || echo no-copies
        """
        await s.master.run("alice", ALICE, "a1", script)
        await s.master.ends(ALICE, "a1")
        lines = s.output(ALICE, "a1").split("\n")
        assert lines[:5] == ["alice", "alice", "alice", "alice alice", "0"]
        assert lines[5:7] == ["no-listing", "no-copies"]
        assert s.output(MALLORY, "m1").strip() == "mallory"
        for name in ("alice", "mallory"):  # the host's own files are untouched
            with pytest.raises(KeyError):
                pwd.getpwnam(name)


def test_the_copies_are_named_by_absolute_paths_whatever_the_work_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave started with a relative --work-dir (the tutorial's `run/slave-1`): its
    tasks' first shell binds the copies from their sandbox, not from the slave's cwd."""
    passwd, group = _host_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    uid = _free_uid()
    named = with_accounts(Path("run/slave-1/accounts"), "alice", TaskUser(uid, uid), passwd, group)
    assert named.accounts is not None
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in named.accounts)
