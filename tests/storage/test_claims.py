"""One live session at a time goes on with a stored session (storage/claims.py).

Two processes resuming one session both appended its next message: the second's commit
failed on a duplicate key, after it had started. Now the second is refused before it
writes anything, and is told who holds the session; the claim ends with its holder
(closed, finished, or killed with SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import anyio
import pytest

import rolecall
from rolecall.api.entry import open_live
from rolecall.api.opening import Opening
from rolecall.errors import SessionInUse
from rolecall.storage.in_memory import InMemoryStore
from rolecall.storage.sqlite import SqliteStore
from tests.storage.test_resume_cli import cli, records, run

WORLD = """
name: relay
topic: relays
model: scripted
settings: {max_turns: 12}
roles:
  - {id: a, script: ["a speaks {n} at m{turn}"]}
  - {id: b, script: ["b answers {target} #{n}"]}
flow:
  steps:
    - {id: one, speaker: a}
    - {id: two, speaker: b, loop: {to: one, max: 100}}
"""


@pytest.fixture
def world(tmp_path: Path) -> Path:
    path = tmp_path / "relay.yaml"
    path.write_text(WORLD)
    return path


async def stepped(world: Path, home: Path, turns: int) -> str:
    """A stored session left after ``turns`` messages in step mode: its id."""
    async with rolecall.open_session(world, data_dir=home, mode="step") as session:
        for _ in range(turns):
            await session.step()
        return session.session_id


def paused_after(world: Path, home: Path, turns: int) -> str:
    return anyio.run(stepped, world, home, turns)


def contents(home: Path, sid: str) -> list[str]:
    with sqlite3.connect(home / "rolecall.db") as db:
        rows = db.execute("SELECT body FROM messages WHERE session_id = ? ORDER BY idx", (sid,))
        return [json.loads(body)["content"] for (body,) in rows]


def start_resume(sid: str, home: Path) -> subprocess.Popen[str]:
    """``rolecall resume SID --json`` at a slow pace, once its first message is out.

    Slow enough (about 12 s for the rest) that the commands refused meanwhile, each a
    new process, find it still running on a busy 2-CPU machine."""
    argv, env = cli("resume", sid, "--json", home=home, delay=0.25)
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line)["type"] == "message":
            return proc
    raise AssertionError(f"the resume printed no message: {proc.communicate()}")


def test_a_session_going_on_in_one_process_is_refused_to_another(
    world: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    sid = paused_after(world, home, 2)
    reference = tmp_path / "reference"
    whole = run("run", str(world), "--json", home=reference)
    expected = [r["content"] for r in records(whole.stdout) if r["type"] == "message"]

    first = start_resume(sid, home)
    try:
        for argv in (("resume", sid), ("sessions", "delete", sid), ("memory", "clear", sid, "a")):
            refused = run(*argv, home=home)
            assert refused.returncode == 1, (argv, refused.stderr)
            said = refused.stderr
            assert f"session {sid} is open in another process (pid {first.pid}" in said, said
            assert " resume`, since " in said and "nothing was written here" in said
            assert "Traceback" not in said
        _, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0, err
    # the refused commands changed nothing: the session is as one uninterrupted run, its
    # memory files are where they were, none archived
    assert contents(home, sid) == expected
    memory = home / "memory" / sid
    assert sorted(p.name for p in memory.iterdir()) == ["a.jsonl", "b.jsonl"]
    assert len((memory / "a.jsonl").read_text().splitlines()) == len(expected)
    assert run("sessions", "delete", sid, home=home).returncode == 0  # released at the end
    assert not list((home / "rolecall.db-claims").iterdir())


def test_a_killed_holder_leaves_no_claim_behind(world: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid = paused_after(world, home, 2)
    first = start_resume(sid, home)
    assert run("resume", sid, home=home).returncode == 1
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)  # and its pipes closed
    assert (home / "rolecall.db-claims" / sid).exists()  # its file stays, not its lock
    again = run("resume", sid, "--json", home=home)
    assert again.returncode == 0, again.stderr
    said = contents(home, sid)
    assert len(said) == 12 and len(set(said)) == 12  # every message once


@pytest.mark.anyio
async def test_the_api_refuses_a_second_live_session_until_the_first_closes(
    world: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    sid = await stepped(world, home, 2)
    async with rolecall.resume(sid, data_dir=home, mode="step") as first:
        with pytest.raises(
            rolecall.SessionInUse, match=f"open in this process \\(pid {os.getpid()}"
        ):
            async with rolecall.resume(sid, data_dir=home):
                pass
        await first.step()
    async with rolecall.resume(sid, data_dir=home) as second:
        result = await second.run()
    assert result.messages == 12 and result.stop_reason == "max_turns"


@pytest.mark.anyio
async def test_a_copy_read_before_another_went_on_is_refused(world: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    sid = await stepped(world, home, 2)
    async with SqliteStore(home / "rolecall.db") as store:
        stale = await store.load(sid)  # read, then another live session goes on with it
        async with rolecall.resume(sid, store=store, mode="step") as other:
            await other.step()
        with pytest.raises(SessionInUse, match="changed in the store after it was read here"):
            async with open_live(stale.world_model(), Opening(store=store, doc=stale)):
                pass
        # refused before it wrote anything, and without keeping the claim
        assert len((await store.load(sid)).messages) == 3
        async with rolecall.resume(sid, store=store) as again:
            await again.run()


@pytest.mark.anyio
async def test_a_memory_store_holds_one_live_session_per_id(world: Path) -> None:
    store = InMemoryStore()
    async with rolecall.open_session(world, store=store, session_id="one", mode="step") as s:
        await s.step()
        doc = await store.load("one")
        with pytest.raises(SessionInUse, match="session one is open in this process"):
            async with open_live(doc.world_model(), Opening(store=store, doc=doc)):
                pass
    async with open_live(doc.world_model(), Opening(store=store, doc=doc)) as again:
        await again.step()
    assert len((await store.load("one")).messages) == 2


def test_a_claim_is_taken_and_released_as_a_file_lock(tmp_path: Path) -> None:
    from rolecall.storage.claims import FileClaims

    folder = tmp_path / "claims"
    mine, theirs = FileClaims(folder), FileClaims(folder)  # two stores of one database
    claim = mine.claim("s1")
    with pytest.raises(SessionInUse, match=r"open in this process \(pid"):
        theirs.claim("s1")
    other = theirs.claim("s2")  # another session: no conflict
    claim.release()
    claim.release()  # twice: nothing more
    assert not (folder / "s1").exists()
    theirs.claim("s1").release()
    mine.release_all()
    other.release()
    assert sorted(os.listdir(folder)) == []
