"""A 401 from the master's HTTP API says whether credentials were missing or refused: a
newcomer who ran `curl -u ops:WRONG .../master/state` (a typo in the secret) read
`operator credentials needed`, as if none had been sent. Refused credentials are one
answer for a wrong secret and an unknown principal (which principals exist is no one's to
learn from it)."""

from __future__ import annotations

import base64
from pathlib import Path

import aiohttp

from master.http.api import HttpApi
from master.http.config import HttpConfig

from harness.trust import secure_cluster


def basic(user: str, secret: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


async def test_a_wrong_secret_is_told_apart_from_no_credentials(tmp_path: Path) -> None:
    async with secure_cluster("memory", tmp_path) as sec:
        api = HttpApi(sec.master.views, HttpConfig(port=0, credentials=sec.store.path))
        url = await api.start()
        ops = sec.store.secret_file("ops").read_text().strip()
        try:
            async with aiohttp.ClientSession() as http:
                said: dict[str, tuple[int, str]] = {}
                for case, headers in (
                    ("none", {}),
                    ("wrong secret", basic("ops", ops + "x")),
                    ("unknown principal", basic("nobody", ops)),
                    ("right", basic("ops", ops)),
                ):
                    async with http.get(url.rstrip("/") + "/api/v1/whoami", headers=headers) as r:
                        body = await r.json()
                        said[case] = (r.status, body.get("error", ""))
        finally:
            await api.stop()
    assert said["none"] == (401, "operator credentials needed (HTTP Basic)")
    assert said["wrong secret"][0] == 401
    assert said["wrong secret"][1].startswith("the credentials given were refused: a wrong secret")
    assert said["unknown principal"] == said["wrong secret"]  # (no oracle of principals)
    assert said["right"] == (200, "")
