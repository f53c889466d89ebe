"""The journal slaves and a lone master keep: what was awaited is on disk, in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from protocol.journal import COMPACT_MIN, Journal


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


async def test_a_write_that_fails_raises_in_the_writer(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    journal = Journal(tmp_path / "file" / "j")  # its directory cannot be made
    with pytest.raises(OSError, match=r"Not a directory|File exists"):
        await journal.put("k", 1)
