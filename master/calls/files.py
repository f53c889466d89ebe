"""Reading a task's stdout and stderr through the master (for the web UI and the API, and
for a framework reading its own tasks' files: `ReadTaskFile`, the driver's `read_file`).

The master asks the slave that ran the task (`ReadFile`) and waits for its `FileData`,
which is accepted only from the principal that slave speaks for and only for a request
it was asked. Finished tasks are found by the slave they ran on, among recent ones.

Each principal has at most FILE_READS_AT_ONCE reads waiting for slaves at once, by the
bus and by HTTP together (review 53 bounded HTTP's alone; review 72 found a tenant's
1,000 bus reads of 1 MiB at once leaving another tenant unable to read its own files on
the slave they shared): past it a read is refused at once (`FileReadsBusy`).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from master.authz import Caller
from master.books import Books, Task
from master.calls.framework_calls import framework_of_caller
from master.outbox import Outbox
from protocol.transport.aio import within
from protocol.wire.messages import FileData, ReadFile, ReadTaskFile, TaskFileData, new_id

FILE_TIMEOUT = 5.0
FILE_READS_AT_ONCE = 8  # a principal's task-file reads waiting for slaves at once (docs: bounds)


class FileReadError(LookupError):
    """No such task, its slave is gone, or the slave could not read the file."""


class FileReadsBusy(FileReadError):
    """The asker has FILE_READS_AT_ONCE reads under way already."""


class FileRequests:
    """Reading a task's stdout or stderr from its slave, for the HTTP API and for the
    framework's ReadTaskFile call: it asks and answers through the outbox."""

    def __init__(self, books: Books, outbox: Outbox, at_once: int = FILE_READS_AT_ONCE) -> None:
        self.books, self.outbox, self.at_once = books, outbox, at_once
        self._file_requests: dict[str, tuple[str, asyncio.Future[FileData]]] = {}
        self._file_readers: set[asyncio.Task[None]] = set()  # frameworks' reads under way
        self.reading: Counter[str] = Counter()  # each principal's reads waiting for slaves

    def _known_task(self, framework_id: str, task_id: str) -> Task | None:
        """A task that runs or ran recently (None if the master does not know it)."""
        fw = self.books.frameworks.get(framework_id) or self.books.completed_frameworks.get(
            framework_id
        )
        if fw is None:
            return None
        return fw.tasks.get(task_id) or fw.ended.get(task_id)

    async def read_task_file(
        self, principal: str, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        """The file, read for `principal` (FileReadsBusy past its reads at once)."""
        if self.reading[principal] >= self.at_once:
            raise FileReadsBusy(
                f"at most {self.at_once} task-file reads at once a principal: ask again later"
            )
        self.reading[principal] += 1
        try:
            return await self._read(framework_id, task_id, name, offset, length)
        finally:
            self.reading[principal] -= 1
            if self.reading[principal] <= 0:
                del self.reading[principal]  # (forget the idle)

    async def _read(
        self, framework_id: str, task_id: str, name: str, offset: int, length: int
    ) -> FileData:
        task = self._known_task(framework_id, task_id)
        if task is None:
            raise FileReadError(f"no task {task_id} of framework {framework_id}")
        slave_id = task.slave_id
        if slave_id not in self.books.slaves:
            raise FileReadError(f"slave {slave_id} of task {task_id} is gone")
        request_id = new_id()
        waiter: asyncio.Future[FileData] = asyncio.get_running_loop().create_future()
        self._file_requests[request_id] = (slave_id, waiter)
        try:
            self.outbox.send_slave(
                slave_id,
                ReadFile(
                    request_id=request_id,
                    framework_id=framework_id,
                    task_id=task_id,
                    executor_id=task.info.executor.executor_id if task.info.executor else None,
                    name=name,
                    offset=offset,
                    length=length,
                ),
            )
            try:
                answer = await within(waiter, FILE_TIMEOUT)
            except TimeoutError:
                raise FileReadError(
                    f"slave {slave_id} did not answer in {FILE_TIMEOUT:g}s"
                ) from None
        finally:
            self._file_requests.pop(request_id, None)
        if answer.error:
            raise FileReadError(answer.error)
        return answer

    async def on_file_data(self, msg: FileData, caller: Caller) -> None:
        pending = self._file_requests.get(msg.request_id)
        owner = self.books.slave_owners.get(msg.slave_id)
        if pending is None or pending[0] != msg.slave_id or owner != caller.principal:
            self.outbox.refuse(
                caller,
                "FileData answers no request of yours",
                "forbidden",
                "FileData",
                slave_id=msg.slave_id,
            )
            return
        if not pending[1].done():
            pending[1].set_result(msg)

    async def on_read_task_file(self, msg: ReadTaskFile, caller: Caller) -> None:
        """A framework reads one of its own tasks' files (another principal's framework is
        refused, as every call naming it is). The slave's answer is awaited off the bus's
        path: it arrives on that same path."""
        fw = framework_of_caller(self.books, self.outbox, msg.framework_id, caller, "ReadTaskFile")
        if fw is None:
            return

        async def read() -> None:
            answer = TaskFileData(request_id=msg.request_id, task_id=msg.task_id)
            try:
                got = await self.read_task_file(
                    caller.principal,
                    msg.framework_id,
                    msg.task_id,
                    msg.name,
                    msg.offset,
                    msg.length,
                )
                answer = answer.model_copy(
                    update={"data": got.data, "offset": got.offset, "size": got.size}
                )
            except FileReadError as e:
                answer = answer.model_copy(update={"error": str(e)})
            self.outbox.send_framework(fw, answer)

        task = asyncio.create_task(read())
        self._file_readers.add(task)
        task.add_done_callback(self._file_readers.discard)
