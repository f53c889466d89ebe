"""A newcomer following the Mesos how-to ("A pymesos scheduler needs no change") ran
pymesos 0.3.15's MesosSchedulerDriver as principal `myfw`, with a `framework_info` of
`user`, `name` and `principal`, as a Mesos framework is written that takes Mesos's
default role. The master answered 403, and pymesos raised:

    RuntimeError: Failed with HTTP 403: b'{"error": "principal myfw may not register in
    role \\'*\\' (allowed: myfw)"}'

On Mesos such a framework registers in `*`. Here a principal's frameworks default to its
name (the SDK's and `drfmesos run`'s do), and so does one over the Mesos API that names no
role: the README's "Existing Mesos frameworks run on it unchanged" holds for one that
never set a role."""

from __future__ import annotations

from pathlib import Path

from harness.mesos import live_cluster


async def test_a_mesos_framework_that_names_no_role_registers_in_its_principals(
    tmp_path: Path,
) -> None:
    async with live_cluster(tmp_path, simulated=True) as live:
        s = live.scheduler("team-a")
        try:
            status = await s.subscribe({"user": "", "name": "team-a", "principal": "team-a"})
            assert status == 200
            assert live.master is not None
            [fw] = live.master.books.frameworks.values()
            assert fw.role == "team-a"
        finally:
            await s.close()
