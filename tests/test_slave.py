"""The slave on a real broker with a real master, spoken to by a bare protocol framework."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import msgpack
import pytest

from protocol.journal import Journal, JournalFile
from protocol.tooling.brokers import MosquittoBroker
from protocol.transport.bus import Bus
from protocol.wire.codec import PROTOCOL_VERSION, Envelope, decode_many
from protocol.wire.messages import (
    CommandInfo,
    Error,
    ExecutorInfo,
    Failure,
    FrameworkMessage,
    Kill,
    KillPolicy,
    KillTask,
    Message,
    ReadFile,
    Reason,
    RunTask,
    RunTasks,
    ShutdownFramework,
    Source,
    StatusUpdate,
    TaskInfo,
    TaskState,
    TaskStatus,
    Teardown,
    Update,
)
from protocol.wire.resources import Resources
from slave import slave as slave_module
from slave.files import read_sandbox_file

from harness.helpers import Inbox, books_balance, eventually
from harness.slave import EXECUTOR, Rig, T, group_members, reap, slave_process
from harness.slave import rig as rig


async def test_a_command_task_runs_and_its_output_lands_in_its_sandbox(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await rig.launch(fw, "echo hello from $MESOS_SANDBOX; echo oops >&2", "hello")
    await fw.update_for("hello", TaskState.STARTING)
    await fw.update_for("hello", TaskState.RUNNING)
    done = await fw.update_for("hello", TaskState.FINISHED)
    assert done.slave_id == "s1"
    sandbox = rig.tmp / "s1" / "sandboxes" / fw.framework_id / "hello"
    assert (sandbox / "stdout").read_text().strip() == f"hello from {sandbox}"
    assert (sandbox / "stderr").read_text().strip() == "oops"


async def test_exit_codes_map_to_finished_and_failed(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await rig.launch(fw, "exit 3", "bad")
    failed = await fw.update_for("bad", TaskState.FAILED)
    assert "exited with code 3" in failed.message
    assert failed.exit_code == 3  # a field of its own, not only words in the message
    await rig.launch(fw, "true", "good")
    assert (await fw.update_for("good", TaskState.FINISHED)).exit_code == 0


async def test_kill_stops_the_whole_process_group_and_reports_killed(rig: Rig) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    # a task that starts children of its own, one of them ignoring SIGTERM
    await rig.launch(fw, "sleep 300 & (trap '' TERM; sleep 300) & wait", "victim")
    await fw.update_for("victim", TaskState.RUNNING)
    runner = slave.tasks[(fw.framework_id, "victim")].runner
    pgid = runner.pid
    await eventually(lambda: len(group_members(pgid)) >= 3)  # shells and both sleeps are up
    await fw.bus.publish(
        T.inbound("framework", "framework"), Kill(framework_id=fw.framework_id, task_id="victim")
    )
    killed = await fw.update_for("victim", TaskState.KILLED)
    assert killed.reason == Reason.KILLED_BY_FRAMEWORK
    await eventually(lambda: group_members(pgid) == [])  # nothing of it is left, not even orphans


async def test_a_task_the_master_preempts_says_why_in_full(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await rig.launch(fw, "sleep 300", "victim")
    await fw.update_for("victim", TaskState.RUNNING)
    kill = KillTask(framework_id=fw.framework_id, task_id="victim", reason=Reason.TASK_PREEMPTED)
    rig.master.outbox.send_slave("s1", kill)
    killed = await fw.update_for("victim", TaskState.KILLED)
    assert killed.reason == Reason.TASK_PREEMPTED
    assert killed.message == (
        "killed by the master: preempted, to give a framework below its fair share room"
    )


async def test_a_task_over_its_memory_is_failed_with_the_reason(rig: Rig) -> None:
    """TASK_FAILED, REASON_CONTAINER_LIMITATION_MEMORY, from the slave (SOURCE_SLAVE: the
    limit is the slave's to hold, as Mesos's agent reports a container's limitation)."""
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=2, mem=2048))
    hog = f"{sys.executable} -c 'x = bytearray(300 * 2**20); import time; time.sleep(60)'"
    await rig.launch(fw, hog, "hog", Resources(cpus=0.5, mem=100))
    failed = await fw.update_for("hog", TaskState.FAILED, timeout=20)
    assert failed.reason == Reason.MEMORY_LIMIT
    assert failed.source == Source.SLAVE
    assert "100 MB" in failed.message
    assert "raise the task's mem" in failed.message


async def test_bad_input_gets_an_error_back_and_changes_nothing(rig: Rig) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=1, mem=512))
    await rig.launch(fw, "sleep 30", "keeper")
    await fw.update_for("keeper", TaskState.RUNNING)
    errors = Inbox()
    async with Bus(rig.broker.url, name="intruder", inbox="stest/intruder") as intruder:
        await intruder.subscribe("stest/intruder", errors)
        topic = T.slave("slave", "s1")
        # a malformed RunTask
        await intruder.publish_raw(
            topic,
            msgpack.packb(
                [PROTOCOL_VERSION, "RunTask", "stest/intruder", {"framework_id": "f", "task": 1}]
            ),
        )
        # a task for resources the slave does not have
        big = TaskInfo(
            task_id="huge",
            slave_id="s1",
            resources=Resources(cpus=8, mem=64),
            command=CommandInfo(value="true"),
        )
        await intruder.publish(topic, RunTask(framework_id=fw.framework_id, task=big))
        # the same task id as one that runs
        dup = TaskInfo(
            task_id="keeper",
            slave_id="s1",
            resources=Resources(cpus=0.1),
            command=CommandInfo(value="true"),
        )
        await intruder.publish(topic, RunTask(framework_id=fw.framework_id, task=dup))
        # a kill for a task that does not run here
        await intruder.publish(topic, KillTask(framework_id=fw.framework_id, task_id="ghost"))
        got = await errors.wait_count(Error, 4)
    codes = sorted(e.code for e in got)
    assert codes == ["duplicate-task", "invalid", "invalid-task", "unknown-task"]
    assert any("has only" in e.message for e in got)
    # the running task is untouched and the slave's books are as before
    assert list(slave.tasks) == [(fw.framework_id, "keeper")]
    assert slave.tasks[(fw.framework_id, "keeper")].state == TaskState.RUNNING
    assert slave.used() == Resources(cpus=0.1, mem=64)


class Reported:
    """What the slaves send the master, each update once (by uuid, as it is sent): a
    launch made behind the master's back, as some tests here make, is heard of only
    here (the master forwards the updates of the tasks it knows)."""

    def __init__(self) -> None:
        self.sent: dict[str, tuple[str, TaskState]] = {}

    async def __call__(self, _topic: str, payload: bytes) -> None:
        for e in decode_many(payload):
            if isinstance(e, Envelope) and isinstance(e.message, StatusUpdate):
                status = e.message.status
                self.sent[status.uuid or ""] = (status.task_id, status.state)

    def count(self, task_id: str, state: TaskState) -> int:
        return sum(found == (task_id, state) for found in self.sent.values())


async def test_tasks_sent_together_are_each_taken_or_refused_on_their_own(rig: Rig) -> None:
    """A master sends the tasks of one Accept in one RunTasks: a task the slave cannot run
    is refused by itself, and the others in the same message run."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=1, mem=512))
    await rig.launch(fw, "sleep 30", "keeper")
    await fw.update_for("keeper", TaskState.RUNNING)
    errors = Inbox()

    def task(task_id: str, cpus: float) -> TaskInfo:
        return TaskInfo(
            task_id=task_id,
            slave_id="s1",
            resources=Resources(cpus=cpus, mem=16),
            command=CommandInfo(value="sleep 30"),
        )

    async with Bus(rig.broker.url, name="intruder", inbox="stest/intruder") as intruder:
        await intruder.subscribe("stest/intruder", errors)
        run = RunTasks(
            framework_id=fw.framework_id,
            tasks=[task("first", 0.1), task("huge", 8), task("keeper", 0.1), task("last", 0.1)],
        )
        await intruder.publish(T.slave("slave", "s1"), run)
        got = await errors.wait_count(Error, 2)
        await eventually(lambda: {"first", "last"} <= {t for _, t in slave.tasks})
        assert sorted(e.code for e in got) == ["duplicate-task", "invalid-task"]
        assert sorted(t for _, t in slave.tasks) == ["first", "keeper", "last"]
        # (it runs: launched behind the master's back, heard of at the slave alone)
        await eventually(lambda: slave.tasks[fw.framework_id, "last"].state == TaskState.RUNNING)


async def test_a_launch_delivered_again_runs_once_though_its_task_ended(rig: Rig) -> None:
    """MQTT is at least once: a broker killed before it stored the slave's PUBACK delivers
    the RunTasks again after its restart, when the task may have ended and been forgotten.
    The same launch runs once; a new launch may reuse the ended task's id."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=1, mem=512))
    to_slave = T.slave("slave", "s1")
    launches, errors, reported = Inbox(), Inbox(), Reported()
    async with (
        Bus(rig.broker.url, name="replay", inbox="stest/replay") as replay,
        Bus(rig.broker.url, name="spy") as spy,
    ):
        await spy.subscribe(to_slave, launches)  # what the master sends the slave
        await spy.subscribe_raw(slave.to_master, reported)
        await replay.subscribe("stest/replay", errors)
        await rig.launch(fw, "true", "once", Resources(cpus=0.1, mem=16))
        run = await launches.wait_for(RunTasks)
        await fw.update_for("once", TaskState.FINISHED)
        await eventually(lambda: not slave.tasks)  # ended and forgotten
        await replay.publish(to_slave, run)  # the redelivery
        # then, from the same connection (the slave takes them in order), a launch it
        # refuses: once its refusal is back, the redelivery was taken
        huge = run.tasks[0].model_copy(update={"task_id": "huge", "resources": Resources(cpus=9)})
        await replay.publish(to_slave, run.model_copy(update={"launch_id": "x", "tasks": [huge]}))
        await errors.wait_for(Error)
        await rig.launch(fw, "true", "once", Resources(cpus=0.1, mem=16))  # the id again
        await eventually(lambda: reported.count("once", TaskState.FINISHED) == 2)
    # the first launch and the new one ran; the redelivery ran nothing and refused nothing
    assert reported.count("once", TaskState.RUNNING) == 2
    assert [e.code for e in errors.of(Error)] == ["invalid-task"]  # (the huge one's)


async def test_the_tasks_of_one_launch_start_together_and_report_running_in_one_list(
    rig: Rig,
) -> None:
    """A launch's tasks start at once: their RUNNING updates leave the slave in a few
    payloads (one list, behind the first few), not a message a task."""
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=4, mem=4096), simulated_tasks=True)
    running: list[int] = []  # RUNNING updates in each payload the slave sends

    async def record(_topic: str, payload: bytes) -> None:
        running.append(
            sum(
                isinstance(e, Envelope)
                and isinstance(e.message, StatusUpdate)
                and e.message.status.state == TaskState.RUNNING
                for e in decode_many(payload)
            )
        )

    async with Bus(rig.broker.url, name="spy") as spy:
        await spy.subscribe_raw(T.inbound("slave", "slave"), record)
        offer = await fw.next_offer()
        tasks = [
            TaskInfo(
                task_id=f"t{i}",
                slave_id="s1",
                resources=Resources(cpus=0.1, mem=16),
                command=CommandInfo(value="sleep 60"),  # (simulated: it runs a minute)
            )
            for i in range(40)
        ]
        await fw.accept(offer, tasks, refuse=0)
        for i in range(40):
            await fw.update_for(f"t{i}", TaskState.RUNNING)
        await eventually(lambda: sum(running) == 40)
    carriers = [n for n in running if n]
    assert len(carriers) <= 4, carriers  # (the first few go alone: each is first of its turn)


async def test_a_slave_remembers_launch_ids_for_its_launch_memory_not_forever(rig: Rig) -> None:
    """What a slave keeps to drop redeliveries follows its launch rate, not its age: a
    launch id older than `launch_memory` is forgotten when the next launch comes."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=1, mem=512), launch_memory=0.5)
    launches = Inbox()  # what the master sends the slave
    async with Bus(rig.broker.url, name="spy") as spy:
        await spy.subscribe(T.slave("slave", "s1"), launches)
        await rig.launch(fw, "true", "a", Resources(cpus=0.1, mem=16))
        await fw.update_for("a", TaskState.FINISHED)
        a = (await launches.wait_for(RunTasks, lambda r: r.tasks[0].task_id == "a")).launch_id
        assert slave._launches.remembered() == [a]
        # (counted from here, after the slave took launch a: counted from before the
        # publish, a slow delivery of launch a left it younger than 0.5 s when b came)
        first = time.monotonic()
        await eventually(lambda: time.monotonic() > first + 0.5)  # launch a's memory ends
        await rig.launch(fw, "true", "b", Resources(cpus=0.1, mem=16))
        await fw.update_for("b", TaskState.FINISHED)
        b = (await launches.wait_for(RunTasks, lambda r: r.tasks[0].task_id == "b")).launch_id
    assert slave._launches.remembered() == [b]
    assert a not in slave._launches


async def test_a_slave_killed_and_restarted_comes_back_as_itself_with_its_owed_updates(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    """SIGKILL the slave process while an update is unacknowledged; the restarted slave
    re-registers under the same id and its updates still reach the framework, in order."""
    work = tmp_path / "slave"
    async with contextlib.AsyncExitStack() as stack:
        rig = Rig(mosquitto, tmp_path, stack)
        master = await rig.start_master()
        fw = await rig.framework(acknowledging=False)
        proc = await slave_process(mosquitto, work)
        stack.push_async_callback(reap, proc)
        await rig.launch(fw, "sleep 1", "survivor", Resources(cpus=0.5, mem=64))
        # (RUNNING waits on the slave for STARTING's acknowledgement, which never comes)
        await fw.update_for("survivor", TaskState.STARTING)
        slave_id = next(iter(master.books.slaves))
        await master.stop()  # the master goes away: nobody acknowledges what follows
        await master.bus.close()
        # STARTING, RUNNING and FINISHED, kept on disk: nobody acknowledged them
        await eventually(lambda: _owed(work) == 3, timeout=15)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

        master2 = await rig.start_master()
        before = len(fw.inbox.of(Update))
        await fw.subscribe("fw", framework_id=fw.framework_id, failover_timeout=60)
        proc2 = await slave_process(mosquitto, work)
        stack.push_async_callback(reap, proc2)

        # the fake framework never acknowledged: every update comes again from the new
        # master (STARTING a second time), each once the one before it is acknowledged
        owed = {u.status.uuid for u in fw.inbox.of(Update)}

        def from_master2() -> list[TaskStatus]:
            return [u.status for u in fw.inbox.of(Update)[before:]]

        for state in (TaskState.STARTING, TaskState.RUNNING):
            await fw.acknowledge(await fw.update_for("survivor", state, timeout=20, after=before))
        done = await fw.update_for("survivor", TaskState.FINISHED, timeout=20, after=before)
        assert done.slave_id == slave_id
        assert list(master2.books.slaves) == [slave_id]  # the same slave, not a new one
        assert _owed(work) > 0  # the slave keeps it until the framework has it
        assert owed <= {s.uuid for s in from_master2()}
        heard = [s.state for s in from_master2()]
        assert heard == sorted(heard, key=[TaskState.STARTING, TaskState.RUNNING, done.state].index)
        await fw.acknowledge(done)
        await eventually(lambda: _owed(work) == 0)  # acknowledged at last


async def test_a_task_the_restarted_slave_cannot_restore_is_reported_lost(rig: Rig) -> None:
    """A journal record that no longer makes a task (an older slave's, a damaged one) is
    not dropped in silence: its framework hears TASK_LOST, and a good one still runs."""
    fw = await rig.framework()
    journal = Journal(rig.tmp / "s1" / "tasks.journal")
    await journal.put(
        f"{fw.framework_id}/ghost",
        {"framework_id": fw.framework_id, "task": {"task_id": "ghost"}, "state": "TASK_RUNNING"},
    )
    await journal.close()
    await rig.start_slave("s1", Resources(cpus=1, mem=512))
    lost = await fw.update_for("ghost", TaskState.LOST)
    assert lost.slave_id == "s1"
    assert "could not restore" in lost.message
    tasks = JournalFile(rig.tmp / "s1" / "journal").journal("tasks.journal")  # (moved in)
    assert "ghost" not in {key.partition("/")[2] for key, _ in tasks.items()}
    await rig.launch(fw, "true", "fine")
    await fw.update_for("fine", TaskState.FINISHED)


async def test_a_broker_restart_while_tasks_run_loses_no_status_update(rig: Rig) -> None:
    fw = await rig.framework()
    await rig.start_slave("s1", Resources(cpus=4, mem=1024))
    for i in range(4):
        await rig.launch(fw, f"sleep {0.3 * (i + 1):.1f}", f"t{i}", Resources(cpus=0.5, mem=64))
    await fw.update_for("t0", TaskState.RUNNING)
    await rig.broker.restart()
    for i in range(4):
        await fw.update_for(f"t{i}", TaskState.FINISHED, timeout=30)


def _owed(work: Path) -> int:
    """Status updates the slave keeps on disk because nobody acknowledged them yet."""
    return len(JournalFile(work / "journal").journal("updates.journal"))


def executor_task(offer_slave: str, task_id: str, seconds: float) -> TaskInfo:
    return TaskInfo(
        task_id=task_id,
        slave_id=offer_slave,
        resources=Resources(cpus=0.25, mem=32),
        executor=ExecutorInfo(executor_id="sleeper", command=CommandInfo(value=EXECUTOR)),
        data=json.dumps({"duration": seconds}).encode(),
    )


async def test_a_custom_executor_runs_its_frameworks_tasks_and_its_death_fails_them(
    rig: Rig,
) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    tasks = [executor_task("s1", "quick", 0.2), executor_task("s1", "long", 300)]
    await fw.accept(offer, tasks, refuse=0)
    await fw.update_for("quick", TaskState.FINISHED, timeout=30)
    await fw.update_for("long", TaskState.RUNNING)
    assert list(slave.executors) == [(fw.framework_id, "sleeper")]  # one process for both

    # scheduler -> executor -> scheduler
    await fw.bus.publish(
        T.inbound("framework", "framework"),
        Message(framework_id=fw.framework_id, slave_id="s1", executor_id="sleeper", data=b"ping"),
    )
    echo = await fw.inbox.wait_for(FrameworkMessage)
    assert echo.data == b"echo:ping"

    # the executor dies under its running task
    pid = slave.executors[(fw.framework_id, "sleeper")].pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    failed = await fw.update_for("long", TaskState.FAILED)
    assert failed.reason == Reason.EXECUTOR_TERMINATED
    failure = await fw.inbox.wait_for(Failure)
    assert failure.executor_id == "sleeper"
    assert failure.status == -signal.SIGKILL
    assert slave.executors == {}
    assert group_members(pid) == []


async def test_an_executors_command_runs_as_a_shell_runs_it(rig: Rig) -> None:
    """An executor's command is `sh -c COMMAND`, as Mesos runs it: one that says a word
    first and then execs its program runs the program (a slave that ran `exec COMMAND`
    ran the `echo` alone, and the executor was gone)."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    task = executor_task("s1", "t", 0.1)
    assert task.executor is not None
    task.executor.command.value = f"echo starting; exec {EXECUTOR}"
    await fw.accept(offer, [task])
    await fw.update_for("t", TaskState.FINISHED, timeout=30)
    sandbox = slave.executors[(fw.framework_id, "sleeper")].sandbox
    assert (sandbox / "stdout").read_bytes().startswith(b"starting\n")


async def test_each_task_of_a_custom_executor_has_its_own_stdout(rig: Rig) -> None:
    """Two tasks on one executor: reading a task's stdout (as the master asks the slave)
    shows that task's lines only, not the other's nor the executor's own log."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    await fw.accept(offer, [executor_task("s1", "a", 0.1), executor_task("s1", "b", 0.1)])
    await fw.update_for("a", TaskState.FINISHED, timeout=30)
    await fw.update_for("b", TaskState.FINISHED)

    async def stdout(task_id: str) -> bytes:
        ask = ReadFile(request_id="r1", framework_id=fw.framework_id, task_id=task_id,
                       executor_id="sleeper", name="stdout")  # fmt: skip
        answer = await read_sandbox_file(slave.config.work_dir / "sandboxes", "s1", ask)
        assert not answer.error, answer.error
        return answer.data

    assert await stdout("a") == b"task a: sleeping 0.1s\n"
    assert await stdout("b") == b"task b: sleeping 0.1s\n"
    sandboxes = slave.config.work_dir / "sandboxes" / fw.framework_id
    assert (sandboxes / "a" / "stderr").read_bytes() == b""
    assert b"task a" not in (sandboxes / "executor-sleeper" / "stdout").read_bytes()


async def test_teardown_shuts_down_the_frameworks_executor(rig: Rig) -> None:
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    offer = await fw.next_offer()
    await fw.accept(offer, [executor_task("s1", "long", 300)], refuse=0)
    await fw.update_for("long", TaskState.RUNNING, timeout=30)
    executor = slave.executors[(fw.framework_id, "sleeper")]
    await fw.bus.publish(
        T.inbound("framework", "framework"), Teardown(framework_id=fw.framework_id)
    )
    await eventually(lambda: slave.executors == {} and slave.tasks == {}, timeout=15)
    assert executor.pid is not None
    assert group_members(executor.pid) == []


async def test_an_executor_speaks_only_for_its_own_tasks(rig: Rig) -> None:
    """A hostile executor on the same slave as another framework's task: whatever ids it
    writes, it can only report its own tasks; the rest gets Errors back on its line."""
    victim = await rig.framework("victim")
    await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    await rig.launch(victim, "sleep 300", "precious")
    await victim.update_for("precious", TaskState.RUNNING)
    await victim.decline(await victim.next_offer(after=1), refuse=1000)  # the rest: not needed
    hostile = await rig.framework("hostile")
    offer = await hostile.next_offer()
    program = Path(__file__).parent / "programs" / "hostile_executor.py"
    task = TaskInfo(
        task_id="mine",
        slave_id="s1",
        resources=Resources(cpus=0.25, mem=32),
        executor=ExecutorInfo(
            executor_id="evil",
            command=CommandInfo(
                value=f"{sys.executable} {program} precious",
                environment={"PYTHONPATH": str(Path(__file__).parent.parent)},
            ),
        ),
    )
    await hostile.accept(offer, [task], refuse=0)
    # its own task's RUNNING went on the line after the forgeries, so they were handled
    await hostile.update_for("mine", TaskState.RUNNING, timeout=30)
    sandbox = rig.tmp / "s1" / "sandboxes" / hostile.framework_id / "executor-evil"
    # three whole lines: the executor's print writes "Error", its code and the newline one
    # at a time where PYTHONUNBUFFERED is set, and a read between them sees "Error" alone

    def errors() -> int:
        whole = (sandbox / "stdout").read_text().split("\n")[:-1]
        return sum(1 for line in whole if line.startswith("Error"))

    await eventually(lambda: errors() >= 3)
    answers = (sandbox / "stdout").read_text().split("\n")
    assert answers[:2] == ["ExecutorRegistered ", "RunTask "]
    assert sorted(answers[2:5]) == ["Error malformed", "Error unknown-task", "Error unknown-task"]
    # the victim's task was not touched, and nobody was told otherwise
    assert rig.master.books.frameworks[victim.framework_id].tasks["precious"].state == (
        TaskState.RUNNING
    )
    assert not [u for u in victim.inbox.of(Update) if u.status.state == TaskState.FINISHED]
    assert not [u for u in hostile.inbox.of(Update) if u.status.task_id != "mine"]
    books_balance(rig.master)


async def test_an_executors_flood_of_updates_is_bounded_on_the_slave(rig: Rig) -> None:
    """An executor sends 300 RUNNING updates of 100,000 characters each while its
    framework acknowledges nothing, one with a megabyte of opaque data, then its task's
    end: the slave owes three updates (the one in flight, the latest, the end), each
    message cut to its bound, the oversized one refused on the executor's line, and its
    log lines cut too."""
    import structlog

    fw = await rig.framework("flooder", acknowledging=False)
    program = Path(__file__).parent / "programs" / "flooding_executor.py"
    task = TaskInfo(
        task_id="loud",
        slave_id="s1",
        resources=Resources(cpus=0.25, mem=32),
        executor=ExecutorInfo(
            executor_id="flood",
            command=CommandInfo(
                value=f"{sys.executable} {program}",
                environment={"PYTHONPATH": str(Path(__file__).parent.parent)},
            ),
        ),
    )
    with structlog.testing.capture_logs() as lines:
        slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
        await fw.accept(await fw.next_offer(), [task], refuse=0)
        await eventually(lambda: slave.updates.ending() != [], timeout=60)
    assert len(slave.updates) == 3
    assert slave.updates.journal.path.stat().st_size < 5 << 20  # (30 MB came in)
    head = await fw.update_for("loud", TaskState.RUNNING)
    assert head.message.startswith("0:")
    assert len(head.message) <= 4096
    said = [line for line in lines if line.get("executor_id") == "flood"]
    assert said
    assert all(len(str(v)) <= 400 for line in said for v in line.values())
    sandbox = slave.config.work_dir / "sandboxes" / fw.framework_id / "executor-flood"
    await eventually(lambda: "Error invalid" in (sandbox / "stdout").read_text().split("\n"))


async def test_a_torn_down_frameworks_task_in_its_grace_holds_its_room_until_it_ends(
    rig: Rig,
) -> None:
    """A task that ignores SIGTERM, with a kill policy of 2 s: its framework torn down,
    what it uses is offered to nobody while it still runs, and free once the slave has
    killed it (the slave says so at once: well before the master's own limit)."""
    fw = await rig.framework()
    slave = await rig.start_slave("s1", Resources(cpus=2, mem=1024))
    sandbox = await rig.launch(
        fw,
        "trap '' TERM; echo $$ > pid; while :; do sleep 0.05; done",
        "stubborn",
        Resources(cpus=1, mem=256),
        kill_policy=KillPolicy(grace_period=2),
    )
    await fw.update_for("stubborn", TaskState.RUNNING)
    await eventually(lambda: (sandbox / "pid").exists() and bool((sandbox / "pid").read_text()))
    pid = int((sandbox / "pid").read_text())
    master = rig.master
    await fw.bus.publish(
        T.inbound("framework", "framework"), Teardown(framework_id=fw.framework_id)
    )
    await eventually(lambda: fw.framework_id not in master.books.frameworks)
    assert alive(pid), "killed at once: the test shows nothing"
    assert master.allocator.free("s1") == Resources(cpus=1, mem=768)  # (held by nobody)
    assert len(master.books.dying) == 1
    await eventually(lambda: not master.books.dying, timeout=10)
    assert not alive(pid)
    assert master.allocator.free("s1") == Resources(cpus=2, mem=1024)
    assert not slave.tasks


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


async def test_a_slave_remembers_a_bounded_number_of_frameworks_shut_down(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's churn of frameworks (each shut down here) must not grow the slave for its
    life: the last SHUT_DOWN_KEPT are remembered (their late reports dropped)."""
    monkeypatch.setattr(slave_module, "SHUT_DOWN_KEPT", 3)
    slave = await rig.start_slave("s1", Resources(cpus=1, mem=256))
    master_bus = rig.master.bus
    for i in range(5):
        await master_bus.publish(T.slave("slave", "s1"), ShutdownFramework(framework_id=f"f{i}"))
    await eventually(lambda: "f4" in slave.shut_down_frameworks)
    assert list(slave.shut_down_frameworks) == ["f2", "f3", "f4"]
