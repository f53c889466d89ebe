"""The web UI in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium) against a live `drfmesos demo` cluster: signing in (and a wrong secret's 401),
A, B and C with their shares, C's arrival changing them without a reload, the share
chart, a task's stdout read from its slave in a dialog (tail, follow, download), the
offers' count, events by name, one colour per framework, a framework's, a slave's (with
its attributes) and a task's page, a reload keeping the chart and the events, the role
tree drawn as a tree, a framework that stops listed as completed, and the master stopping.
Screenshots of each step go to artifacts/webui/ (or $DRFMESOS_ARTIFACTS)."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.local.demo import SLAVES, demo_ports
from protocol.wire.why_codes import WhyCode

from harness.browser import ARTIFACTS, shot
from harness.browser import browser as browser


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """`drfmesos demo` at ten times speed: B comes 10 s after A, C 10 s after B."""
    yield from run_demo(tmp_path)


@pytest.fixture
def command_demo(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """The demo with command tasks (`sleep N`), whose usage their slaves report."""
    yield from run_demo(tmp_path, "--executor", "command")


def run_demo(tmp_path: Path, *extra: str) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster", "demo", "--time-scale", "0.1", "--arrival", "100",
         "--duration", "300", "--http", "127.0.0.1:0", "--run-dir", str(tmp_path / "demo"),
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        url = secret = ""
        assert proc.stdout is not None
        for line in proc.stdout:  # the demo says where the UI is before anything else
            if m := re.match(r"web UI: (\S+)", line):
                url = m.group(1)
            elif m := re.match(r"\s*sign in as operator, secret (\S+)", line):
                secret = m.group(1)
                break
        assert url, "the demo did not say where its web UI is"
        assert secret
        yield url, secret, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _child_running(root: int, args: list[str]) -> int:
    """The pid of a process under `root` (only our own demo's, never another run's) whose
    command line holds `args` in order."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().decode().split("\0")
            pid = int(entry.name)
            ancestor = pid
            while ancestor > 1 and ancestor != root:
                stat = Path(f"/proc/{ancestor}/stat").read_text()
                ancestor = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        joined = "\0".join(argv)
        if ancestor == root and pid != root and "\0".join(args) in joined:
            return pid
    raise AssertionError(f"no {args} under {root}")


def sign_in(driver: object, user: str, secret: str) -> None:
    """Type a principal and its secret into the sign-in form, and send it."""
    from selenium.webdriver.common.by import By

    for field, value in (("user", user), ("password", secret)):
        box = driver.find_element(By.ID, field)  # type: ignore[attr-defined]
        box.clear()
        box.send_keys(value)
    driver.find_element(By.ID, "sign-in").click()  # type: ignore[attr-defined]


def status_of(url: str, user: str, secret: str) -> int:
    return answer(url, user, secret)[0]


def answer(
    url: str, user: str = "", secret: str = "", method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    """An HTTP answer's status, headers and body."""
    token = base64.b64encode(f"{user}:{secret}".encode()).decode()
    headers = {"Authorization": f"Basic {token}"} if user else {}
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status), dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return int(e.code), dict(e.headers), e.read()


def test_every_answer_is_hardened_and_every_error_json(demo: tuple[str, str, object]) -> None:
    url, secret, _ = demo
    for path, user in (("", ""), ("api/v1/state", "operator"), ("nope", "operator")):
        _, headers, _ = answer(url + path, user, secret)
        assert "default-src 'self'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Server"] == "drfmesos"  # no versions
    status, headers, body = answer(url + "favicon.ico")  # no credentials needed
    assert (status, headers["Content-Type"]) == (200, "image/svg+xml")
    status, headers, body = answer(url + "api/v1/nope", "operator", secret)
    assert (status, headers["Content-Type"]) == (404, "application/json; charset=utf-8")
    assert json.loads(body) == {"error": "no such path"}
    status, headers, body = answer(url + "api/v1/state", "operator", secret, method="POST")
    assert (status, json.loads(body)) == (405, {"error": "POST not allowed"})
    assert headers["Allow"] == "GET,HEAD"

    def events(query: str = "") -> list[object]:
        return list(
            json.loads(answer(url + "api/v1/events" + query, "operator", secret)[2])["events"]
        )

    deadline = time.monotonic() + 60
    while len(events()) < 5 and time.monotonic() < deadline:  # the demo's first launches
        time.sleep(0.2)
    assert len(events("?limit=3")) == 3
    doc = json.loads(answer(url + "api/v1/openapi.json", "operator", secret)[2])
    assert {"/api/v1/stream", "/metrics"} <= set(doc["paths"])


def test_slaves_and_tasks_show_what_they_use_beside_their_allocation(
    command_demo: tuple[str, str, subprocess.Popen[str]], browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, secret, _ = command_demo
    d = browser
    wait = WebDriverWait(d, 60, poll_frequency=0.2)  # type: ignore[arg-type]
    d.get(url)  # type: ignore[attr-defined]
    wait.until(lambda _: d.find_element(By.ID, "login").is_displayed())  # type: ignore[attr-defined]
    d.find_element(By.ID, "user").send_keys("operator")  # type: ignore[attr-defined]
    d.find_element(By.ID, "password").send_keys(secret)  # type: ignore[attr-defined]
    d.find_element(By.ID, "sign-in").click()  # type: ignore[attr-defined]

    def read(css: str) -> list[dict[str, object]]:
        """Each used/allocated bar under `css`: its two parts' widths and its figures."""
        return list(
            d.execute_script(  # type: ignore[attr-defined]
                f"return [...document.querySelectorAll('{css} .used-bar')].map(b => ({{"
                "  allocated: parseFloat(b.querySelector('.fill').style.width),"
                "  used: b.querySelector('.fill.used')"
                "    ? parseFloat(b.querySelector('.fill.used').style.width) : null,"
                "  figures: b.nextElementSibling.textContent}))"
            )
        )

    # a task's slave reports what it uses (every 5 s): then its row has the dark part,
    # and its slave's bar too, beside the allocation
    wait.until(lambda _: any(b["used"] is not None for b in read("#tasks tbody")))
    task_bars = [b for b in read("#tasks tbody") if b["used"] is not None]
    assert all(b["allocated"] == 100 for b in task_bars)  # a task has all it was allocated
    unit = r"[\d.]+ (cpus|MB|GB)"  # every figure with its unit
    assert all(re.fullmatch(rf"{unit} / {unit}", str(b["figures"])) for b in task_bars), task_bars
    wait.until(lambda _: any(b["used"] is not None for b in read("#slaves tbody")))
    slave_bars = [b for b in read("#slaves tbody") if b["used"] is not None]
    assert all(str(b["figures"]).startswith("used ") for b in slave_bars)
    assert all(
        re.fullmatch(rf"used {unit} · {unit} / {unit}", str(b["figures"])) for b in slave_bars
    )
    assert all(float(str(b["allocated"])) > 0 for b in slave_bars)  # (tasks run there)
    # `sleep` uses next to nothing of the 0.5 cpus and 512 MB it holds
    assert all(float(str(b["used"])) < float(str(b["allocated"])) for b in slave_bars)
    assert "used / allocated" in d.find_element(By.CSS_SELECTOR, "#tasks thead").text  # type: ignore[attr-defined]
    # a slave's ports (the demo's slaves each offer a range of their own): which are free
    ports = d.find_element(By.CSS_SELECTOR, "#slaves tbody .values").text  # type: ignore[attr-defined]
    ranges = [f" free of [{demo_ports(i)}]" for i in range(SLAVES)]
    assert any(ports.endswith(r) for r in ranges), ports
    shot(d, "20-used-beside-allocated")


@pytest.mark.slow(35)
def test_the_web_ui_shows_the_demo_live(
    demo: tuple[str, str, subprocess.Popen[str]], browser: object, tmp_path: Path
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, secret, proc = demo
    d = browser
    wait = WebDriverWait(
        d,
        60,
        poll_frequency=0.2,  # type: ignore[arg-type]
        ignored_exceptions=(StaleElementReferenceException,),
    )

    def text(css: str) -> str:
        # the live tables are redrawn as the books change: an element found may be gone
        # by the time it is read, and is found again in the redrawn table
        for _ in range(100):
            try:
                return str(d.find_element(By.CSS_SELECTOR, css).text)  # type: ignore[attr-defined]
            except StaleElementReferenceException:
                continue
        raise AssertionError(f"{css} was redrawn under every read")

    def shares() -> dict[str, str]:  # read in one go: the table is redrawn as shares change
        return dict(
            d.execute_script(  # type: ignore[attr-defined]
                "return Object.fromEntries([...document.querySelectorAll('#frameworks tbody tr')]"
                ".map(r => [r.dataset.framework, r.querySelector('.share-value').textContent]))"
            )
        )

    # the API refuses a wrong secret, and so does the page
    assert status_of(url + "api/v1/state", "operator", "wrong") == 401
    assert status_of(url + "api/v1/state", "operator", secret) == 200
    d.get(url)  # type: ignore[attr-defined]
    wait.until(lambda _: d.find_element(By.ID, "login").is_displayed())  # type: ignore[attr-defined]
    assert text("#login-error") == ""  # nothing typed yet: nothing refused
    shot(d, "00-sign-in")
    d.find_element(By.ID, "user").send_keys("operator")  # type: ignore[attr-defined]
    d.find_element(By.ID, "password").send_keys("not-the-secret")  # type: ignore[attr-defined]
    d.find_element(By.ID, "sign-in").click()  # type: ignore[attr-defined]
    wait.until(lambda _: "401" in text("#login-error"))
    shot(d, "01-wrong-secret-401")
    assert "operator" in text("#login p")  # the sign-in says which principal kind may look

    # a framework principal, with its right secret, is told why it may not look
    a_secret = (tmp_path / "demo" / "auth" / "secrets" / "A").read_text().strip()
    sign_in(d, "A", a_secret)
    wait.until(lambda _: "operator credentials needed" in text("#login-error"))
    shot(d, "01b-framework-principal-refused")

    sign_in(d, "operator", secret)
    wait.until(lambda _: "A" in shares() and "B" in shares())
    d.execute_script("window.__sameDocument = true")  # type: ignore[attr-defined]
    wait.until(lambda _: text("#live") == "live")
    shot(d, "02-a-and-b")

    # C arrives: the shares change on the page, in the same document (no reload)
    wait.until(lambda _: "C" in shares() and not shares()["C"].startswith("0.0%"))
    wait.until(lambda _: all(s.startswith("33.3%") for s in shares().values()))
    assert d.execute_script("return window.__sameDocument === true")  # type: ignore[attr-defined]
    shot(d, "03-c-arrived")

    # the rate limits: a row for each principal that made calls, under the master's default
    wait.until(
        lambda _: (
            d.execute_script(  # type: ignore[attr-defined]
                "return document.querySelectorAll('#limits tbody tr').length"
            )
            >= 3
        )
    )
    assert "calls/s" in text("#limits-default")

    # beside the chart: how far behind the master is, and the slaves' comings and goings
    wait.until(lambda _: "registrations" in text("#slave-churn"))
    assert text("#master-health").startswith("master ")  # ok, or behind on a slow machine
    assert "waiting to be handled" in text("#master-health")
    assert text("#slaves tbody tr td.heard").endswith(" s ago")  # each slave's last heartbeat
    assert "connected" in text("#slave-churn")

    # the chart has drawn each framework's share over time (and the fair share, dashed)
    wait.until(lambda _: int(d.find_element(By.ID, "chart").get_attribute("data-points") or 0) > 20)  # type: ignore[attr-defined]
    drawn = d.execute_script(  # type: ignore[attr-defined]
        "const c = document.getElementById('chart');"
        "const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let coloured = 0; for (let i = 0; i < px.length; i += 4) {"
        "  const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];"
        "  if (a && Math.abs(r - g) + Math.abs(g - b) > 60) coloured++; }"
        "return coloured;"
    )
    assert drawn > 500
    legend = d.execute_script(  # type: ignore[attr-defined]
        "return [...document.querySelectorAll('#legend span')].map(s => s.textContent)"
    )
    assert {"A", "B", "C"} <= set(legend)
    a_id = str(
        d.execute_script(  # type: ignore[attr-defined]
            "return Object.values(view.frameworks).find(f => f.name === 'A').framework_id"
        )
    )
    d.find_element(By.ID, "chart").screenshot(str(ARTIFACTS / "webui" / "04-chart.png"))  # type: ignore[attr-defined]
    # the time axis is labelled: several ticks back from now, and its title
    ticks = str(d.find_element(By.ID, "chart").get_attribute("data-ticks")).split("|")  # type: ignore[attr-defined]
    assert ticks[0] == "now", ticks
    assert len(ticks) >= 3, ticks
    assert all(re.fullmatch(r"-\d+ (s|min)", t) for t in ticks[1:]), ticks
    # every figure has its unit: the cluster's totals
    totals = text("#totals")
    assert re.search(r"[\d.]+ cpus / 6 cpus", totals), totals
    assert re.search(r"[\d.]+ (MB|GB) / 6\.4 GB", totals), totals

    # two frameworks of one name are told apart by a short id (a second "A" put in the
    # page's view for one render, then taken out)
    labels = d.execute_script(  # type: ignore[attr-defined]
        "const a = Object.values(view.frameworks).find(f => f.name === 'A');"
        "view.frameworks['fw-0badc0ffee00'] = {...a, framework_id: 'fw-0badc0ffee00'};"
        "render();"
        "const shown = [...document.querySelectorAll('#frameworks tbody tr td:first-child a')]"
        "  .map(x => x.textContent);"
        "delete view.frameworks['fw-0badc0ffee00']; render(); return shown;"
    )
    assert "A (0badc0)" in labels, labels
    assert f"A ({a_id[3:9]})" in labels, labels

    # a finished task is drawn as ended, holding nothing: no allocation bar
    d.execute_script("document.getElementById('task-state').value = 'TASK_FINISHED'")  # type: ignore[attr-defined]
    d.execute_script("document.getElementById('task-state').onchange()")  # type: ignore[attr-defined]
    wait.until(  # (the page shows the filtered tasks once their answer is back)
        lambda _: d.execute_script(  # type: ignore[attr-defined]
            "const rows = [...document.querySelectorAll('#tasks tbody tr')];"
            "return rows.length > 0 && rows.every(r => r.querySelector('.ended')"
            "  && r.textContent.includes('TASK_FINISHED'));"
        )
    )
    assert not d.find_elements(By.CSS_SELECTOR, "#tasks tbody tr .used-bar")  # type: ignore[attr-defined]
    assert text("#tasks tbody tr .ended").startswith("ended ")
    shot(d, "04b-finished-tasks")
    d.execute_script("document.getElementById('task-state').value = ''")  # type: ignore[attr-defined]
    d.execute_script("document.getElementById('task-state').onchange()")  # type: ignore[attr-defined]

    # a task's stdout, read from its slave through the master
    task_id = wait.until(
        lambda _: d.execute_script(  # type: ignore[attr-defined]
            "const row = document.querySelector('#tasks tbody tr');"
            "if (!row) return null; row.querySelector('button.stdout').click();"
            "return row.dataset.task;"
        )
    )
    wait.until(lambda _: f"task {task_id}: sleeping" in text("#sandbox-text"))
    # it opens where the click was: a dialog over the page, inside the window
    assert d.execute_script(  # type: ignore[attr-defined]
        "const s = document.getElementById('sandbox'), r = s.getBoundingClientRect();"
        "return s.open && r.top >= 0 && r.bottom <= window.innerHeight && r.height > 50;"
    )
    assert re.fullmatch(r"\d+ bytes", text("#sandbox-size"))
    shot(d, "05-task-stdout")
    # follow it, and download it whole (the page's blob, caught as it is made)
    d.find_element(By.ID, "sandbox-follow").click()  # type: ignore[attr-defined]
    d.execute_script(  # type: ignore[attr-defined]
        "window.__downloads = []; const made = URL.createObjectURL;"
        "URL.createObjectURL = (b) => { window.__downloads.push(b.size); return made(b); };"
    )
    d.find_element(By.ID, "sandbox-download").click()  # type: ignore[attr-defined]
    size = wait.until(lambda _: d.execute_script("return window.__downloads[0]"))  # type: ignore[attr-defined]
    assert size >= len(text("#sandbox-text").split("...")[-1].strip())
    d.find_element(By.ID, "sandbox-close").click()  # type: ignore[attr-defined]
    assert not d.execute_script("return document.getElementById('sandbox').open")  # type: ignore[attr-defined]

    # outstanding offers: the count is the table's; events name their frameworks
    wait.until(lambda _: d.execute_script(  # type: ignore[attr-defined]
        "return document.getElementById('offers').textContent === "
        "`(${document.querySelectorAll('#offer-list tbody tr').length})`"))  # fmt: skip
    wait.until(lambda _: re.search(r"framework [ABC]\b", text("#events")))
    # a framework has one colour: its bar in the table is its line in the legend
    same = d.execute_script(  # type: ignore[attr-defined]
        "const bar = document.querySelector('#frameworks tr[data-framework=\"A\"] .fill');"
        "const key = [...document.querySelectorAll('#legend span')]"
        "  .find(s => s.textContent === 'A');"
        "return [bar.style.background, key.querySelector('i').style.background];"
    )
    assert same[0] == same[1], same
    bars = d.execute_script(  # type: ignore[attr-defined]
        "return [...document.querySelectorAll('#frameworks .fill')].map(b => b.style.background)"
    )
    assert len(set(bars)) == len(bars) == 3, bars  # and no two frameworks share one

    # links: a framework's page (principal, role, its tasks by state), a slave's, a task's
    def details() -> dict[str, str]:
        return dict(
            d.execute_script(  # type: ignore[attr-defined]
                "const s = document.getElementById('details'); if (!s.open) return [];"
                "return [['title', document.getElementById('details-title').textContent],"
                "  ...[...s.querySelectorAll('dt')].map(t => [t.textContent,"
                "                                            t.nextElementSibling.textContent])];"
            )
        )

    d.execute_script(  # type: ignore[attr-defined]
        "document.querySelector('#frameworks tr[data-framework=\"A\"] a').click()"
    )
    wait.until(lambda _: details().get("title") == "framework A")
    a = details()
    assert (a["principal"], a["role"]) == ("A", "A")
    assert "TASK_RUNNING" in a["tasks"]
    # why it gets no (more) offers, the master's first reason first, or that nothing keeps
    # them from it; and what it was offered lately
    codes = {c.value for c in WhyCode}
    assert a["why no offers"].split(" ")[0] in codes or a["why no offers"].startswith("nothing")
    assert a["offered lately"]
    shot(d, "06-framework-a")
    d.find_element(By.ID, "details-close").click()  # type: ignore[attr-defined]
    d.execute_script("document.querySelector('#tasks tbody a[href^=\"#slave/\"]').click()")  # type: ignore[attr-defined]
    wait.until(lambda _: details().get("title", "").startswith("slave "))
    slave = details()
    assert slave["hostname"].startswith("demo-slave-")
    assert slave["attributes"] == f"rack:r{slave['hostname'].removeprefix('demo-slave-')}"
    d.find_element(By.ID, "details-close").click()  # type: ignore[attr-defined]
    d.execute_script("document.querySelector('#tasks tbody a[href^=\"#task/\"]').click()")  # type: ignore[attr-defined]
    wait.until(lambda _: details().get("title", "").startswith("task "))
    assert details()["state"].startswith("TASK_")
    assert details()["launched"] != "-"
    d.find_element(By.ID, "details-close").click()  # type: ignore[attr-defined]

    # tasks searched by id (and sorted, newest first)
    wanted = d.execute_script("return document.querySelector('#tasks tbody tr').dataset.task")  # type: ignore[attr-defined]
    d.execute_script("document.getElementById('task-sort').value = '-launched'")  # type: ignore[attr-defined]
    d.find_element(By.ID, "task-search").send_keys(wanted)  # type: ignore[attr-defined]
    wait.until(
        lambda _: (
            d.execute_script(  # type: ignore[attr-defined]
                "return [...document.querySelectorAll('#tasks tbody tr')].map(r => r.dataset.task)"
            )
            == [wanted]
        )
    )
    shot(d, "07-task-search")
    d.find_element(By.ID, "task-search").clear()  # type: ignore[attr-defined]

    # a reload draws the chart from the master's own history at once
    d.refresh()  # type: ignore[attr-defined]
    wait.until(lambda _: float(d.find_element(By.ID, "chart").get_attribute("data-span") or 0) > 20)  # type: ignore[attr-defined]
    assert wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#events li")) > 5)  # type: ignore[attr-defined]
    shot(d, "08-reloaded")

    # the role tree is drawn as a tree (the demo's roles are flat: a nested tree is put in
    # the page's view for one render, then taken out)
    nested = ["eng", "eng/web", "eng/web/api", "eng/batch", "eng/batch/nightly", "ops"]
    drawn_tree = d.execute_script(  # type: ignore[attr-defined]
        "document.getElementById('details').close();"  # (the reload reopened the task's)
        "const nested = arguments[0];"
        "for (const role of nested) view.roles[role] = {role, weight: 1};"
        "render();"
        "return [...document.querySelectorAll('#roles tbody tr')]"
        "  .filter(r => nested.includes(r.dataset.role))"
        "  .map(r => r.querySelector('td.role').textContent);",
        nested,
    )
    assert drawn_tree == ["eng", "├─ batch", "│  └─ nightly", "└─ web", "   └─ api", "ops"]
    d.find_element(By.ID, "roles").screenshot(str(ARTIFACTS / "webui" / "08b-role-tree.png"))  # type: ignore[attr-defined]
    d.execute_script(  # type: ignore[attr-defined]
        "for (const role of arguments[0]) delete view.roles[role]; render();", nested
    )

    # C stops (SIGTERM: its driver tears it down): it stays listed, marked completed
    os.kill(_child_running(proc.pid, ["--name", "C"]), signal.SIGTERM)
    wait.until(lambda _: text("#completed-count") == "(1)")
    # active frameworks by default: C has left the table and the chart's legend
    assert not d.find_elements(By.CSS_SELECTOR, '#frameworks tr[data-framework="C"]')  # type: ignore[attr-defined]
    assert "C" not in d.execute_script(  # type: ignore[attr-defined]
        "return [...document.querySelectorAll('#legend span')].map(s => s.textContent)"
    )
    d.find_element(By.ID, "show-completed").click()  # type: ignore[attr-defined]
    wait.until(lambda _: "completed" in text('#frameworks tr.completed[data-framework="C"]'))
    assert (
        d.execute_script(  # type: ignore[attr-defined]
            "return [...document.querySelectorAll('#frameworks tbody tr')]"
            ".map(r => r.dataset.framework).pop()"
        )
        == "C"
    )  # below the live ones
    d.execute_script(  # type: ignore[attr-defined]
        "document.querySelector('#frameworks tr[data-framework=\"C\"] a').click()"
    )
    wait.until(lambda _: details().get("title") == "framework C")
    assert details()["status"].startswith("completed: removed ")
    shot(d, "09-completed-framework")
    d.find_element(By.ID, "details-close").click()  # type: ignore[attr-defined]

    # the master stops: the page says so plainly, at its top, and waits longer each time
    proc.send_signal(signal.SIGINT)
    wait.until(lambda _: d.find_element(By.ID, "outage").is_displayed())  # type: ignore[attr-defined]
    assert "The master is not answering" in text("#outage")
    assert text("#live") == "master down"
    wait.until(lambda _: "Trying again in 4 s" in text("#outage"))
    shot(d, "10-master-down")
