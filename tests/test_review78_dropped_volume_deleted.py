"""A volume a slave's smaller --resources no longer fit keeps its data for one restart
only: the next checkpoint forgets it, and the restart after deletes it.

Scenario: team-a keeps its database on a persistent volume `disk(team-a,ops)[pg:data]`
of 1 GB on a slave. The operator restarts the slave with `--resources` that give it less
reserved disk (a typo, or a new disk layout: `disk(team-a):512`). The slave drops the
volume from its total and logs `resources.dropped`; its data stays, as
`slave.kept_resources` says ("named by the file, even those the --resources no longer
fit: their data stays") and tests/test_volume_attacks.py checks for that one restart.
Then anything on that slave changes whose resources are (another team's RESERVE, here):
the master's CheckpointResources names what the master holds, which is no longer the
volume (`SlaveCalls._total_from` dropped it too). The operator sees the log, puts the
--resources back and restarts the slave once more.

Mesos: an agent whose checkpointed resources do not fit its new `--resources` refuses to
start ("Checkpointed resources ... are incompatible with agent resources"); a persistent
volume's directory is removed by a DESTROY alone, never by a restart.

drfmesos: `KeptResources.keep` writes the master's word whole, without the dropped
volume, and removes nothing (the volume is no longer in `self.kept`); at the next start
`KeptResources._take` finds the volume's directory named by nothing and returns it as a
DESTROY cut short, and `load_all` deletes it (`volumes.orphans_removed`). The team's
database is gone, with no DESTROY from anyone, after the operator fixed the mistake.

Why a user relies on it: the point of a persistent volume is that its data outlives
tasks and slave restarts until its role destroys it; an operator's mistake in
--resources must be recoverable, as the docs say (what no longer fits is "dropped and
logged", which reads as: put the resources back and it returns).
"""

from __future__ import annotations

from pathlib import Path

from protocol import logs
from protocol.wire.resources import Resources
from slave import volumes
from slave.kept_resources import KeptResources, Version

R = Resources.parse
VOLUME = "disk(team-a,ops)[pg:data]"


async def test_a_dropped_volume_keeps_its_data_until_the_resources_are_put_back(
    tmp_path: Path,
) -> None:
    configured = R("cpus:2;mem:1024;disk(team-a):1024;cpus(team-b):1")
    slave = KeptResources(tmp_path, configured, logs.get("test"))
    await slave.load()
    await slave.keep(R(f"{VOLUME}:1024"), Version(1, 1))  # CREATE_VOLUMES, by an operator
    data = volumes.volume_dir(tmp_path, VOLUME)
    data.mkdir(parents=True)  # (as a task's launch makes it)
    (data / "base").write_text("team-a's database")

    # restarted with less reserved disk: the volume is dropped, its data kept
    smaller = R("cpus:2;mem:1024;disk(team-a):512;cpus(team-b):1")
    restarted = KeptResources(tmp_path, smaller, logs.get("test"))
    await restarted.load()
    assert VOLUME not in restarted.kept
    assert (data / "base").exists()

    # another team's RESERVE on the slave: the master's CheckpointResources names what it
    # holds of the slave (its total as registered, which no longer has the volume)
    await restarted.keep(R("cpus(team-b,ops):1"), Version(1, 2))

    # the operator puts the --resources back and restarts the slave
    fixed = KeptResources(tmp_path, configured, logs.get("test"))
    await fixed.load()
    assert (data / "base").read_text() == "team-a's database"
