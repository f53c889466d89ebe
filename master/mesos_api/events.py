"""The Mesos operator event stream: `POST /api/v1 {"type": "SUBSCRIBE"}`.

A subscriber gets `SUBSCRIBED` with the whole state (as `GET_STATE` gives it), then one
RecordIO record per change: `TASK_ADDED`, `TASK_UPDATED`, `AGENT_ADDED`, `AGENT_REMOVED`,
`FRAMEWORK_ADDED`, `FRAMEWORK_UPDATED`, `FRAMEWORK_REMOVED`, and a `HEARTBEAT` whenever
nothing was sent for the interval `SUBSCRIBED` announces.

The records are made in the master's own change listeners (master.changes), in the
handler that made the change, so they leave within a loop turn of the books; each is
encoded once, whoever reads it. Each subscriber has a bounded queue: one that falls
QUEUE records behind is closed (it subscribes again and starts from a new snapshot), so
a slow reader never grows the master's memory.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

from master.changes import TASK_ADDED, TASK_UPDATED
from master.mesos_api.json_stream import eager
from master.mesos_api.operator_state import (
    agent_json,
    framework_info,
    framework_json,
    get_state,
    task_json,
)
from protocol import logs
from protocol.mesos_json import JSON, mesos_id, status_to_mesos
from protocol.recordio import json_record as record
from protocol.transport.aio import within
from protocol.wire.messages import ClusterEvent, Reason

if TYPE_CHECKING:
    from master.books import Task
    from master.mesos_api.master_side import MasterSide

QUEUE = 1024  # records a subscriber may fall behind before it is closed
MAX_SUBSCRIBERS = 64  # operator streams open at once (each holds a connection and a queue)


@dataclass(eq=False)
class Subscriber:
    principal: str
    queue: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(QUEUE))
    why: str = ""  # why it was closed, once it is

    def close(self, why: str) -> None:
        """What it did not read goes now, not at its pace; an empty record ends it."""
        self.why = why
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(b"")


class OperatorEvents:
    def __init__(self, master: MasterSide) -> None:
        self.master = master
        self.subscribers: set[Subscriber] = set()
        # what the stream has announced, so that an update is told once as added, once
        # as removed (a slave marked gone is removed, then said gone)
        self._frameworks: set[str] = set()
        self._agents: set[str] = set()
        self.log = logs.get("master.operator_events", master_id=master.info.master_id)

    @property
    def heartbeat_interval(self) -> float:
        return self.master.info.heartbeat_interval

    def open(self, principal: str) -> Subscriber:
        """A new subscriber, its SUBSCRIBED record already queued. Nothing awaits between
        the snapshot and the listener, so no change falls between the two."""
        m = self.master
        if not self.subscribers:
            m.changes.listen(self._changed, tasks=True)
            self._frameworks = set(m.books.frameworks)
            self._agents = set(m.books.slaves)
        sub = Subscriber(principal)
        snapshot = {
            "type": "SUBSCRIBED",
            "subscribed": {
                "get_state": eager(get_state(m)),  # (at this moment, whole)
                "heartbeat_interval_seconds": self.heartbeat_interval,
            },
        }
        sub.queue.put_nowait(record(snapshot))
        self.subscribers.add(sub)
        self.log.info("operator_events.subscribed", principal=principal, open=len(self.subscribers))
        return sub

    def close(self, sub: Subscriber, why: str) -> None:
        if sub not in self.subscribers:
            return
        self.subscribers.discard(sub)
        sub.close(why)
        if not self.subscribers:
            self.master.changes.unlisten(self._changed)
        self.log.info("operator_events.closed", principal=sub.principal, why=why)

    def close_all(self) -> None:
        for sub in list(self.subscribers):
            self.close(sub, "the master is stopping")

    async def serve(self, request: web.Request, principal: str) -> web.StreamResponse:
        """The stream itself, until the client goes, falls behind, or the master stops."""
        sub = self.open(principal)
        response = web.StreamResponse(
            headers={"Content-Type": "application/recordio", "Cache-Control": "no-cache"}
        )
        heartbeat = record({"type": "HEARTBEAT"})
        try:
            await response.prepare(request)
            while True:
                try:
                    chunk = await within(sub.queue.get(), self.heartbeat_interval)
                except TimeoutError:
                    chunk = heartbeat
                if not chunk:
                    break
                await response.write(chunk)
        except ConnectionError:  # (aiohttp's "Connection lost" mid-write is one too)
            pass  # the client went away
        finally:
            self.close(sub, "the client went away")
        return response

    # -- the master's changes, as Mesos events ----------------------------------------------
    def _changed(self, event: ClusterEvent) -> None:
        try:
            records = [record(e) for e in self._as_mesos(event)]
        except Exception:  # ours, and never the master's handler's: said, and skipped
            self.log.exception("operator_events.failed", kind=event.kind)
            return
        for sub in list(self.subscribers):
            for chunk in records:
                try:
                    sub.queue.put_nowait(chunk)
                except asyncio.QueueFull:
                    self.log.warning(
                        "operator_events.too_slow", principal=sub.principal, queue=QUEUE
                    )
                    self.close(sub, f"fell {QUEUE} events behind")
                    break

    def _as_mesos(self, event: ClusterEvent) -> list[JSON]:
        m, kind = self.master, event.kind
        if kind in ("launch", TASK_ADDED, TASK_UPDATED, "release"):
            found = self._task(event.framework_id or "", event.task_id or "")
            if found is None:
                return []
            task, role = found
            if kind == "release" and not task.state.terminal:
                return []  # freed on its slave's latest state: its end is told when heard
            if kind in ("launch", TASK_ADDED):
                # an adopted task comes before its framework's own event: the framework first
                added = self._framework_event(task.framework_id)
                return [
                    *added,
                    {"type": "TASK_ADDED", "task_added": {"task": task_json(task, role)}},
                ]
            return [task_updated(task)]
        if kind in ("subscribed", "disconnected", "updated"):
            fw_id = event.framework_id or ""
            return self._framework_event(fw_id) or self._framework_event(fw_id, updated=True)
        if kind == "removed":
            return self._framework_removed(event.framework_id or "")
        if kind == "slave-added":
            slave = m.books.slaves.get(event.slave_id or "")
            if slave is None:
                return []
            self._agents.add(slave.slave_id)
            return [{"type": "AGENT_ADDED", "agent_added": {"agent": agent_json(m, slave)}}]
        if kind in ("slave-removed", "slave-gone") and event.slave_id in self._agents:
            self._agents.discard(event.slave_id)
            body = {"agent_id": mesos_id(event.slave_id)}
            return [{"type": "AGENT_REMOVED", "agent_removed": body}]
        return []  # offers, quota, weights, preemption: no operator event in Mesos

    def _framework_event(self, framework_id: str, *, updated: bool = False) -> list[JSON]:
        """FRAMEWORK_ADDED for a framework not announced yet (nothing if it was), or with
        `updated`, FRAMEWORK_UPDATED for one that was."""
        fw = self.master.books.frameworks.get(framework_id)
        if fw is None or (framework_id in self._frameworks) != updated:
            return []
        self._frameworks.add(framework_id)
        kind = "framework_updated" if updated else "framework_added"
        return [{"type": kind.upper(), kind: {"framework": framework_json(self.master, fw)}}]

    def _task(self, framework_id: str, task_id: str) -> tuple[Task, str] | None:
        books = self.master.books
        fw = books.frameworks.get(framework_id) or books.completed_frameworks.get(framework_id)
        if fw is None:
            return None
        task = fw.tasks.get(task_id) or fw.unreachable.get(task_id) or fw.ended.get(task_id)
        return (task, fw.task_role(task.info)) if task is not None else None

    def _framework_removed(self, framework_id: str) -> list[JSON]:
        """Its tasks ended with it (killed), then the framework itself."""
        fw = self.master.books.completed_frameworks.get(framework_id)
        if fw is None:
            return []
        self._frameworks.discard(framework_id)
        ended = [
            task_updated(t)
            for t in fw.ended.values()
            if t.status is not None and t.status.reason == Reason.FRAMEWORK_REMOVED
        ]
        removed = {"framework_info": framework_info(fw)}
        return [*ended, {"type": "FRAMEWORK_REMOVED", "framework_removed": removed}]


def task_updated(task: Task) -> JSON:
    """TASK_UPDATED: its state now, and its latest status."""
    body: JSON = {"framework_id": mesos_id(task.framework_id), "state": task.state.value}
    if task.status is not None:
        body["status"] = status_to_mesos(task.status)
    return {"type": "TASK_UPDATED", "task_updated": body}
