"""Container images: a command task that names an image runs in it with podman, under its
task's cgroup, its sandbox mounted; a slave without podman refuses it.

The image is built for the tests (nothing can be pulled): harness.images.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from frameworks import Offer, build_task
from protocol.tooling.ports import free_port
from protocol.wire.discrete import Discrete, Ranges
from protocol.wire.ids import image_problem, task_problem
from protocol.wire.messages import CommandInfo, ContainerInfo, Reason, TaskInfo, TaskState
from protocol.wire.resources import PORTS, Resources
from slave.confine import Binds
from slave.images import ImageLaunch
from slave.isolator import PosixContainer, container_name
from slave.runners import CommandRunner, Run

from harness.cgroups import (
    ROOT,
    cgroup_path,
    cgroups_slave,
    destroy_cgroups,
    kill_task,
    new_slave_id,
    task_cgroup,
)
from harness.helpers import eventually
from harness.images import image  # noqa: F401  (the fixture: podman holds IMAGE)
from harness.slave import Rig
from harness.slave import rig as rig


def _podman_names() -> str:
    return subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True
    ).stdout


def _sandbox(rig: Rig, slave_id: str, framework_id: str, task_id: str) -> Path:
    return rig.tmp / slave_id / "sandboxes" / framework_id / task_id


async def test_an_image_task_runs_in_its_cgroup_with_its_sandbox_and_output(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    fw, sid, _ = await cgroups_slave(rig)
    script = "cat /proc/self/cgroup; echo made > made.txt; echo oops >&2; echo $MESOS_SANDBOX"
    await rig.launch(fw, script, "boxed", Resources(cpus=0.5, mem=64), image=image)
    await fw.update_for("boxed", TaskState.FINISHED, timeout=60)
    sandbox = _sandbox(rig, sid, fw.framework_id, "boxed")
    out = (sandbox / "stdout").read_text()
    # the container is under the task's cgroup, in every hierarchy the limits are in
    name = f"/{task_cgroup(sid, container_name(fw.framework_id, 'boxed'))}/"
    assert f"memory:{name}libpod-" in out
    assert f"cpu:{name}libpod-" in out
    assert out.rstrip().endswith("/mnt/mesos/sandbox")
    assert (sandbox / "made.txt").read_text() == "made\n"  # the sandbox, mounted
    assert "oops" in (sandbox / "stderr").read_text()
    await eventually(
        lambda: not cgroup_path(sid, container_name(fw.framework_id, "boxed")).exists()
    )
    for hierarchy in ROOT.iterdir():  # podman made the path in all of them: all are gone
        assert not (hierarchy / task_cgroup(sid, container_name(fw.framework_id, "boxed"))).exists()
    assert "boxed" not in _podman_names()


async def test_an_image_task_is_held_to_its_memory_and_fails_with_the_reason(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    fw, _, _ = await cgroups_slave(rig)
    # dd's block is one buffer of 200 MB, filled at once
    hog = "dd if=/dev/zero of=/dev/null bs=200M count=1"
    await rig.launch(fw, hog, "hog", Resources(cpus=0.5, mem=32), image=image)
    failed = await fw.update_for("hog", TaskState.FAILED, timeout=60)
    assert failed.reason == Reason.MEMORY_LIMIT
    assert "limit of 32 MB" in failed.message


async def test_an_image_task_killed_ends_killed_and_leaves_no_container(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    fw, sid, slave = await cgroups_slave(rig)
    await rig.launch(fw, "echo up; sleep 300", "long", Resources(cpus=0.5, mem=64), image=image)
    await fw.update_for("long", TaskState.RUNNING, timeout=30)
    runner = slave.tasks[(fw.framework_id, "long")].runner
    assert isinstance(runner, CommandRunner)
    assert isinstance(runner.launch, ImageLaunch)
    stdout = _sandbox(rig, sid, fw.framework_id, "long") / "stdout"
    await eventually(lambda: "up" in stdout.read_text(), timeout=30)  # the container runs
    await kill_task(fw, "long")
    await fw.update_for("long", TaskState.KILLED, timeout=30)
    assert runner.launch.name not in _podman_names()
    await eventually(lambda: not cgroup_path(sid, container_name(fw.framework_id, "long")).exists())
    destroy_cgroups(sid)


async def test_an_image_task_listening_on_a_port_it_was_not_given_is_killed(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    """Its container runs on the host's network, outside the task's process group: the
    ports isolator finds it by the pid podman wrote, and holds it to its ports."""
    base = free_port(12)
    await rig.start_slave(
        new_slave_id(), Resources(cpus=4, mem=2048),
        discrete=Discrete({PORTS: Ranges([(base, base + 9)])}), ports_isolation=True,
        ports_check_interval=0.2, pid_namespace=True, switch_user=True, isolation="cgroups",
    )  # fmt: skip
    fw = await rig.framework()
    given = Discrete({PORTS: Ranges([(base + 3, base + 3)])})
    squat = f"/bin/busybox httpd -f -p {base + 5}"  # (given base+3: another's port)
    await rig.launch(fw, squat, "squat", Resources(cpus=0.5, mem=64), image=image, discrete=given)
    failed = await fw.update_for("squat", TaskState.FAILED, timeout=60)
    assert failed.reason == Reason.CONTAINER_LIMITATION
    assert f"listened on port {base + 5}" in failed.message


async def test_an_image_the_slave_does_not_hold_fails_saying_so(
    rig: Rig,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    fw, _, _ = await cgroups_slave(rig)
    await rig.launch(fw, "true", "nope", Resources(cpus=0.5, mem=64), image="localhost/no-such:1")
    failed = await fw.update_for("nope", TaskState.FAILED, timeout=60)
    assert failed.reason == Reason.CONTAINER_LAUNCH_FAILED
    assert "podman could not run image localhost/no-such:1" in failed.message
    assert "image not known" in failed.message


# -- without podman or a real image: anywhere ---------------------------------------------


async def test_a_slave_without_podman_refuses_an_image_task_with_task_error(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    await rig.start_slave(
        "nopodman", Resources(cpus=1, mem=256), isolation="posix", podman="drfmesos-no-podman"
    )
    await rig.launch(fw, "true", "img", image="localhost/busybox:1")
    error = await fw.update_for("img", TaskState.ERROR)
    assert error.reason == Reason.TASK_INVALID
    assert "cannot run container images (podman is not installed)" in error.message


async def test_an_image_name_that_reads_as_an_option_is_refused(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=1, mem=256), isolation="posix")
    await rig.launch(fw, "true", "inject", image="--privileged")
    error = await fw.update_for("inject", TaskState.ERROR)
    assert "is not an image reference" in error.message


@pytest.mark.parametrize(
    "name",
    ["-v", "--privileged", "--volume=/:/host", "a b", "Upper", "x;rm", "../up", "a//b", "x" * 256],
)
def test_image_names_are_checked_as_untrusted_input(name: str) -> None:
    assert image_problem(name) is not None


@pytest.mark.parametrize(
    "name", ["busybox", "localhost/busybox:1.36", "registry.example:5000/team/app:v2-rc.1"]
)
def test_image_references_are_taken(name: str) -> None:
    assert image_problem(name) is None


def test_an_executors_task_cannot_name_an_image() -> None:
    from protocol.wire.messages import ExecutorInfo

    task = TaskInfo(
        task_id="t",
        slave_id="s",
        resources=Resources(cpus=1),
        executor=ExecutorInfo(executor_id="e", command=CommandInfo(value="x")),
        container=ContainerInfo(image="busybox"),
    )
    assert "custom executor" in (task_problem(task) or "")


def test_build_task_names_the_image() -> None:
    offer = Offer(offer_id="o", framework_id="f", slave_id="s", hostname="h", resources=Resources())
    task = build_task(offer, "t", Resources(cpus=1, mem=32), command="echo", image="busybox:1")
    assert task.container == ContainerInfo(image="busybox:1")


class _Peaked(PosixContainer):
    def peaked_at_limit(self) -> str | None:
        return "out of memory: at its limit of 32 MB"


@pytest.mark.parametrize(
    ("code", "reason"),
    [(137, Reason.MEMORY_LIMIT), (127, Reason.MEMORY_LIMIT), (1, None), (0, None)],
)
async def test_a_container_that_ended_at_its_memory_limit_is_told_so(
    tmp_path: Path, code: int, reason: Reason | None
) -> None:
    """SIGKILLed at its limit (137), or ended at it while podman lost its exit status
    (127, "Cannot get exit code", as under a loaded CI host): the memory limit is why."""
    task = TaskInfo(
        task_id="t",
        slave_id="s",
        resources=Resources(cpus=0.5, mem=32),
        command=CommandInfo(value="true"),
        container=ContainerInfo(image="busybox"),
    )
    run = Run(tmp_path / "sandbox", tmp_path / "run")
    launch = ImageLaunch(task, run, {}, _Peaked("t"), "true", "s", "f")  # podman: `true`
    limit = await launch.ended(code, stopped=False)
    assert (limit.reason if limit is not None else None) == reason


def test_under_posix_podman_limits_the_container_itself(tmp_path: Path) -> None:
    task = TaskInfo(
        task_id="t",
        slave_id="s",
        resources=Resources(cpus=0.5, mem=64),
        command=CommandInfo(value="true"),
        container=ContainerInfo(image="busybox"),
    )

    run = Run(tmp_path / "sandbox", tmp_path / "run")
    launch = ImageLaunch(task, run, {}, PosixContainer("t"), "podman", "s", "f")
    podman = " ".join(launch.process().args)
    assert "--cpus=0.5 --memory=64m --memory-swap=64m" in podman
    assert podman.endswith("-- busybox true")


async def test_a_volume_bound_through_a_symlink_on_its_way_stays_in_the_container(
    tmp_path: Path,
    image: str,  # noqa: F811  (the fixture)
) -> None:
    """podman binds an image task's volume at its place under the sandbox, which a task of
    the same user may have swapped for a symlink (to the host's /etc, say) after the slave
    made it: the runtime resolves the place inside the container's root, so the host's
    directory is never bound over, and the volume lands in the container's own."""
    sandbox, volume, outside = tmp_path / "sandbox", tmp_path / "volume", tmp_path / "host-etc"
    for d in (sandbox, volume, outside / "data"):
        d.mkdir(parents=True)
    (volume / "f").write_text("volume\n")
    (outside / "data" / "f").write_text("host\n")
    (sandbox / "deep").symlink_to(outside)  # the swap: deep/data now leads out of the sandbox
    task = TaskInfo(
        task_id="t",
        slave_id="s",
        resources=Resources(cpus=0.5, mem=64),
        command=CommandInfo(value="cat deep/data/f; echo more > deep/data/g"),
        container=ContainerInfo(image=image),
    )
    binds = Binds(((str(volume), str(sandbox.resolve() / "deep" / "data")),))
    run = Run(sandbox, tmp_path / "run", binds=binds)
    launch = ImageLaunch(task, run, {}, PosixContainer("t"), "podman", "s", "f")
    await launch.prepare()  # (its environment's file)
    args = launch.process().args
    podman = args[args.index("podman") :]  # (podman itself: not its exit status's wrapper)
    done = await asyncio.to_thread(
        subprocess.run, podman, capture_output=True, text=True, timeout=120
    )
    # the link, read in the container, leads where it says there: into the container's
    # own root, where the volume was bound
    assert (done.returncode, done.stdout) == (0, "volume\n"), done.stderr
    assert (volume / "g").read_text() == "more\n"
    assert (outside / "data" / "f").read_text() == "host\n"
    assert not (outside / "data" / "g").exists()  # the host's directory was never the bind
