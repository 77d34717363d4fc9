"""Passive memory files (chat.md, Passive memory): format, ordering, concurrency, repair."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.errors import StorageError, UnsafeIdError
from rolecall.memory import MemoryFiles
from rolecall.session.state import TranscriptMessage
from rolecall.storage.in_memory import InMemoryStore
from tests.helpers import logged, world_from

pytestmark = pytest.mark.anyio

KEYS = {"role", "content", "name", "message_id", "ts"}


def chat_world(scripts: dict[str, list[str]], **settings: Any) -> Any:
    return world_from(
        {
            "name": "chat",
            "model": "scripted",
            "settings": settings,
            "roles": [{"id": rid, "script": lines} for rid, lines in scripts.items()],
        }
    )


@asynccontextmanager
async def with_memory(
    world: Any, data_dir: Path, *, store: InMemoryStore | None = None, session_id: str | None = None
) -> AsyncIterator[rolecall.Session]:
    """``world`` opened with ``data_dir``: its agents' memory files in ``data_dir/memory``,
    the session in ``store`` (a new in-memory one: the SQLite store is asyncio's only)."""
    store = store or InMemoryStore()
    async with rolecall.open_session(
        world, data_dir=data_dir, store=store, session_id=session_id
    ) as session:
        yield session


def lines_of(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.split(b"\n")[:-1]]


def message(n: int, content: str = "x", sender: str = "human") -> TranscriptMessage:
    kind = "human" if sender == "human" else "system" if sender == "system" else "agent"
    return TranscriptMessage(
        id=f"m{n}", sender=sender, kind=kind, content=content, ts=datetime.now(UTC)
    )


def role_of(entry: dict[str, Any]) -> tuple[str, str, str]:
    return entry["role"], entry["name"], entry["content"]


# ------------------------------------------------------------------- format
async def test_every_agent_saves_every_message_once_in_order_with_the_published_text(
    tmp_path: Path,
) -> None:
    memory = MemoryFiles(tmp_path / "memory")
    world = chat_world({"a": ["a: hello"], "b": ["b: hi"], "c": ["c: hey"]})
    async with with_memory(world, tmp_path) as session:
        await session.say("good morning")
    transcript = session.transcript
    assert [m.id for m in transcript] == ["m1", "m2", "m3", "m4"]
    for agent in ("a", "b", "c"):
        path = tmp_path / "memory" / session.session_id / f"{agent}.jsonl"
        entries = lines_of(path)
        assert all(set(e) == KEYS for e in entries)
        assert [e["message_id"] for e in entries] == ["m1", "m2", "m3", "m4"]
        assert [e["content"] for e in entries] == [m.content for m in transcript]
        assert [e["ts"] for e in entries] == [m.ts.isoformat() for m in transcript]
        assert [(e["role"], e["name"]) for e in entries] == [
            ("user", "human"),
            *(("assistant" if s == agent else "user", s) for s in ("a", "b", "c")),
        ]
        datetime.fromisoformat(entries[0]["ts"])
        assert memory.read(session.session_id, agent) == entries


async def test_memory_holds_the_text_as_published_and_system_messages(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path / "memory")
    world = chat_world({"a": ["@b ping"], "b": ["@b: pong"]}, turn_limit=1)  # b's @b stripped
    async with with_memory(world, tmp_path) as session:
        await session.say("@a go")
    b_entries = memory.read(session.session_id, "b")
    assert [role_of(e) for e in b_entries] == [
        ("user", "human", "@a go"),
        ("user", "a", "@b ping"),
        ("assistant", "b", "@a pong"),  # stripped and auto-mentioned, as published
        ("system", "system", "@human turn limit reached: a made 1 LLM calls without human input"),
    ]
    a_entries = memory.read(session.session_id, "a")
    assert [e["role"] for e in a_entries] == ["user", "assistant", "user", "system"]


async def test_content_with_newlines_and_unicode_separators_stays_one_line(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    text = 'line one\nline two\u2028still two\r\nthree "quoted" é 🌍'
    await memory.record("s1", ["a"], message(1, text))
    assert (tmp_path / "s1" / "a.jsonl").read_bytes().count(b"\n") == 1
    assert memory.read("s1", "a")[0]["content"] == text


async def test_a_session_opened_again_saves_nothing_twice(tmp_path: Path) -> None:
    store = InMemoryStore()
    world = chat_world({"a": ["hi"]})
    async with with_memory(world, tmp_path, store=store) as session:
        await session.say("hello")
    async with rolecall.resume(session.session_id, data_dir=tmp_path, store=store) as again:
        await again.say("@a again")
    memory = MemoryFiles.in_data_dir(tmp_path)
    ids = [e["message_id"] for e in memory.read(session.session_id, "a")]
    assert ids == ["m1", "m2", "m3", "m4"]


async def test_unsafe_ids_never_become_paths(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path / "memory")
    with pytest.raises(UnsafeIdError):
        await memory.record("../escape", ["a"], message(1))
    with pytest.raises(UnsafeIdError):
        await memory.record("s1", ["../../a"], message(1))
    with pytest.raises(UnsafeIdError):
        memory.read("s1", "a/b")
    assert not (tmp_path / "memory").exists()


def test_reading_or_clearing_a_missing_file(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    assert memory.read("s1", "a") == []
    assert memory.clear("s1", "a") is None


# --------------------------------------------------------------- concurrency
async def test_fifty_sessions_at_once_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    scripts = {"a": ["@b ping {n}", "done {n}"], "b": ["pong {n}"], "c": ["c {n}"]}
    store = InMemoryStore()
    sessions: list[rolecall.Session] = []

    async def talk(session_id: str) -> None:
        world = chat_world(scripts)
        async with with_memory(world, tmp_path, store=store, session_id=session_id) as session:
            sessions.append(session)
            await session.say("hello everyone")
            await session.say("@c and you?")
            await session.say("@a once more")

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(talk, f"s{i:02d}")
    sessions.sort(key=lambda s: s.session_id)

    folders = sorted(p.name for p in (tmp_path / "memory").iterdir())
    assert folders == [s.session_id for s in sessions]
    for session in sessions:
        expected = [m.id for m in session.transcript]
        assert len(expected) > 8
        files = sorted(p.name for p in (tmp_path / "memory" / session.session_id).iterdir())
        assert files == ["a.jsonl", "b.jsonl", "c.jsonl"]
        for agent in ("a", "b", "c"):
            entries = lines_of(tmp_path / "memory" / session.session_id / f"{agent}.jsonl")
            ids = [e["message_id"] for e in entries]
            assert len(entries) == len(expected)
            assert ids == expected
            assert Counter(ids).most_common(1)[0][1] == 1
            assert sum(e["role"] == "assistant" for e in entries) == sum(
                m.sender == agent for m in session.transcript
            )


async def test_concurrent_appends_to_one_file_are_serialised(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    big = "y" * 20_000  # larger than a pipe buffer: interleaved writes would show
    async with anyio.create_task_group() as tg:
        for n in range(1, 201):
            tg.start_soon(memory.record, "s1", ["a", "b"], message(n, f"{n} {big}"))
    for agent in ("a", "b"):
        entries = lines_of(tmp_path / "s1" / f"{agent}.jsonl")
        assert sorted(int(e["message_id"][1:]) for e in entries) == list(range(1, 201))
        assert all(e["content"] == f"{e['message_id'][1:]} {big}" for e in entries)
    assert not (tmp_path / "s1" / "a.jsonl.torn").exists()


async def test_reads_during_appends_never_see_or_repair_a_line_being_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryFiles(tmp_path)
    big = "z" * 200_000
    seen: list[int] = []

    async def reader() -> None:
        for _ in range(40):
            entries = await anyio.to_thread.run_sync(memory.read, "s1", "a")
            assert all(e["content"].endswith(big) for e in entries)
            seen.append(len(entries))

    with caplog.at_level(logging.DEBUG, logger="rolecall"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for n in range(1, 41):
                tg.start_soon(memory.record, "s1", ["a"], message(n, f"{n} {big}"))
    logs = logged(caplog)
    assert seen == sorted(seen)  # reads only ever see whole, growing files
    assert len(lines_of(tmp_path / "s1" / "a.jsonl")) == 40
    assert not (tmp_path / "s1" / "a.jsonl.torn").exists()
    assert [log for log in logs if log["log_level"] == "warning"] == []


# --------------------------------------------------------------------- repair
def torn_file(path: Path) -> bytes:
    whole = [
        {"role": "user", "content": "one", "name": "human", "message_id": "m1", "ts": "t"},
        {"role": "assistant", "content": "two", "name": "a", "message_id": "m2", "ts": "t"},
    ]
    body = "".join(json.dumps(e) + "\n" for e in whole).encode()
    tail = b'{"role": "user", "content": "thr'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body + tail)
    return tail


async def test_a_torn_last_line_is_moved_aside_before_the_next_append(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryFiles(tmp_path)
    path = tmp_path / "s1" / "a.jsonl"
    tail = torn_file(path)
    with caplog.at_level(logging.DEBUG, logger="rolecall"):
        await memory.record("s1", ["a"], message(3, "three"))
        await memory.record("s1", ["a"], message(4, "four"))
    logs = logged(caplog)
    assert [e["message_id"] for e in lines_of(path)] == ["m1", "m2", "m3", "m4"]
    assert (tmp_path / "s1" / "a.jsonl.torn").read_bytes() == tail + b"\n"
    repaired = [log for log in logs if log["event"] == "memory_torn_line_repaired"]
    assert len(repaired) == 1
    assert repaired[0]["log_level"] == "warning" and repaired[0]["file"] == str(path)


def test_a_torn_last_line_is_repaired_when_first_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryFiles(tmp_path)
    path = tmp_path / "s1" / "a.jsonl"
    tail = torn_file(path)
    (tmp_path / "s1" / "a.jsonl.torn").write_bytes(b"older torn bytes\n")
    with caplog.at_level(logging.DEBUG, logger="rolecall"):
        entries = memory.read("s1", "a")
    logs = logged(caplog)
    assert [e["content"] for e in entries] == ["one", "two"]
    assert path.read_bytes().endswith(b"\n") and len(lines_of(path)) == 2
    # appended to the .torn file: nothing is lost
    assert (tmp_path / "s1" / "a.jsonl.torn").read_bytes() == b"older torn bytes\n" + tail + b"\n"
    assert [log["event"] for log in logs] == ["memory_torn_line_repaired"]


def test_a_file_that_is_one_torn_line_is_emptied(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    path = tmp_path / "s1" / "a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00\x00\x00")  # a zero-filled tail after a power loss
    assert memory.read("s1", "a") == []
    assert path.read_bytes() == b""
    assert (tmp_path / "s1" / "a.jsonl.torn").read_bytes() == b"\x00\x00\x00\n"


def test_invalid_lines_are_skipped_and_reported_when_reading(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemoryFiles(tmp_path)
    path = tmp_path / "s1" / "a.jsonl"
    path.parent.mkdir(parents=True)
    good = json.dumps(
        {"role": "user", "content": "ok", "name": "human", "message_id": "m1", "ts": "t"}
    )
    path.write_bytes(f"{good}\nnot json\n[1, 2]\n\xff\n{good}\n".encode("latin-1"))
    with caplog.at_level(logging.DEBUG, logger="rolecall"):
        entries = memory.read("s1", "a")
    logs = logged(caplog)
    assert [e["content"] for e in entries] == ["ok", "ok"]
    skipped = [log for log in logs if log["event"] == "memory_line_skipped"]
    assert [log["line"] for log in skipped] == [2, 3, 4]
    assert all(log["log_level"] == "warning" and log["file"] == str(path) for log in skipped)
    assert path.read_bytes().count(b"\n") == 5  # reading never deletes anything


# ---------------------------------------------------------------------- clear
async def test_clear_archives_the_file_beside_it(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    await memory.record("s1", ["a", "b"], message(1, "before"))
    archive = memory.clear("s1", "a")
    assert archive is not None and archive.parent == tmp_path / "s1"
    assert re.fullmatch(r"a\.\d{8}T\d{12}Z\.jsonl\.archived", archive.name)
    assert [e["content"] for e in lines_of(archive)] == ["before"]
    assert not (tmp_path / "s1" / "a.jsonl").exists()
    assert memory.read("s1", "a") == []
    assert [e["content"] for e in memory.read("s1", "b")] == ["before"]  # others untouched
    await memory.record("s1", ["a", "b"], message(2, "after"))
    assert [e["content"] for e in memory.read("s1", "a")] == ["after"]
    second = memory.clear("s1", "a")
    assert second is not None and second != archive and archive.exists()
    assert memory.clear("s1", "a") is None


# --------------------------------------------------------------------- errors
def make_read_only(folder: Path) -> None:
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.access(folder, os.W_OK):
        folder.chmod(stat.S_IRWXU)
        pytest.skip("chmod does not stop this user from writing (running as root)")


async def test_a_read_only_directory_raises_storage_error(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    await memory.record("s1", ["a"], message(1))
    make_read_only(tmp_path / "s1")
    try:
        with pytest.raises(StorageError, match=r"s1/b\.jsonl.*[Pp]ermission denied"):
            await memory.record("s1", ["b"], message(2))
        with pytest.raises(StorageError, match=r"s1/a\.jsonl.*[Pp]ermission denied"):
            memory.clear("s1", "a")
    finally:
        (tmp_path / "s1").chmod(stat.S_IRWXU)


@pytest.mark.skipif(
    not os.path.exists("/dev/full"), reason="needs /dev/full to simulate a full disk"
)
async def test_a_full_disk_raises_storage_error_naming_the_file(tmp_path: Path) -> None:
    memory = MemoryFiles(tmp_path)
    (tmp_path / "s1").mkdir()
    (tmp_path / "s1" / "a.jsonl").symlink_to("/dev/full")
    with pytest.raises(StorageError, match=r"s1/a\.jsonl: No space left on device") as info:
        await memory.record("s1", ["a"], message(1))
    assert isinstance(info.value.__cause__, OSError)


async def test_a_blocked_folder_raises_storage_error_not_os_error(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("a file where the folder should be")
    memory = MemoryFiles(tmp_path / "memory")
    with pytest.raises(StorageError, match=r"memory folder .*memory/s1"):
        await memory.record("s1", ["a"], message(1))
    with pytest.raises(StorageError, match=r"memory/s1/a\.jsonl"):
        memory.read("s1", "a")


async def test_a_storage_error_reaches_the_caller_of_say(tmp_path: Path) -> None:
    (tmp_path / "memory").write_text("not a folder")
    with pytest.raises(StorageError):
        async with with_memory(chat_world({"a": ["hi"]}), tmp_path) as session:
            await session.say("hello")


def test_how_many_files_stay_open_follows_the_descriptor_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import resource

    from rolecall.memory import files

    for soft, expected in ((1024, 512), (100, 64), (1_000_000, 4096)):
        monkeypatch.setattr(resource, "getrlimit", lambda _which, s=soft: (s, s))
        assert files._max_open() == expected
    monkeypatch.setattr(resource, "getrlimit", lambda _w: (resource.RLIM_INFINITY,) * 2)
    assert files._max_open() == 4096
