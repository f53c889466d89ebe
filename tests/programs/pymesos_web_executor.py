"""A custom executor written against pymesos 0.3.15's MesosExecutorDriver, unmodified,
for tests/test_pymesos.py: each task serves HTTP on 127.0.0.1:PORT, its data being JSON
`{"port": PORT, "healthy_for": N}`, answering 200 to its first N GETs and 500 after; a
kill stops its server and reports TASK_KILLED. Its health checks are its driver's
(drfmesos's adapter runs them), not its own, as a Mesos default executor's are."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

from pymesos import Executor, MesosExecutorDriver, decode_data  # type: ignore[import-not-found]


def server(port: int, healthy_for: int) -> http.server.HTTPServer:
    gets = 0

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            nonlocal gets
            gets += 1
            self.send_response(200 if gets <= healthy_for else 500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return http.server.HTTPServer(("127.0.0.1", port), Answer)


class Web(Executor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.servers: dict[str, http.server.HTTPServer] = {}

    def launchTask(self, driver: Any, task: Any) -> None:
        spec = json.loads(decode_data(task["data"]))
        serving = server(int(spec["port"]), int(spec["healthy_for"]))
        self.servers[task["task_id"]["value"]] = serving
        threading.Thread(target=serving.serve_forever, daemon=True).start()
        driver.sendStatusUpdate({"task_id": task["task_id"], "state": "TASK_RUNNING"})

    def killTask(self, driver: Any, task_id: Any) -> None:
        serving = self.servers.pop(task_id["value"], None)
        if serving is not None:
            serving.shutdown()
            serving.server_close()
        driver.sendStatusUpdate({"task_id": task_id, "state": "TASK_KILLED"})


if __name__ == "__main__":
    MesosExecutorDriver(Web()).run()
