"""The journal slaves and a lone master keep: what was awaited is on disk, in order."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import msgpack
import pytest
import structlog

from protocol import group_commit
from protocol.journal import COMPACT_MIN, Journal, JournalFile
from protocol.transport.aio import within

from harness.disk import HeldSync
from harness.helpers import eventually


async def test_an_awaited_put_is_in_the_file_without_a_close(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await journal.put("a", {"n": 1})
    await journal.put("b", [1, 2])
    await journal.drop("a")
    # a second reader (the party restarted after a kill -9) sees exactly the live set
    assert dict(Journal(tmp_path / "j").items()) == {"b": [1, 2]}


async def test_many_writes_at_once_land_in_order(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    writes = [journal.put(f"k{i}", i) for i in range(100)] + [journal.drop("k3")]
    await asyncio.gather(*writes)
    again = Journal(tmp_path / "j")
    assert len(again) == 99
    assert "k3" not in again
    assert again.get("k99") == 99


async def test_it_compacts_to_the_live_set(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    for i in range(COMPACT_MIN + 10):
        await journal.put("same", i)
    assert (tmp_path / "j").stat().st_size < 200  # ten records left, not a thousand
    await journal.put("other", "x")
    await journal.close()
    assert dict(Journal(tmp_path / "j").items()) == {"same": COMPACT_MIN + 9, "other": "x"}


async def test_a_torn_last_record_is_ignored(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await journal.put("kept", "yes")
    await journal.put("torn", "x" * 100)
    data = (tmp_path / "j").read_bytes()
    (tmp_path / "j").write_bytes(data[:-10])  # killed in the middle of a write
    assert dict(Journal(tmp_path / "j").items()) == {"kept": "yes"}


async def test_records_appended_after_a_torn_tail_are_read_back(tmp_path: Path) -> None:
    """Killed anywhere inside its last records' writes, a journal reopened and appended
    to loses nothing whole: neither what came before the cut nor what came after."""
    path = tmp_path / "j"
    journal = Journal(path, sync=False)
    for i in range(20):
        await journal.put(f"k{i}", {"n": i, "pad": "p" * i})
    await journal.drop("k0")
    await journal.close()
    whole = path.read_bytes()
    ends = _record_ends(whole)
    for cut in range(ends[-4], len(whole)):  # every byte offset of the last three records
        path.write_bytes(whole[:cut])
        survived = dict(Journal(path, sync=False).items())  # (what a whole record held)
        reopened = Journal(path, sync=False)
        await reopened.put("after-1", 1)
        await reopened.put("after-2", 2)
        await reopened.close()
        assert dict(Journal(path, sync=False).items()) == survived | {"after-1": 1, "after-2": 2}
        assert len(survived) >= 17, cut  # only the records the cut went through are gone


def _record_ends(data: bytes) -> list[int]:
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    ends = []
    for _ in unpacker:
        ends.append(unpacker.tell())
    return ends


async def test_a_torn_tail_is_cut_and_logged(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await journal.put("kept", "yes")
    await journal.close()
    whole = (tmp_path / "j").read_bytes()
    (tmp_path / "j").write_bytes(whole + b"\x93\xa3put")  # a record's start, and no more
    with structlog.testing.capture_logs() as logs:
        Journal(tmp_path / "j")
    assert (tmp_path / "j").read_bytes() == whole
    assert [e["event"] for e in logs] == ["journal.torn_tail_truncated"]
    assert logs[0]["dropped"] == 5


async def test_a_write_that_fails_raises_in_the_writer(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    journal = Journal(tmp_path / "file" / "j")  # its directory cannot be made
    with pytest.raises(OSError, match=r"Not a directory|File exists"):
        await journal.put("k", 1)


async def test_discards_go_with_the_next_write_in_order(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await asyncio.gather(*[journal.put(f"k{i}", i) for i in range(10)])
    for i in range(0, 10, 2):  # (none of them waits)
        journal.discard(f"k{i}")
    journal.discard("never-there")
    await journal.synced()
    assert dict(Journal(tmp_path / "j").items()) == {"k1": 1, "k3": 3, "k5": 5, "k7": 7, "k9": 9}
    journal.discard("k1")
    await journal.put("k1", "again")  # made after the discard: it wins
    assert Journal(tmp_path / "j").get("k1") == "again"


async def test_close_writes_the_discards_nobody_waited_for(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await journal.put("a", 1)
    await journal.put("b", 2)
    journal.discard("a")
    journal.discard("b")
    await journal.close()
    assert dict(Journal(tmp_path / "j").items()) == {}


async def test_a_writer_cancelled_while_it_waits_leaves_the_others_theirs(
    tmp_path: Path,
) -> None:
    # (a slave shutting down cancels a task's timer while its FINISHED waits for the turn's
    # write; the other tasks' updates of that turn must still be written and answered)
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    journal = Journal(tmp_path / "j")
    first = asyncio.create_task(journal.put("a", 1))
    cancelled = asyncio.create_task(journal.put("b", 2))
    other = asyncio.create_task(journal.put("c", 3))
    await asyncio.sleep(0)  # one turn: the three have run to their awaits (the point is the turn)
    assert not any(t.done() for t in (first, cancelled, other))
    cancelled.cancel()
    await first  # answered, not cancelled with their neighbour
    await other
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert dict(Journal(tmp_path / "j").items()) == {"a": 1, "b": 2, "c": 3}
    await journal.close()
    assert errors == []  # nothing raised in the loop's callbacks


async def _first_put_syncing(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[HeldSync, Journal, asyncio.Task[None]]:
    """A journal whose first put ("first" = 0) is in its sync, held until released."""
    disk = HeldSync(monkeypatch)
    journal = Journal(path)
    first = asyncio.create_task(journal.put("first", 0))
    await asyncio.to_thread(disk.started.wait, 10)
    return disk, journal, first


async def test_the_loop_runs_on_while_a_sync_is_slow_and_what_comes_meanwhile_shares_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk, journal, first = await _first_put_syncing(tmp_path / "j", monkeypatch)
    assert not first.done()  # not answered before it is on disk
    later = [asyncio.create_task(journal.put(f"k{i}", i)) for i in range(100)]
    journal.discard("first")
    await asyncio.sleep(0)  # the loop goes round: nothing it runs waits for the disk
    assert not any(t.done() for t in later)
    disk.release.set()
    await asyncio.gather(first, *later)
    assert disk.calls == 2  # the first record's sync, then one for the hundred and the discard
    assert dict(Journal(tmp_path / "j").items()) == {f"k{i}": i for i in range(100)}


async def test_discards_alone_cost_no_sync_and_the_next_awaited_write_covers_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a slave's acknowledged updates: dropped late is harmless, a sync a batch of them is
    # not: ten logical slaves' journals synced one after another in every disk trip)
    disk = HeldSync(monkeypatch)
    disk.release.set()
    journal = Journal(tmp_path / "j")
    await journal.put("a", 1)
    await journal.put("b", 2)
    assert disk.calls == 2
    journal.discard("a")
    # written with the turn's other records (none), nobody waiting for it: not synced
    await eventually(lambda: dict(Journal(tmp_path / "j").items()) == {"b": 2})
    assert disk.calls == 2
    await journal.synced()  # what is written is on disk: one sync for it
    assert disk.calls == 3
    journal.discard("b")
    await journal.put("c", 3)  # one sync for the discard and the put
    assert disk.calls == 4
    journal.discard("c")
    await journal.close()  # a discard nobody waited for is synced at close
    assert disk.calls == 5
    assert dict(Journal(tmp_path / "j").items()) == {}


async def test_a_close_waits_for_the_sync_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk, journal, put = await _first_put_syncing(tmp_path / "j", monkeypatch)
    closing = asyncio.create_task(journal.close())
    await asyncio.sleep(0)
    assert not closing.done()
    disk.release.set()
    await closing
    assert put.done()
    assert Journal(tmp_path / "j").get("first") == 0


async def test_compacting_while_records_arrive_keeps_every_one(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")

    async def writer(key: str) -> None:  # each put made while the last batch is written
        for i in range(60):
            await journal.put(key, i)

    await asyncio.gather(*[writer(f"k{n}") for n in range(50)])  # 3,000 records: compacted
    assert (tmp_path / "j").stat().st_size < 50 * 60 * 8
    assert dict(Journal(tmp_path / "j").items()) == {f"k{n}": 59 for n in range(50)}


async def test_the_journal_files_of_a_process_share_their_trips_to_the_disk_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a trip to a thread each per batch cost the loop more than the writes)
    trips: list[int] = []
    real = group_commit.write_and_sync

    def counted(writes: list[group_commit.Write]) -> None:
        trips.append(len(writes))
        real(writes)

    monkeypatch.setattr(group_commit, "write_and_sync", counted)
    journals = [Journal(tmp_path / f"j{i}") for i in range(20)]
    await asyncio.gather(*[j.put("k", i) for i, j in enumerate(journals)])
    assert trips == [20]  # one trip: each written, then each synced
    for i in range(20):
        assert Journal(tmp_path / f"j{i}").get("k") == i


async def test_the_journals_of_one_file_cost_one_write_and_one_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's logical slaves keep their journals in one file: what they all put in
    a turn is one write and one fdatasync (twenty files synced one after another cost
    1 ms of CPU a trip here, and 10-40 times the wall time of one)."""
    disk = HeldSync(monkeypatch)
    disk.release.set()
    writes: list[int] = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(fd) or real_write(fd, data))
    file = JournalFile(tmp_path / "journal")
    journals = [file.journal(f"slave-{i}/{kind}") for i in range(10) for kind in ("t", "u")]
    await asyncio.gather(*[j.put("k", i) for i, j in enumerate(journals)])
    assert (len(writes), disk.calls) == (1, 1)
    for j in journals[::2]:
        j.discard("k")
    await asyncio.gather(*[j.close() for j in journals])
    again = JournalFile(tmp_path / "journal")
    assert [again.journal(f"slave-{i}/t").get("k") for i in range(3)] == [None, None, None]
    assert [again.journal(f"slave-{i}/u").get("k") for i in range(3)] == [1, 3, 5]


async def test_a_journal_that_was_a_file_of_its_own_is_moved_into_the_process_file(
    tmp_path: Path,
) -> None:
    """A slave upgraded in place finds the tasks and updates its last run journaled in
    files of their own: they are moved into its process's file, and the old file goes
    (so that nothing reads it again after newer records were made)."""
    old = Journal(tmp_path / "slave-0" / "tasks.journal")
    await old.put("fw/t1", {"state": "TASK_RUNNING"})
    await old.put("fw/t2", {"state": "TASK_RUNNING"})
    await old.drop("fw/t1")
    await old.close()
    file = JournalFile(tmp_path / "journal")
    tasks = file.journal("slave-0/tasks.journal")
    assert dict(tasks.items()) == {"fw/t2": {"state": "TASK_RUNNING"}}
    assert not (tmp_path / "slave-0" / "tasks.journal").exists()
    await tasks.put("fw/t3", {"state": "TASK_STAGING"})
    again = JournalFile(tmp_path / "journal").journal("slave-0/tasks.journal")
    assert sorted(k for k, _ in again.items()) == ["fw/t2", "fw/t3"]
    await tasks.close()


_CRASHING_WRITER = """
import asyncio, sys
from pathlib import Path
from protocol.journal import JournalFile

async def main():
    file = JournalFile(Path(sys.argv[1]))
    async def writer(name):
        journal = file.journal(name)
        for i in range(100_000):
            await journal.put(f"k{i}", i)
            print(name, i, flush=True)  # acknowledged: what a slave would now send
    await asyncio.gather(*[writer(f"s{n}/tasks") for n in range(5)])

asyncio.run(main())
"""


async def test_what_was_acknowledged_survives_a_kill_between_write_and_acknowledgement(
    tmp_path: Path,
) -> None:
    """Five journals of one file write as fast as they can, each put acknowledged (a
    line printed) only once it returned; killed -9 at an arbitrary moment, the file
    holds every record acknowledged, and loads."""
    path = tmp_path / "journal"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASHING_WRITER, str(path), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    acknowledged: dict[str, int] = {}
    try:
        while len(acknowledged) < 5 or min(acknowledged.values()) < 300:
            line = await within(child.stdout.readline(), 30)
            name, i = line.decode().split()
            acknowledged[name] = int(i)
    finally:
        child.kill()
        await child.wait()
    file = JournalFile(path)
    for name, last in acknowledged.items():
        journal = file.journal(name)
        assert all(journal.get(f"k{i}") == i for i in range(last + 1)), name


async def test_a_journal_past_msgpacks_default_buffer_loads(tmp_path: Path) -> None:
    """A slave's journal over 100 MiB (an executor's flood of updates, before they were
    bounded) once made its slave unable to start: the loader fed the whole file to one
    msgpack buffer of 100 MiB. It is read a chunk at a time."""
    path = tmp_path / "j"
    record = msgpack.packb(["put", "k", b"x" * (4 << 20)], use_bin_type=True)
    records = [record.replace(b"\xa1k", f"\xa1{i % 10}".encode("latin-1"), 1) for i in range(27)]
    path.write_bytes(b"".join(records))  # 108 MiB of puts of ten keys
    assert path.stat().st_size > 100 << 20
    journal = Journal(path)
    assert sorted(k for k, _ in journal.items()) == [str(i) for i in range(10)]
    assert path.stat().st_size > 100 << 20  # (nothing cut: every record was whole)


async def test_bytes_that_are_no_msgpack_past_the_last_record_are_cut(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    await journal.put("kept", "yes")
    await journal.close()
    whole = (tmp_path / "j").read_bytes()
    (tmp_path / "j").write_bytes(whole + b"\xc1" * 64 + b"more")  # (0xc1: never msgpack)
    assert dict(Journal(tmp_path / "j").items()) == {"kept": "yes"}
    assert (tmp_path / "j").read_bytes() == whole


async def test_it_compacts_by_bytes_as_well_as_by_records(tmp_path: Path) -> None:
    """A few large records put and dropped (updates a framework acknowledged) leave no
    large file behind: the file is rewritten once it holds four times its live bytes
    (and 4 MiB)."""
    path = tmp_path / "j"
    journal = Journal(path)
    await journal.put("small", "kept")
    for i in range(40):  # 40 MiB through it, 80 records: far below the record count
        await journal.put(f"big{i}", b"x" * (1 << 20))
        await journal.drop(f"big{i}")
    await journal.close()
    assert path.stat().st_size < 6 << 20
    assert dict(Journal(path).items()) == {"small": "kept"}
