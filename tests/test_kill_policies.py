"""Kill policies on a real broker, master and slave, with real task processes: a task that
traps SIGTERM gets its grace (the task's kill policy, the kill's, the slave's default) and
no more, with and without a PID namespace; TASK_KILLING for the frameworks that ask; a
kill's grace holds up nothing else the slave does; a tenant's grace is held to the
slave's --max-kill-grace."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from protocol import mesos_json as mj
from protocol.wire.messages import (
    FrameworkCapability,
    Kill,
    KillPolicy,
    Reason,
    TaskState,
    TaskStatus,
    Update,
)
from protocol.wire.resources import Resources

from harness.fakes import FakeFramework
from harness.helpers import eventually
from harness.slave import Rig, T, group_members
from harness.slave import rig as rig

# a task that finishes its work on SIGTERM: 1.5 s of it (over the rig slave's default
# grace of 1 s), then a mark in its sandbox; `ready` once its trap is set
GRACEFUL = (
    "trap 'sleep 1.5; echo graceful > done; exit 0' TERM; echo up > ready; "
    "while :; do sleep 0.05; done"
)
# a task that takes SIGTERM and carries on: only SIGKILL ends it
STUBBORN = "trap 'echo ignored' TERM; echo up > ready; while :; do sleep 0.05; done"


# SIGTERM trapped below the task's command: by a nested shell's trap, and by a python
# child's handler (the task's own shell, which dash does not replace by its one command,
# stays between: it dies of the SIGTERM, the trap's work goes on); 1 s of work, then a mark
NESTED_TRAP = (
    'sh -c \'trap "sleep 1; echo bye > done; exit 0" TERM; echo up > ready; '
    "while :; do sleep 0.05; done'"
)
PYTHON_HANDLER = (
    "python3 -c 'import pathlib, signal, sys, time\n"
    "def bye(*_):\n"
    '    time.sleep(1); pathlib.Path("done").write_text("bye\\n"); sys.exit(0)\n'
    'signal.signal(signal.SIGTERM, bye); pathlib.Path("ready").write_text("up")\n'
    "while True: time.sleep(0.05)'"
)


async def launch(
    rig: Rig, fw: FakeFramework, task_id: str, command: str, grace: float | None = None
) -> Path:
    """Launch a command task with a kill policy of `grace` (None: none); its sandbox once
    the task is up, its trap set."""
    policy = KillPolicy(grace_period=grace) if grace is not None else None
    sandbox = await rig.launch(fw, command, task_id, kill_policy=policy)
    await fw.update_for(task_id, TaskState.RUNNING)
    await eventually(lambda: (sandbox / "ready").exists())
    return sandbox


async def kill(fw: FakeFramework, task_id: str, grace: float | None = None) -> float:
    """Kill a task (with this kill's own grace, if given); when it was sent."""
    policy = KillPolicy(grace_period=grace) if grace is not None else None
    sent = time.time()
    await fw.bus.publish(
        T.inbound("framework", "framework"),
        Kill(framework_id=fw.framework_id, task_id=task_id, kill_policy=policy),
    )
    return sent


def statuses(fw: FakeFramework) -> list[TaskStatus]:
    return [u.status for u in fw.inbox.of(Update)]


async def killed_after(fw: FakeFramework, task_id: str, sent: float) -> tuple[TaskStatus, float]:
    """Its TASK_KILLED, and how long after `sent` the slave said so (its own clock)."""
    status = await fw.update_for(task_id, TaskState.KILLED, timeout=15)
    return status, status.timestamp - sent


@pytest.mark.timing  # a grace measured on the wall clock
@pytest.mark.parametrize("pid_namespace", [False, True], ids=["shared-pids", "pid-namespace"])
async def test_a_task_that_traps_sigterm_gets_its_grace_and_no_more(
    rig: Rig, pid_namespace: bool
) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024), pid_namespace=pid_namespace)
    # its kill policy (4 s) over the slave's 1 s: it finishes its 1.5 s of work, and ends
    graceful = await launch(rig, fw, "graceful", GRACEFUL, grace=4)
    status, took = await killed_after(fw, "graceful", await kill(fw, "graceful"))
    assert (graceful / "done").read_text() == "graceful\n"
    assert 1.5 <= took < 3.0, took
    assert status.reason == Reason.KILLED_BY_FRAMEWORK

    # one that ignores SIGTERM is SIGKILLed at the end of its grace, its group with it
    await launch(rig, fw, "stubborn", STUBBORN, grace=2)
    pgid = slave.tasks[(fw.framework_id, "stubborn")].runner.pid  # type: ignore[union-attr]
    _, took = await killed_after(fw, "stubborn", await kill(fw, "stubborn"))
    assert 2.0 <= took < 3.0, took
    await eventually(lambda: group_members(pgid) == [])

    # the kill's own grace over the task's: cut short, its work undone
    short = await launch(rig, fw, "short", GRACEFUL, grace=4)
    _, took = await killed_after(fw, "short", await kill(fw, "short", grace=0.5))
    assert 0.5 <= took < 1.4, took
    assert not (short / "done").exists()

    # no policy at all: the slave's --kill-grace (1 s here)
    default = await launch(rig, fw, "default", GRACEFUL)
    _, took = await killed_after(fw, "default", await kill(fw, "default"))
    assert 1.0 <= took < 1.4, took
    assert not (default / "done").exists()


MODES = {  # the slave's isolation: none; a PID namespace; a user, namespace and cgroups
    "shared-pids": {},
    "pid-namespace": {"pid_namespace": True},
    "confined": {"pid_namespace": True, "switch_user": True, "isolation": "cgroups"},
}


@pytest.mark.timing  # a grace measured on the wall clock
@pytest.mark.parametrize("mode", MODES)
async def test_a_sigterm_trapped_below_the_tasks_command_gets_its_grace(
    rig: Rig, mode: str
) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024), **MODES[mode])
    for task_id, command in (("nested", NESTED_TRAP), ("python", PYTHON_HANDLER)):
        sandbox = await launch(rig, fw, task_id, command, grace=4)
        status, took = await killed_after(fw, task_id, await kill(fw, task_id))
        assert (sandbox / "done").read_text() == "bye\n", task_id
        assert 1.0 <= took < 3.0, (task_id, took)
        assert status.reason == Reason.KILLED_BY_FRAMEWORK
        # the slave's wrapper says nothing of its own in the task's stderr (the nested
        # shell may say "Terminated" of its `sleep` itself, as it would anywhere)
        said = (sandbox / "stderr").read_text().count("Terminated")
        assert said <= (task_id == "nested"), (task_id, said)


# a task that counts the SIGTERMs it takes: each one's trap writes "term" (then 1.5 s of
# work, a sleep a second SIGTERM would cut short, and "bye")
TERM_COUNTER = (
    "trap 'echo term >> terms; sleep 1.5; echo bye >> terms; exit 0' TERM; echo up > ready; "
    "while :; do sleep 0.05; done"
)


@pytest.mark.timing
async def test_a_kill_again_in_the_grace_sends_no_sigterm_and_never_lengthens_it(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    # killed twice (a framework that asks again, a master that failed over mid-drain):
    # one SIGTERM, its trap's work whole
    sandbox = await launch(rig, fw, "twice", TERM_COUNTER, grace=5)
    sent = await kill(fw, "twice")
    await eventually(lambda: (sandbox / "terms").exists())
    await kill(fw, "twice")
    _, took = await killed_after(fw, "twice", sent)
    assert (sandbox / "terms").read_text() == "term\nbye\n"
    assert 1.5 <= took < 3.0, took
    # a second kill's longer grace does not put the first's SIGKILL off
    await launch(rig, fw, "longer", STUBBORN, grace=1)
    sent = await kill(fw, "longer")
    await kill(fw, "longer", grace=30)
    _, took = await killed_after(fw, "longer", sent)
    assert 1.0 <= took < 1.6, took


@pytest.mark.timing
async def test_a_tenants_grace_is_held_to_the_slaves_most(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024), max_kill_grace=0.5)
    await launch(rig, fw, "greedy", STUBBORN, grace=3600)
    _, took = await killed_after(fw, "greedy", await kill(fw, "greedy"))
    assert 0.5 <= took < 1.4, took


async def test_a_kill_in_its_grace_holds_up_nothing_else_on_the_slave(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await launch(rig, fw, "slow", STUBBORN, grace=20)
    await kill(fw, "slow")
    await launch(rig, fw, "quick", STUBBORN, grace=0)  # launched while slow is in its grace
    await kill(fw, "quick")
    await fw.update_for("quick", TaskState.KILLED, timeout=5)
    assert not [u for u in statuses(fw) if u.task_id == "slow" and u.state.terminal]
    await kill(fw, "slow", grace=0)  # a second kill with a shorter grace cuts it short
    await fw.update_for("slow", TaskState.KILLED, timeout=5)


@pytest.mark.timing
async def test_task_killing_goes_to_the_frameworks_that_ask_for_it(rig: Rig) -> None:
    fw = await rig.framework(capabilities=[FrameworkCapability.TASK_KILLING_STATE])
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await launch(rig, fw, "t", GRACEFUL, grace=4)
    await kill(fw, "t")
    killing = await fw.update_for("t", TaskState.KILLING)
    killed = await fw.update_for("t", TaskState.KILLED, timeout=15)
    assert killing.message == "killing: SIGTERM, then SIGKILL after 4 s"
    assert 1.5 <= killed.timestamp - killing.timestamp < 3.0
    states = [u.state for u in statuses(fw) if u.task_id == "t"]
    assert states[-2:] == [TaskState.KILLING, TaskState.KILLED]


async def test_no_task_killing_for_a_framework_that_did_not_ask(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await launch(rig, fw, "t", STUBBORN, grace=0.2)
    await kill(fw, "t")
    await fw.update_for("t", TaskState.KILLED)
    assert TaskState.KILLING not in [u.state for u in statuses(fw)]


def test_a_kill_policy_is_bounded_on_the_wire_and_in_mesos_json() -> None:
    for bad in (-1, 3601, float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            KillPolicy(grace_period=bad)
    policy = mj.kill_policy_from_mesos({"grace_period": {"nanoseconds": "2500000000"}})
    assert policy == KillPolicy(grace_period=2.5)
    assert mj.kill_policy_to_mesos(KillPolicy(grace_period=2.5)) == {
        "grace_period": {"nanoseconds": 2_500_000_000}
    }
    assert mj.kill_policy_from_mesos({}) is None
    for bad_json in ({"grace_period": {"nanoseconds": -1}}, {"grace_period": 5}, [1]):
        with pytest.raises(mj.MesosJSONError):
            mj.kill_policy_from_mesos(bad_json)
