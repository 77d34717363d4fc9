# ruff: noqa: F811 (the fixtures imported from test_litellm_model)
"""Reply hygiene and the reply cap end to end (real-models.md): through the loopback
OpenAI-compatible server with both clients, through the built-in models, and through the
``rolecall`` command's ``--json``. What was cut is a ``system/trim`` event and never part
of the stored message; a cut reply says why on ``sse/end`` and on its message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

import rolecall
from rolecall.llm.registry import aclose_clients
from tests.helpers import Recorder, opened, world_from
from tests.llm.openai_server import OpenAITestServer, Reply
from tests.llm.test_litellm_model import (  # noqa: F401 (fixtures)
    KEY_ENV,
    anyio_backend,
    outbound,
    server,
    srv,
)

pytestmark = pytest.mark.anyio

TAGGED = "[teacher] Rome fell slowly.\nSam: When I was a young boy of 16 I went there."


def classroom(
    srv: OpenAITestServer, client: str, **settings: Any
) -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    return opened(
        world_from(
            {
                "name": "classroom",
                "model": "openai/test-model",
                "settings": {
                    "client": client,
                    "api_base": srv.base_url,
                    "api_key_env": KEY_ENV,
                    "retries": 0,
                    **settings,
                },
                "roles": [
                    {"id": "teacher", "name": "Ms Rivera"},
                    {"id": "student", "name": "Sam"},
                ],
            }
        )
    )


def streamed(rec: Recorder, message_id: str) -> str:
    return "".join(c.delta for c in rec.of("sse", "chunk") if c.message_id == message_id)


@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_a_reply_speaking_for_another_is_cut_and_its_tag_removed(
    srv: OpenAITestServer, client: str
) -> None:
    """The server ignores the stop sequences (as some do): the cut is applied to the
    stream anyway; neither the tag nor the student's line is shown or stored."""
    srv.queue(Reply(TAGGED, honour_stop=False))
    async with classroom(srv, client) as (session, rec):
        try:
            await session.say("@teacher why did Rome fall?")
        finally:
            await aclose_clients()

        (sent,) = srv.requests
        assert sent.body["max_tokens"] == 1024  # the default cap, on every request
        assert "\nhuman:" in sent.body["stop"] and "\n[student]" in sent.body["stop"]
        reply = session.transcript[-1]
        assert (reply.sender, reply.content) == ("teacher", "Rome fell slowly.")
        assert reply.finish_reason == "other_speaker"
        trims = [(t.message_id, t.kind, t.removed, t.shown) for t in rec.of("system", "trim")]
        assert trims[0] == (reply.id, "tag", "[teacher] ", 0)
        # the student's line: what had arrived when the cut was known (the stream then closed)
        (_, kind, removed, shown) = trims[1]
        assert (kind, shown) == ("other_speaker", 0)
        assert removed.startswith("\nSam:")
        assert TAGGED[len("[teacher] Rome fell slowly.") :].startswith(removed)
        (end,) = rec.of("sse", "end")
        assert end.finish_reason == "other_speaker"
        assert streamed(rec, reply.id) == "Rome fell slowly."
        (message,) = [m for m in rec.of("messages", "message") if m.sender == "teacher"]
        assert message.finish_reason == "other_speaker"


@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_a_server_honouring_the_stop_sequence_ends_the_reply_itself(
    srv: OpenAITestServer, client: str
) -> None:
    srv.queue(Reply("Rome fell slowly.\nSam: and I was there.", completion_tokens=4))
    async with classroom(srv, client) as (session, rec):
        try:
            await session.say("@teacher why did Rome fall?")
        finally:
            await aclose_clients()

        reply = session.transcript[-1]
        assert reply.content == "Rome fell slowly."
        assert reply.finish_reason is None  # it ended by itself (the server's "stop")
        assert rec.of("system", "trim") == []  # nothing reached rolecall to take out
        assert reply.output_tokens == 4  # the server's usage


@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_a_reply_cut_by_its_cap_says_length(srv: OpenAITestServer, client: str) -> None:
    srv.queue(Reply(" ".join(f"word{i}" for i in range(40)), completion_tokens=40))
    async with classroom(srv, client, max_reply_tokens=5) as (session, rec):
        try:
            await session.say("@teacher go on")
        finally:
            await aclose_clients()

        (sent,) = srv.requests
        assert sent.body["max_tokens"] == 5
        reply = session.transcript[-1]
        assert reply.content.split() == ["word0", "word1", "word2", "word3", "word4"]
        assert (reply.finish_reason, reply.output_tokens) == ("length", 5)
        (end,) = rec.of("sse", "end")
        assert end.finish_reason == "length"


@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_hygiene_off_stores_the_reply_as_the_model_wrote_it(
    srv: OpenAITestServer, client: str
) -> None:
    srv.queue(Reply(TAGGED, honour_stop=False))
    async with classroom(srv, client, reply_hygiene="off") as (session, rec):
        try:
            await session.say("@teacher why did Rome fall?")
        finally:
            await aclose_clients()

        (sent,) = srv.requests
        assert "stop" not in sent.body
        assert session.transcript[-1].content == TAGGED
        assert rec.of("system", "trim") == []


@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_a_looping_reply_is_ended_after_its_second_occurrence_and_the_stream_closed(
    srv: OpenAITestServer, client: str
) -> None:
    loop = "The motion is sound and I stand by it. " * 30
    srv.queue(Reply(loop, delay=0.01))
    async with classroom(srv, client) as (session, rec):
        try:
            await session.say("@teacher again?")
        finally:
            await aclose_clients()

        reply = session.transcript[-1]
        said = "The motion is sound and I stand by it."
        assert reply.content == f"{said} {said}"
        assert reply.finish_reason == "repetition"
        (trim,) = rec.of("system", "trim")
        assert trim.kind == "repetition" and trim.removed.lstrip().startswith(said)
        # the third occurrence was streamed before it was known: the trim says how much
        assert streamed(rec, reply.id) == f"{said} {said}" + trim.removed[: trim.shown]
        assert trim.shown > 0
        # the model was not read to its end: far fewer words than the 270 it would send
        assert len(trim.removed.split()) < 40


# -- the built-in models ----------------------------------------------------------------------


async def test_scripted_replies_are_filtered_and_capped() -> None:
    world = world_from(
        {
            "name": "scripted-hygiene",
            "model": "scripted",
            "roles": [
                {"id": "a", "name": "Alice", "script": ["Alice: fine.\nBob: not fine at all"]},
                {
                    "id": "b",
                    "name": "Bob",
                    "max_reply_tokens": 3,
                    "script": ["a reply much longer than three tokens by any estimate"],
                },
            ],
            "flow": {"steps": [{"id": "one", "speaker": "a"}, {"id": "two", "speaker": "b"}]},
        }
    )
    async with opened(world) as (session, rec):
        await session.run()
        first, second = session.transcript
        assert (first.content, first.finish_reason) == ("fine.", "other_speaker")
        assert first.cost_usd == 0.0  # closed before its usage, still priced (a budget counts it)
        assert [t.kind for t in rec.of("system", "trim")] == ["tag", "other_speaker"]
        assert second.content == "a reply much"  # 12 characters: 3 tokens by the estimate
        assert (second.finish_reason, second.output_tokens) == ("length", 3)


async def test_offline_replies_honour_the_cap() -> None:
    world = world_from(
        {
            "name": "offline-cap",
            "topic": "whether cities should ban cars",
            "settings": {"max_reply_tokens": 6},
            "roles": [{"id": "a"}],
            "flow": {"steps": [{"id": "one", "speaker": "a"}]},
        }
    )
    async with opened(world) as (session, rec):
        await session.run()
        (reply,) = session.transcript
        assert reply.output_tokens <= 6
        assert reply.finish_reason == "length"
        assert [e.finish_reason for e in rec.of("sse", "end")] == ["length"]


# -- the command ------------------------------------------------------------------------------

WORLD = """\
name: tagged
model: scripted
roles:
  - id: a
    name: Alice
    script: ["[a] I think so.\\nUser: and what do I think?"]
  - id: b
    script: ["b {n}"]
flow:
  steps: [{id: one, speaker: a}, {id: two, speaker: b}]
"""


def test_the_command_shows_the_trims_and_the_finish_reason(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "world.yaml").write_text(WORLD)
    rolecall = Path(sys.executable).parent / "rolecall"
    env = {**os.environ, "ROLECALL_HOME": str(tmp_path / "data")}
    done = subprocess.run(
        [str(rolecall), "run", str(tmp_path / "w"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    trims = [(r["kind"], r["removed"]) for r in records if r["type"] == "trim"]
    assert trims == [("tag", "[a] "), ("other_speaker", "\nUser: ")]  # read up to the cut
    first, second = [r for r in records if r["type"] == "message"]
    assert (first["content"], first["finish_reason"]) == ("I think so.", "other_speaker")
    assert "finish_reason" not in second  # it ended by itself
    ends = [r["finish_reason"] for r in records if r["type"] == "end"]
    assert ends == ["other_speaker", "stop"]
