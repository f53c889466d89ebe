"""What the master does with messages from slaves (and the broker's Last Wills)."""

from __future__ import annotations

import contextlib

from master.books import Orphan, Slave, Task
from master.core import STAGING_GRACE, MasterCore
from protocol.messages import (
    Error,
    ExecutorExited,
    Failure,
    FrameworkMessage,
    Gone,
    Heartbeat,
    Reason,
    Register,
    Registered,
    Reregister,
    RunningTask,
    StatusAck,
    StatusUpdate,
    TaskState,
    Update,
)
from protocol.resources import Resources
from protocol.topics import check_segment


class SlaveCalls(MasterCore):
    async def _on_register(self, msg: Register, reply_to: str | None) -> None:
        await self._admit_slave(
            msg.slave_id, msg.hostname, msg.resources, msg.attributes, msg.incarnation, [], reply_to
        )

    async def _on_reregister(self, msg: Reregister, reply_to: str | None) -> None:
        await self._admit_slave(
            msg.slave_id,
            msg.hostname,
            msg.resources,
            msg.attributes,
            msg.incarnation,
            msg.tasks,
            reply_to,
        )

    async def _admit_slave(
        self,
        slave_id: str,
        hostname: str,
        total: Resources,
        attributes: dict[str, str],
        incarnation: str,
        running: list[RunningTask],
        reply_to: str | None,
    ) -> None:
        try:
            check_segment(slave_id, "slave_id")
        except ValueError as e:
            self._refuse(reply_to, str(e), "invalid", "Register")
            return
        used = sum((r.task.resources for r in running), Resources())
        if not total.contains(used):
            self._refuse(
                reply_to,
                f"slave {slave_id} reports tasks using {used}, more than its total {total}",
                "invalid",
                "Reregister",
                slave_id=slave_id,
            )
            return
        now = self._now()
        slave = self.books.slaves.get(slave_id)
        if slave is None:
            slave = Slave(slave_id, hostname, total, attributes, incarnation, now)
            self.books.slaves[slave_id] = slave
            self.allocator.add_slave(slave_id, total, hostname=hostname, attributes=attributes)
            self.log.info(
                "slave.registered",
                slave_id=slave_id,
                hostname=hostname,
                resources=str(total),
                tasks=len(running),
            )
            self._event("slave-added", slave_id=slave_id, resources=total)
        else:
            slave.incarnation, slave.last_seen = incarnation, now
            self.log.info("slave.reregistered", slave_id=slave_id, tasks=len(running))
        if running or slave.tasks:
            self._reconcile_slave(slave, running, now)
        self._send_slave(
            slave_id,
            Registered(
                slave_id=slave_id,
                master_id=self.master_id,
                heartbeat_interval_seconds=self.config.heartbeat_interval,
            ),
        )
        self.request_round()

    def _reconcile_slave(self, slave: Slave, running: list[RunningTask], now: float) -> None:
        """Match what a (re-)registering slave runs against what the master believes."""
        reported = {(r.framework_id, r.task.task_id): r for r in running}
        for key in list(slave.tasks):
            if key in reported:
                continue
            task = self.books.task(*key)
            if task is None:
                slave.tasks.discard(key)
            elif task.state != TaskState.STAGING or now - task.launched_at > STAGING_GRACE:
                self._master_update(
                    self.books.frameworks[key[0]],
                    task.task_id,
                    slave.slave_id,
                    TaskState.LOST,
                    Reason.SLAVE_REMOVED,
                    "the slave no longer runs it",
                )
        for (framework_id, task_id), r in reported.items():
            if (framework_id, task_id) in slave.tasks:
                continue
            owner = self.books.frameworks.get(framework_id)
            if owner is not None:
                task = Task(r.task, framework_id, slave.slave_id, r.state)
                owner.tasks[task_id] = task
                slave.tasks.add((framework_id, task_id))
                self.allocator.allocate_existing(framework_id, slave.slave_id, r.task.resources)
            else:
                orphans = self.books.orphans.setdefault(framework_id, [])
                if not any(o.task.task_id == task_id for o in orphans):
                    orphans.append(Orphan(r.task, framework_id, slave.slave_id, r.state))
                    self.allocator.allocate_existing(framework_id, slave.slave_id, r.task.resources)

    async def _on_heartbeat(self, msg: Heartbeat, reply_to: str | None) -> None:
        slave = self.books.slaves.get(msg.source)
        if slave is None:
            # A slave we removed (or a master that restarted): it must register again.
            if msg.source:
                with contextlib.suppress(ValueError):
                    self._send_slave(
                        check_segment(msg.source),
                        Error(
                            message=f"unknown slave {msg.source}: re-register",
                            code="unknown-slave",
                            about="Heartbeat",
                        ),
                    )
            return
        slave.last_seen = self._now()
        if msg.incarnation:
            slave.incarnation = msg.incarnation

    async def _on_status_update(self, msg: StatusUpdate, reply_to: str | None) -> None:
        status = msg.status
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is None:
            # Not acknowledged: the slave keeps re-sending until the framework is back
            # (or is shut down there).
            self.log.info(
                "status.framework_unknown",
                framework_id=msg.framework_id,
                task_id=status.task_id,
                state=status.state,
            )
            return
        if status.uuid:
            self._send_slave(
                msg.slave_id,
                StatusAck(
                    slave_id=msg.slave_id,
                    framework_id=fw.framework_id,
                    task_id=status.task_id,
                    uuid=status.uuid,
                ),
            )
            if status.uuid in fw.pending:
                return  # a re-sent duplicate: already owed to the framework
        task = fw.tasks.get(status.task_id)
        if task is not None and task.slave_id == msg.slave_id:
            task.state, task.status = status.state, status
            if status.state.terminal:
                self._finish(fw, task, status)
        self._forward(fw, Update(status=status), msg.slave_id)
        self._state_dirty = True

    async def _on_executor_message(self, msg: FrameworkMessage, reply_to: str | None) -> None:
        fw = self.books.frameworks.get(msg.framework_id)
        if fw is not None and fw.connected:
            self._send_framework(fw, msg)

    async def _on_executor_exited(self, msg: ExecutorExited, reply_to: str | None) -> None:
        fw = self.books.frameworks.get(msg.framework_id)
        self.log.info(
            "executor.exited",
            framework_id=msg.framework_id,
            slave_id=msg.slave_id,
            executor_id=msg.executor_id,
            status=msg.status,
        )
        if fw is not None and fw.connected:
            self._send_framework(
                fw, Failure(slave_id=msg.slave_id, executor_id=msg.executor_id, status=msg.status)
            )

    async def _on_error(self, msg: Error, reply_to: str | None) -> None:
        self.log.warning(
            "master.error_received",
            message=msg.message,
            code=msg.code,
            about=msg.about,
            sender=reply_to,
        )

    async def _on_gone(self, msg: Gone, reply_to: str | None) -> None:
        if msg.kind == "slave":
            slave = self.books.slaves.get(msg.id)
            if slave is not None and slave.incarnation == msg.incarnation:
                self.remove_slave(slave, "its connection was lost (last will)")
        elif msg.kind == "framework":
            framework_id = self.books.inboxes.get(msg.id)
            fw = self.books.frameworks.get(framework_id or "")
            if fw is not None and fw.incarnation == msg.incarnation:
                self.disconnect_framework(fw, "its connection was lost (last will)")
