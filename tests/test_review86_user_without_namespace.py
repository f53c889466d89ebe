"""review86: docs/how-to/isolation.md says a task whose slave runs it as its principal's user
without a PID namespace (so with no mount namespace to bind account files in) is still
told its name in $USER and $LOGNAME. It was told nothing: the user was named only where
its copies of /etc/passwd and /etc/group were written, which needs the namespace."""

from __future__ import annotations

from harness.shared_slave import ALICE, shared_slave


async def test_a_task_without_a_pid_namespace_is_told_its_name_in_user_and_logname() -> None:
    async with shared_slave(pid_namespace=False) as s:
        await s.master.run("alice", ALICE, "a1", 'echo "[$USER] [$LOGNAME]"')
        await s.master.ends(ALICE, "a1")
        assert s.output(ALICE, "a1").strip() == "[alice] [alice]"
        assert not (s.work / "accounts").exists()  # (no copies: nothing would bind them)
