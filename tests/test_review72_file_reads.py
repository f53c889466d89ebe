"""Review 72: a tenant's task-file reads over the bus are bounded by nothing but its rate
limit, and shut other tenants (and the operators' web UI) out of reading the files of the
slave they share.

Review 53 bounded what one principal asks of slaves' disks and links by HTTP: "a
principal reads at most 8 task files from slaves at once (429 past it)" (`FileReads`,
`FILE_READS_AT_ONCE`, master/http/turns.py). The same read by the bus, `ReadTaskFile`
(the SDK's `driver.read_file`), is a call of cost 1 (`master.intake.costs`) and nothing
more: `FileRequests.on_read_task_file` starts a read for each, however many are under way,
and each asks the task's slave for up to 1 MiB (`ReadFile`), which the slave reads and
sends back through the broker and the master to the tenant.

The attacker: mallory runs one task beside alice's on a slave, its stdout 1 MiB, and sends
1,000 `ReadTaskFile`s at once (a second's worth of the default `--rate-limit`: all
admitted). A gigabyte is asked of the shared slave at once, and passes through the
master's one connection to mosquitto; alice's read of her own task's stdout, 15 bytes,
started once mallory's first reads are under way, is answered "slave sa did not answer in
5s" (on the 2-core test machine, every run; on the memory broker it waited 1.1 s). A
read an operator makes in the web UI of any task on that slave fails the same way.

What a tenant relies on: another tenant's reads of its own files keep it from reading its
own no more than the bound on a principal's file reads at once allows.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from frameworks.driver import SchedulerDriver
from frameworks.errors import DriverError
from frameworks.scheduler import Driver, Scheduler, build_task
from master.calls.files import FILE_READS_AT_ONCE
from master.master import MasterConfig
from master.rate_limits import RateLimits
from protocol.wire.messages import Offer, ReadTaskFile
from protocol.wire.resources import Resources
from slave.paths import task_sandbox_name

from harness import trust
from harness.helpers import eventually
from harness.trust import Secure, T, secure_cluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.timing]  # (a read answered in 5 s)
READS = 1000  # a second's worth of the master's default --rate-limit (1,000 calls/s)
MIB = 1024 * 1024
ALICES = b"alice's output\n"


class Beside(Scheduler):
    """Launches one long task on the slave named, and declines the rest."""

    def __init__(self, slave_id: str) -> None:
        self.slave_id = slave_id
        self.launched = False

    async def resource_offers(self, driver: Driver, offers: list[Offer]) -> None:
        for offer in offers:
            if offer.slave_id == self.slave_id and not self.launched:
                self.launched = True
                task = build_task(
                    offer, "t", Resources(cpus=1, mem=64), task_id="t", command="sleep 300"
                )
                await driver.launch_tasks([offer.offer_id], [task])


def stdout_of(sec: Secure, tmp_path: Path, framework_id: str, task_id: str, data: bytes) -> None:
    """What the task wrote to its stdout (a simulated task writes none: written here)."""
    task = sec.master.books.frameworks[framework_id].tasks[task_id]
    sandbox = tmp_path / task.slave_id / "sandboxes" / framework_id / task_sandbox_name(task_id)
    sandbox.mkdir(parents=True, exist_ok=True)
    (sandbox / "stdout").write_bytes(data)


@pytest.fixture
async def sec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Secure]:
    """The trust cluster on mosquitto, its master held to the default rate limit
    (`drfmesos master`'s --rate-limit 1000, --rate-capacity 1000)."""
    limits = RateLimits.defaults(1000, 1000)
    monkeypatch.setattr(
        trust, "CONFIG", MasterConfig(**{**trust.CONFIG.__dict__, "rate_limits": limits})
    )
    async with secure_cluster("mosquitto", tmp_path) as cluster:
        yield cluster


async def test_a_tenants_file_reads_leave_another_tenant_its_own(
    sec: Secure, tmp_path: Path
) -> None:
    alice_id = sec.alice.framework_id or ""
    shared = sec.master.books.frameworks[alice_id].tasks["victim-task"].slave_id
    stdout_of(sec, tmp_path, alice_id, "victim-task", ALICES)
    async with contextlib.AsyncExitStack() as stack:
        mallory = SchedulerDriver(
            Beside(shared), name="mallory", broker=sec.connect("mallory"), cluster=T.cluster,
            role="mallory",
        )  # fmt: skip
        await mallory.start()
        stack.push_async_callback(mallory._close)
        mallory_id = mallory.framework_id or ""
        await eventually(lambda: "t" in sec.master.books.frameworks[mallory_id].tasks)
        stdout_of(sec, tmp_path, mallory_id, "t", b"m" * MIB)

        # (through its scheduler's own connection: the master takes a framework's calls
        # only from the inbox it subscribed with, review 76)
        bus = mallory.bus
        assert bus is not None
        for i in range(READS):
            bus.post(
                mallory.to_master,
                ReadTaskFile(
                    request_id=f"r{i}", framework_id=mallory_id, task_id="t", name="stdout",
                    length=MIB,
                ),
            )  # fmt: skip
        # the master asks the shared slave for as many as it asks for anyone, at once
        requests = sec.master.files._file_requests
        await eventually(lambda: len(requests) >= FILE_READS_AT_ONCE, timeout=10)
        asked = len(requests)
        assert asked <= FILE_READS_AT_ONCE, f"{asked} of mallory's reads under way at once"
        try:
            read = (await sec.alice.read_file("victim-task", timeout=10)).data
            why = ""
        except DriverError as e:
            read, why = b"", str(e)
        assert read == ALICES, (
            f"alice could not read her own task's stdout while mallory had {asked} reads of "
            f"1 MiB under way on their shared slave {shared}: {why}"
        )
