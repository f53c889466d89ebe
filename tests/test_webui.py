"""The web UI in a real headless Chromium (Debian's chromium and chromedriver, driven by
Selenium) against a live `drfmesos demo` cluster: signing in (and a wrong secret's 401),
A, B and C with their shares, C's arrival changing them without a reload, the share
chart, and a task's stdout read from its slave. Screenshots of each step go to
artifacts/webui/ (or $DRFMESOS_ARTIFACTS)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(os.environ.get("DRFMESOS_ARTIFACTS", Path(__file__).parent.parent / "artifacts"))


def need_chromium() -> None:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are not installed; .ci/run installs them")
        pytest.skip("chromium and chromium-driver are not installed (apt-get install ...)")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`drfmesos demo` at ten times speed: B comes 10 s after A, C 10 s after B."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "cluster", "demo", "--time-scale", "0.1", "--arrival", "100",
         "--duration", "300", "--http", "127.0.0.1:0", "--run-dir", str(tmp_path / "demo")],
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
        yield url, secret
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser() -> Iterator[object]:
    need_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="drfmesos-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1280,1800",
                 f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver: object, name: str) -> None:
    folder = ARTIFACTS / "webui"
    folder.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(folder / f"{name}.png"))  # type: ignore[attr-defined]


def status_of(url: str, user: str, secret: str) -> int:
    token = base64.b64encode(f"{user}:{secret}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_web_ui_shows_the_demo_live(demo: tuple[str, str], browser: object) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, secret = demo
    d = browser
    wait = WebDriverWait(
        d,
        60,
        poll_frequency=0.2,  # type: ignore[arg-type]
        ignored_exceptions=(StaleElementReferenceException,),
    )

    def text(css: str) -> str:
        return str(d.find_element(By.CSS_SELECTOR, css).text)  # type: ignore[attr-defined]

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
    d.find_element(By.ID, "user").send_keys("operator")  # type: ignore[attr-defined]
    d.find_element(By.ID, "password").send_keys("not-the-secret")  # type: ignore[attr-defined]
    d.find_element(By.ID, "sign-in").click()  # type: ignore[attr-defined]
    wait.until(lambda _: "401" in text("#login-error"))
    shot(d, "01-wrong-secret-401")

    password = d.find_element(By.ID, "password")  # type: ignore[attr-defined]
    password.clear()
    password.send_keys(secret)
    d.find_element(By.ID, "sign-in").click()  # type: ignore[attr-defined]
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
    d.find_element(By.ID, "chart").screenshot(str(ARTIFACTS / "webui" / "04-chart.png"))  # type: ignore[attr-defined]

    # a task's stdout, read from its slave through the master
    task_id = wait.until(
        lambda _: d.execute_script(  # type: ignore[attr-defined]
            "const row = document.querySelector('#tasks tbody tr');"
            "if (!row) return null; row.querySelector('button.stdout').click();"
            "return row.dataset.task;"
        )
    )
    wait.until(lambda _: f"task {task_id}: sleeping" in text("#sandbox-text"))
    d.execute_script("document.getElementById('sandbox').scrollIntoView()")  # type: ignore[attr-defined]
    shot(d, "05-task-stdout")
