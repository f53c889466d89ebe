"""A task's sandbox file read for the UI is the task's own output, never a hard link to a
file of another's (attack91).

The slave reads sandbox files as root, and took a file as the task's if it belonged to
the sandbox's owner. A launch whose sandbox failed its checks (a task id used again,
whose earlier task had left a file where its private `var-tmp` goes) left the sandbox
root's: then a root's file hard-linked there by the earlier task (where the kernel lets
a user link another's file: fs.protected_hardlinks=0), the slave's executor key say,
read as that task's stdout. Now such a sandbox goes back to its user, and a file with a
second name is read by nobody.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.wire.messages import ReadFile
from slave.files import read_sandbox_file
from slave.paths import task_sandbox_name
from slave.sandbox import hold_for_private_tmp
from slave.task_users import TaskUser

TENANT = TaskUser(uid=43_210, gid=43_210)


def ask(name: str) -> ReadFile:
    return ReadFile(
        request_id="r1", framework_id="fw", task_id="t1", name=name, offset=0, length=4096
    )


async def test_a_file_with_a_second_name_is_not_read_as_the_tasks(tmp_path: Path) -> None:
    """The task's own stdout reads; a hard link in its sandbox to a file outside it (a
    secret of whoever owns both) reads nothing."""
    sandbox = tmp_path / "fw" / task_sandbox_name("t1")
    sandbox.mkdir(parents=True)
    (sandbox / "stdout").write_bytes(b"the task's own\n")
    secret = tmp_path / "executor_secret_key"
    secret.write_bytes(b"the slave's key")
    os.link(secret, sandbox / "stderr")

    own = await read_sandbox_file(tmp_path, "s1", ask("stdout"))
    assert (own.error, own.data) == ("", b"the task's own\n")
    linked = await read_sandbox_file(tmp_path, "s1", ask("stderr"))
    assert not linked.data, linked
    assert "not a file of the task's" in linked.error


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a sandbox to another user takes root")
def test_a_sandbox_that_fails_its_checks_goes_back_to_its_user(tmp_path: Path) -> None:
    """The slave holds a sandbox as root's while it checks it for a private /tmp; one
    whose var-tmp the task's user made a file is refused, and is the user's again."""
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    os.chown(sandbox, TENANT.uid, TENANT.gid)
    (sandbox / "var-tmp").write_bytes(b"not a directory")
    os.chown(sandbox / "var-tmp", TENANT.uid, TENANT.gid)

    with pytest.raises(OSError, match="not a directory of the task's user"):
        hold_for_private_tmp(sandbox, TENANT)
    assert sandbox.lstat().st_uid == TENANT.uid
