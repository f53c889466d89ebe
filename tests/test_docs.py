"""The docs cannot rot: the site builds strictly (every page in the nav, every link and
anchor found, every included file there), the README stays short, and every shell and
Python block of the tutorials runs against a real cluster, as a reader runs it.

How a tutorial's blocks are run (docs/index.md says the same to writers):

- a ```sh block runs as written, in page order, all of a page's in one bash script
  (`set -eo pipefail`), from a fresh directory that holds the checkout's files, as a
  reader runs them in the clone;
- a block with `title="FILE"` (```python title="my_framework.py"```, ```yaml title=...```)
  is written to FILE first, for the commands to use;
- a block titled "Not run by the tests: WHY" is not run; the title shows the reader why;
- other blocks (`text`, untitled `yaml`) are shown only.

The tutorials name the ports a reader would use (1883 and 8883 for brokers, 5050 for the
web UI); here they become free ports, so that tests side by side do not collide.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from protocol.tooling.brokers import MosquittoBroker
from protocol.tooling.ports import free_port
from protocol.transport.aio import within

from harness.helpers import live_cluster

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))
EXAMPLES_CACHE = ROOT / ".mypy_cache" / "docs-examples"  # (apart from the packages' run)
NOT_RUN = "Not run by the tests"  # ... then a colon and why
PORTS = re.compile(r"\b(1883|8883|5050)\b")
# what each tutorial says its reader will see, checked in what its blocks printed
EXPECTED = {
    "demo.md": ["web UI: http://127.0.0.1:"],
    "first-framework.md": ["printed: hello from task", "all 20 tasks finished"],
    "sharing.md": ["may not register in role 'eng/web'", "refused, as it should be"],
    "experiments.md": [
        "written to out/paper-7.1",
        "66.7% (2/3)",
        "written to out/blog-same-demands",
        "drawn into out/paper-7.1-again: running_tasks.png",
    ],
}


def blocks(page: Path) -> list[tuple[str, str | None, str]]:
    """A page's fenced blocks: (language, title, text)."""
    found = []
    for token in MarkdownIt().parse(page.read_text()):
        if token.type != "fence":
            continue
        language = (token.info.split() or [""])[0]
        title = re.search(r'title="([^"]*)"', token.info)
        found.append((language, title.group(1) if title else None, token.content))
    return found


def sdk_examples() -> list[tuple[str, str]]:
    """Every Python block of the docs that is a whole program of the SDK (it imports from
    `frameworks`; a fragment shown is titled as not run): (where, text)."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for n, (language, title, text) in enumerate(blocks(page)):
            if language != "python" or (title and title.startswith(NOT_RUN)):
                continue
            if re.search(r"^from frameworks import", text, re.M):
                found.append((f"{page.relative_to(DOCS)}#{n}", text))
    return found


@pytest.mark.slow(60)
@pytest.mark.timeout(400)  # (a first run checks the SDK and pydantic's plugin too)
def test_the_docs_sdk_examples_type_check(tmp_path: Path) -> None:
    """What a reader copies from a how-to runs against the SDK as it is: `mypy --strict`
    on each example (one once declined with a list where the SDK takes an offer id, and
    one wrote its callback without `async`, which the driver awaits)."""
    examples = sdk_examples()
    assert len(examples) >= 3, examples
    files = []
    for n, (_, text) in enumerate(examples):
        files.append(tmp_path / f"example_{n}.py")
        files[-1].write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(EXAMPLES_CACHE),
         *map(str, files)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    where = {f"example_{n}.py": w for n, (w, _) in enumerate(examples)}
    said = re.sub(r"\S*(example_\d+\.py)", lambda m: where[m.group(1)], done.stdout)
    assert done.returncode == 0, said


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a missing page, link, anchor or included file fails it."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
         "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    assert (site / "reference" / "cli" / "index.html").exists()
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "--custom-resources" in cli  # generated from the click definitions
    assert "Sentinel.UNSET" not in cli  # (click's "no default", once shown as the default)
    sdk = (site / "reference" / "sdk" / "index.html").read_text()
    assert "BrokerRefused" in sdk
    words = html.unescape(re.sub(r"<[^>]+>", "", sdk))  # every callback with its signature
    assert "error(driver: Driver, message: str) -> None" in words
    assert "resource_offers(\n    driver: Driver, offers: list[Offer]\n) -> None" in words
    api = (site / "reference" / "http-api" / "index.html").read_text()
    assert "/api/v1/tasks" in api  # from the OpenAPI document
    # how far each published simulated run strays from its ideal: from its summary.json
    experiments = (site / "explanation" / "experiments" / "index.html").read_text()
    assert "ideal-distance" not in experiments
    assert "<code>lecture-morning-off-sim</code>" in experiments


def test_the_readme_is_short_and_points_into_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert len(linked) > 20
    assert all((ROOT / path).exists() for path in linked), linked
    assert (ROOT / "docs" / "images" / "webui.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow(15)
async def test_the_readmes_framework_runs_on_a_real_cluster(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    [(_, _, program)] = [b for b in blocks(ROOT / "README.md") if b[0] == "python"]
    program = program.replace("mqtt://127.0.0.1:1883", str(mosquitto.url))
    assert str(mosquitto.url) in program
    async with live_cluster(mosquitto.url, "default", tmp_path, slaves=1):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", program, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await within(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode()
    assert re.search(r"hello-\w+ FINISHED", out.decode()), out.decode()


def shown_commands(text: str) -> list[str]:
    """What follows `drfmesos` in a page's blocks and inline code, a command a line (lines
    joined where they end in a backslash; a line the command printed, `drfmesos run: ...`,
    is not one)."""
    found = re.findall(r"`drfmesos ([^`]*)`", text)
    for token in MarkdownIt().parse(text):
        if token.type == "fence":
            joined = token.content.replace("\\\n", " ")
            found += re.findall(r"(?:^|[;&|(]\s*|\$ )drfmesos\s+([^#;&|)\n]*)", joined, re.M)
    return [c for c in found if not re.match(r"[\w-]+:", c)]


def test_the_commands_the_docs_show_exist_with_their_options() -> None:
    """Each `drfmesos` command a page shows names a command and options that exist (the
    reservations how-to once started a slave with `--slave-id`, which none has)."""
    import click

    from cluster.cli import main

    wrong: list[str] = []
    for page in [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]:
        for shown in shown_commands(page.read_text()):
            command: click.Command = main
            words, path = shown.split(), ["drfmesos"]
            while isinstance(command, click.Group) and words:
                found = command.get_command(click.Context(command), words[0])
                if found is None:
                    break
                command = found
                words.pop(0)
                path.append(command.name or "")
            if isinstance(command, click.Group):
                continue  # (a group shown by name, or `auth grant|revoke`)
            options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            for word in words[: words.index("--")] if "--" in words else words:
                if word.startswith("--") and word.split("=")[0] not in options:
                    wrong.append(f"{page.relative_to(ROOT)}: {' '.join(path)} has no {word}")
    assert not wrong, "\n".join(wrong)


def test_every_tutorial_block_is_run_or_says_why_not() -> None:
    for page in TUTORIALS:
        for language, title, _ in blocks(page):
            if title and title.startswith(NOT_RUN):
                why = title.partition(":")[2].strip()
                assert len(why) > 10, f"{page.name}: say why it is not run: {title!r}"
            elif language in ("python", "py") and not title:
                raise AssertionError(f"{page.name}: a Python block needs title=FILE")
    assert set(EXPECTED) == {p.name for p in TUTORIALS}


def script_of(page: Path, workdir: Path, ports: dict[str, str]) -> str:
    """The page's files written into `workdir`, and its shell blocks as one script."""
    swap = lambda text: PORTS.sub(lambda m: ports[m.group(1)], text)  # noqa: E731
    lines = ["set -eo pipefail"]
    for language, title, text in blocks(page):
        if title and title.startswith(NOT_RUN):
            continue
        if title:
            (workdir / title).write_text(swap(text))
        elif language in ("sh", "bash"):
            # (the closing `kill $(jobs -p)` may find a job already ended)
            lines += [f"{line} || true" if line.startswith("kill ") else line
                      for line in swap(text).splitlines()]  # fmt: skip
    return "\n".join(lines) + "\n"


def checkout_in(workdir: Path) -> None:
    """The clone as a reader has it: its files, linked (what the tutorials make is new)."""
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in ("out", "run", "auth", "site"):
            continue
        (workdir / entry.name).symlink_to(entry)


@pytest.mark.slow(60)
@pytest.mark.timeout(400)  # (the experiments' page runs a live experiment and simulations)
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_a_tutorial_runs_as_written(page: Path, tmp_path: Path) -> None:
    checkout_in(tmp_path)
    ports = {port: str(free_port()) for port in ("1883", "8883", "5050")}
    script = script_of(page, tmp_path, ports)
    bin_dir = str(Path(sys.executable).parent)  # this install's drfmesos and python
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "MPLBACKEND": "Agg", "COLUMNS": "120", "NO_MKDOCS_2_WARNING": "1"}  # fmt: skip
    # Into a file, not a pipe: the script's exit ends the wait, even when a background
    # process it started (and failed before killing) still holds its output open.
    log = tmp_path / "tutorial.out"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=tmp_path, env=env, start_new_session=True,
            stdout=sink, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            proc.wait(timeout=360)
        except subprocess.TimeoutExpired:
            pass  # (ended below; the assertion shows what it printed)
        finally:
            end_group(proc)
    out = log.read_text()
    assert proc.returncode == 0, f"{page.name} failed:\n{out[-6000:]}"
    for phrase in EXPECTED[page.name]:
        assert phrase in out, f"{page.name}: {phrase!r} not in:\n{out[-6000:]}"


def end_group(proc: subprocess.Popen[str]) -> None:
    """Whatever the script left running (it failed before its own `kill`), ended."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()


def test_what_the_tutorials_make_in_the_checkout_is_git_ignored() -> None:
    """`drfmesos auth init auth` in the checkout, as the docs show, once left auth/ (a CA's
    private key and every secret) untracked and not ignored, one `git add .` from a
    commit; so did the run dirs and outputs the tutorials make."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    made: set[str] = set()  # files, and a file in each folder made
    for page in TUTORIALS:
        for language, title, text in blocks(page):
            if language == "sh" and not (title or "").startswith(NOT_RUN):
                folders = re.findall(r"auth init (\S+)", text)
                folders += re.findall(r"--(?:work-dir|out) (\S+)", text)
                folders += re.findall(r"> (\S+)/", text)
                made |= {f"{folder}/a-file" for folder in folders}
            elif title and not title.startswith(NOT_RUN):
                made.add(title)
    made |= {"auth/ca.key", "auth/secrets/ops", "site/index.html", "out/compare/compare.md"}
    assert {"auth/a-file", "run/node1/a-file", "my_framework.py"} <= made
    for path in sorted(made):
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False
        )
        assert ignored.returncode == 0, f"{path} (which the docs make) is not git-ignored"
