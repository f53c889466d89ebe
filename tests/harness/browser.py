"""A browser for the web UI tests: Debian's Chromium driven over WebDriver, and screenshots
of it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


ARTIFACTS = Path(
    os.environ.get("DRFMESOS_ARTIFACTS", Path(__file__).parent.parent.parent / "artifacts")
)


def need_chromium() -> None:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are not installed; .ci/run installs them")
        pytest.skip("chromium and chromium-driver are not installed (apt-get install ...)")
