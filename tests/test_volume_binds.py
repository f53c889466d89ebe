"""A task's volumes are bound by root in the task's mount namespace (slave.confine): never
where a symlink on the way would send the bind out of the sandbox (over /etc, say, in a
namespace where the task's user then runs a setuid program)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from slave.confine import mounts_script

from harness.helpers import need_root


def _bind(source: Path, target: Path, sandbox: Path) -> subprocess.CompletedProcess[str]:
    """The task's first shell's mounts, in a mount namespace of its own, then `cat f`."""
    unshare = shutil.which("unshare")
    assert unshare is not None
    script = mounts_script(private_tmp=False, volumes=True)
    return subprocess.run(
        [unshare, "-m", "--propagation", "private", "/bin/sh", "-c", script, "drfmesos-mounts",
         str(source), str(target), "--", "--", "cat", str(target / "f")],
        cwd=sandbox, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_a_volume_is_bound_at_its_place_and_never_through_a_symlink(tmp_path: Path) -> None:
    need_root()
    source, sandbox, outside = tmp_path / "volume", tmp_path / "sandbox", tmp_path / "etc"
    for d in (source, sandbox / "data", outside / "data"):
        d.mkdir(parents=True)
    (source / "f").write_text("kept\n")
    (sandbox / "up").symlink_to(outside)  # what a task of the same user could swap in

    bound = _bind(source, sandbox / "data", sandbox)
    assert (bound.returncode, bound.stdout) == (0, "kept\n"), bound.stderr

    refused = _bind(source, sandbox / "up" / "data", sandbox)
    assert refused.returncode == 125  # the real path is not the place: nothing bound
    assert refused.stdout == ""
    assert not (sandbox / "data" / "f").exists()  # (and the host's namespace saw nothing)
