"""A CheckpointResources delivered again, after a newer one, deletes a volume's data.

Scenario: an operator reserves disk on a slave for team-a and makes a volume on it
(`drfmesos reserve`, then `drfmesos volumes create`: two CheckpointResources, the first
without the volume, the second with it). team-a's database task fills the volume. Then
the broker restarts from its last save (mosquitto's `autosave_interval`, 30 minutes by
default) and delivers both messages to the slave's persistent session again, in order:
the broker's second delivery that `slave.launches` already guards RunTasks against
("the broker's second delivery of a RunTasks (after it restarts from its last save) is
dropped, not run twice"). A QoS 1 message whose PUBACK was lost in a reconnect is
delivered again the same way, after newer ones.

Mesos: messages between master and agent are not delivered twice; since Mesos 1.5 an
operation carries the agent's resource version (`resource_version_uuid`) and one made on
a stale version is refused, so nothing of an earlier state is applied after a later
one. A persistent volume is removed by a DESTROY only.

drfmesos: `Slave._on_checkpoint_resources` hands every CheckpointResources to
`KeptResources.keep`, which takes it whole as the newest word: the first, delivered
again, names no volume, so the volume is taken for DESTROYed and its directory removed
(`volumes.remove`); the second, delivered again, brings the volume back, empty. Nothing
in the message (no sequence, no version) lets the slave tell an old one from a new one.

Why a user relies on it: a persistent volume's data outlives tasks, slave restarts and
broker restarts until its role destroys it; a broker restart is routine.
"""

from __future__ import annotations

from pathlib import Path

from protocol import logs
from protocol.wire.resources import Resources
from slave import volumes
from slave.kept_resources import KeptResources, Version

R = Resources.parse
RESERVED = "disk(team-a,ops):1024"
VOLUME = "disk(team-a,ops)[pg:data]"
EPOCH = 1_700_000_000  # the master's


async def test_a_checkpoint_delivered_again_keeps_the_volumes_data(tmp_path: Path) -> None:
    slave = KeptResources(tmp_path, R("cpus:2;mem:1024;disk:2048"), logs.get("test"))
    await slave.load()
    reserved = R(RESERVED)  # the master's CheckpointResources after the RESERVE
    created = R(f"{VOLUME}:1024")  # and after the CREATE
    # (numbered by the master: its epoch, then one more each; see CheckpointResources)
    await slave.keep(reserved, Version(EPOCH, 1))
    await slave.keep(created, Version(EPOCH, 2))
    data = volumes.volume_dir(tmp_path, VOLUME)
    data.mkdir(parents=True)  # (as a task's launch makes it)
    (data / "base").write_text("team-a's database")

    # the broker, restarted from its last save, delivers both again, in order
    assert not await slave.keep(reserved, Version(EPOCH, 1))
    assert not await slave.keep(created, Version(EPOCH, 2))

    assert VOLUME in slave.kept
    assert (data / "base").read_text() == "team-a's database"
