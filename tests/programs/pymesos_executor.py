"""A custom executor written against pymesos 0.3.15's MesosExecutorDriver, unmodified,
for tests/test_pymesos.py: each task it is given runs briefly, sends its data back to the
scheduler as a framework message, and finishes. It checks the environment Mesos gives."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from pymesos import Executor, MesosExecutorDriver, decode_data, encode_data  # type: ignore[import-not-found]

for name in ("MESOS_AGENT_ENDPOINT", "MESOS_FRAMEWORK_ID", "MESOS_EXECUTOR_ID",
             "MESOS_DIRECTORY", "MESOS_SANDBOX"):  # fmt: skip
    assert os.environ.get(name), name


class Echo(Executor):  # type: ignore[misc]
    def launchTask(self, driver: Any, task: Any) -> None:
        def run() -> None:
            update = {"task_id": task["task_id"], "state": "TASK_RUNNING"}
            driver.sendStatusUpdate(update)
            data = decode_data(task["data"])
            driver.sendFrameworkMessage(encode_data(b"echo:" + data))
            time.sleep(0.1)
            driver.sendStatusUpdate({"task_id": task["task_id"], "state": "TASK_FINISHED"})

        threading.Thread(target=run, daemon=True).start()


if __name__ == "__main__":
    MesosExecutorDriver(Echo()).run()
