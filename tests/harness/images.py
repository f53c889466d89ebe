"""A container image for the tests that run tasks in one (nothing can be pulled here):
Debian's busybox-static imported as `localhost/drfmesos-busybox:test` into a podman store
of the tests' own (a temp dir), by the `image` fixture."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cgroups import need_cgroups

IMAGE = "localhost/drfmesos-busybox:test"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static


def need_podman() -> None:
    """Outside CI a host without root, podman or busybox-static skips; in CI it fails."""
    why = None
    if os.geteuid() != 0:
        why = "not root (podman runs rootful here)"
    elif shutil.which("podman") is None:
        why = "podman is not installed (apt-get install podman runc)"
    elif not BUSYBOX.exists():
        why = "busybox-static is not installed (apt-get install busybox-static)"
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{why}; .ci/run installs it")
        pytest.skip(why)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A podman store of our own (configured through the environment every podman the
    slave starts inherits) holding a busybox image."""
    need_podman()
    need_cgroups()
    t = tmp_path_factory.mktemp("podman")
    for d in ("storage", "run", "tmp", "networks", "rootfs/bin"):
        (t / d).mkdir(parents=True)
    # as docker/test-compose.sh: runc (crun refuses this host's hybrid cgroups), ulimits
    # the sandbox allows, a store of our own; vfs, so that nothing is mounted to undo
    (t / "containers.conf").write_text(
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n'
        f'[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\ntmp_dir = "{t}/tmp"\n'
        f'[network]\nnetwork_config_dir = "{t}/networks"\n'
    )
    (t / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{t}/storage"\nrunroot = "{t}/run"\n'
    )
    shutil.copy(BUSYBOX, t / "rootfs/bin/busybox")
    for tool in ("sh", "cat", "echo", "sleep", "dd", "true"):
        (t / "rootfs/bin" / tool).symlink_to("busybox")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONTAINERS_CONF", str(t / "containers.conf"))
        mp.setenv("CONTAINERS_STORAGE_CONF", str(t / "storage.conf"))
        tar = subprocess.run(
            ["tar", "-C", t / "rootfs", "-c", "."], capture_output=True, check=True
        )
        subprocess.run(
            ["podman", "import", "-q", "-", IMAGE],
            input=tar.stdout,
            capture_output=True,
            check=True,
        )
        try:
            yield IMAGE
        finally:
            subprocess.run(["podman", "rm", "-af", "-t", "0"], capture_output=True)
            subprocess.run(["podman", "system", "reset", "-f"], capture_output=True)
