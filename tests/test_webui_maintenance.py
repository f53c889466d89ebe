"""The web UI, in a real headless Chromium, shows what an operator and a health check say
of a live cluster (mosquitto, a master and two slaves as processes, a framework through
the SDK): each task's health beside its state (healthy, unhealthy), and a slave an
operator took out of the offers (drained, deactivated) in the slaves' table and its page.
Screenshots go to artifacts/webui/."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from cluster.local.view import wait_state
from frameworks import SchedulerDriver, build_task
from protocol.tooling.brokers import MosquittoBroker
from protocol.wire.messages import CommandCheck, HealthCheck, HealthCheckType, State
from protocol.wire.resources import Resources

from harness.browser import browser as browser
from harness.browser import shot
from harness.helpers import Recorder, live_cluster

CLUSTER = "webui-maintenance"


def check(command: str) -> HealthCheck:
    """A COMMAND check every second from the start, that never kills its task."""
    return HealthCheck(
        type=HealthCheckType.COMMAND,
        command=CommandCheck(value=command),
        delay_seconds=0,
        interval_seconds=1,
        grace_period_seconds=0,
        consecutive_failures=1000,
    )


def said(rec: Recorder, task_id: str, healthy: bool) -> Any:
    """Whether the task's health check has said `healthy` yet."""
    return lambda: any(s.healthy is healthy for s in rec.of(task_id))


async def operator_call(web: str, body: dict[str, Any]) -> None:
    async with aiohttp.ClientSession() as session, session.post(web + "api/v1", json=body) as r:
        assert r.status == 200, await r.text()


def cells(d: Any, css: str) -> list[str]:
    script = f"return [...document.querySelectorAll('{css}')].map(c => c.textContent)"
    return list(d.execute_script(script))


def looks(d: Any, url: str) -> None:
    """What the page shows (selenium blocks: run in a thread)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        d, 60, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    )
    d.get(url)
    wait.until(lambda _: {"healthy", "unhealthy"} <= set(cells(d, "#tasks tbody td.health")))
    assert "health" in d.find_element(By.CSS_SELECTOR, "#tasks thead").text
    wait.until(lambda _: sorted(cells(d, "#slaves tbody td.maintenance")) == ["", "drained"])
    assert "maintenance" in d.find_element(By.CSS_SELECTOR, "#slaves thead").text
    shot(d, "40-health-and-a-drained-slave")
    # the drained slave's page says so beside its connection
    d.execute_script(
        "[...document.querySelectorAll('#slaves tbody tr')]"
        ".find(r => r.querySelector('td.maintenance').textContent === 'drained')"
        ".querySelector('a').click()"
    )
    wait.until(lambda _: "connected, drained" in d.find_element(By.ID, "details").text)
    shot(d, "41-a-drained-slaves-page")


async def test_the_web_ui_shows_health_and_a_drained_slave(
    mosquitto: MosquittoBroker, tmp_path: Path, browser: object
) -> None:
    async with live_cluster(mosquitto.url, CLUSTER, tmp_path, slaves=2):
        state: State = await wait_state(mosquitto.url, CLUSTER, lambda s: bool(s.web_ui))
        web = state.web_ui
        rec = Recorder()
        driver = SchedulerDriver(rec, name="web", broker=mosquitto.url, cluster=CLUSTER)
        await driver.start()
        try:
            await rec.wait(lambda: bool(rec.offers))
            offer = rec.offers[0]
            small = Resources(cpus=0.5, mem=64)
            tasks = [
                build_task(offer, "well", small, command="sleep 300", health_check=check("true")),
                build_task(offer, "ill", small, command="sleep 300", health_check=check("false")),
            ]
            await driver.launch_tasks([offer.offer_id], tasks)
            for task, healthy in zip(tasks, (True, False), strict=True):
                await rec.wait(said(rec, task.task_id, healthy))
            [other] = [s.slave_id for s in state.slaves if s.slave_id != offer.slave_id]
            drain = {"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": other}}}
            await operator_call(web, drain)
            await asyncio.to_thread(looks, browser, web)
        finally:
            await driver.stop()
