"""A lean install: the SDK and a slave need none of the optional libraries, and the
README's two commands still set everything up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("matplotlib", "numpy", "kazoo", "aiohttp", "amqtt", "cryptography",
            "prometheus_client")  # fmt: skip
DISTRIBUTIONS = ("matplotlib", "numpy", "kazoo", "aiohttp", "amqtt", "cryptography",
                 "prometheus-client")  # fmt: skip

# the optional libraries made impossible to import, as in an install without them
WITHOUT_THEM = f"""if True:
    import importlib.abc, sys
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {OPTIONAL!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None
    sys.meta_path.insert(0, Absent())
"""


def run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_THEM + program, *args], capture_output=True, text=True,
        timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_the_sdk_and_a_slave_import_none_of_the_optional_libraries() -> None:
    done = run(f"""
    import frameworks, frameworks.samples.command, slave.slave
    print(sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r}))
    """.replace("\n    ", "\n"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_slave_command_runs_without_them_and_a_missing_extra_is_named() -> None:
    done = run("from cluster.cli import main; main()", "slave", "--help")
    assert done.returncode == 0, done.stderr
    assert "--work-dir" in done.stdout
    done = run("from cluster.cli import main; main()", "broker", "--kind", "embedded")
    assert done.returncode != 0
    assert "pip install 'drfmesos[embedded]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_core_dependencies_leave_the_optional_libraries_to_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=!~ \[]", d)[0] for d in project["dependencies"]}
    assert not core & set(DISTRIBUTIONS)
    extras = project["optional-dependencies"]
    everything = {re.split(r"[<>=!~ \[]", d)[0] for e in extras.values() for d in e}
    assert set(DISTRIBUTIONS) - {"numpy"} <= everything  # (numpy comes with matplotlib)
    assert "drfmesos[all]" in extras["test"]


def test_the_readme_sets_everything_up_and_ci_runs_its_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands[0].startswith("pip install -e '.[all]' && drfmesos demo")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1].replace(" -q", "") == commands[1]


def test_the_demo_names_every_extra_it_lacks_in_one_message() -> None:
    done = run("from cluster.cli import main; main()", "demo", "--duration", "1")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    for extra in ("master", "embedded", "tls"):
        assert f"  {extra}: " in done.stderr
    assert "pip install 'drfmesos[master,embedded,tls]'" in done.stderr
    # what it does not start, it does not ask for
    done = run("from cluster.cli import main; main()", "demo", "--insecure", "--broker",
               "mosquitto")  # fmt: skip
    assert "pip install 'drfmesos[master]'" in done.stderr


def test_each_extras_libraries_are_the_ones_its_needs_check_imports() -> None:
    from protocol.extras import EXTRAS, MODULES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    assert set(MODULES) == set(EXTRAS) == set(extras) - {"all", "test", "docs"}
    for extra, modules in MODULES.items():
        dists = {re.split(r"[<>=!~ \[]", d)[0] for d in extras[extra]}
        assert {m.replace("_", "-") for m in modules} == dists, extra


def test_a_master_with_http_off_runs_without_aiohttp() -> None:
    """Only prometheus_client of the `master` extra: a real master process, without aiohttp,
    on a real broker, until it serves; then a SIGTERM stops it."""
    from conftest import need_mosquitto

    need_mosquitto()
    program = WITHOUT_THEM.replace(repr(OPTIONAL), repr(("aiohttp",))) + (
        "from cluster.cli import main; main()"
    )
    from protocol.tooling.ports import free_port

    port = free_port()
    broker = subprocess.Popen(["mosquitto", "-p", str(port)], stderr=subprocess.DEVNULL)
    master = subprocess.Popen(
        [sys.executable, "-c", program, "master", "--http", "off",
         "--broker", f"mqtt://127.0.0.1:{port}"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert master.stderr is not None
        for line in master.stderr:  # until it says it serves (or ends, with why)
            assert "Traceback" not in line, line
            assert "drfmesos[" not in line, line  # (an extra said to be missing)
            if '"master.started"' in line:
                break
        else:
            raise AssertionError(f"the master ended ({master.wait()}) before it served")
        master.terminate()
        assert master.wait(timeout=30) == 0
    finally:
        for proc in (master, broker):
            proc.kill()
            proc.wait()
