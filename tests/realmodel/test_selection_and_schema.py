"""Speaker selection and structured output on the real model, both clients (issue 49,
item 5): every choice its system/selection event, the selector's calls capped; a schema
role's message carries valid data or data_error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults import Cli, assert_intact, only_session, stored
from tests.realmodel import CLIENTS, events_of, real_world
from tests.realmodel.promises import (
    CAP,
    run_world,
)
from tests.realmodel.proxy import RecordingProxy

# a reply needs 2-10 s of CPU here; a world of a few replies and a litellm import fits
pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]


# ------------------------------------------------------------------ issue 49, item 5
SELECTOR = "You moderate a panel. Name the panellist who should speak next."
ROUNDS = 2


def selector_exchanges(record: RecordingProxy) -> list[Any]:
    """The selector's requests (its instructions are their system message)."""
    return [
        x
        for x in record.record.exchanges
        if x.body["messages"] and x.body["messages"][0].get("content") == SELECTOR
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_the_real_model_chooses_the_speakers(
    client: str, record: RecordingProxy, cli: Cli, tmp_path: Path
) -> None:
    """A selection chat (`speaker_selection: model`) whose selector is the real model:
    every choice is a `system/selection` event made before its speaker's turn; the
    chosen speaker is the candidate its answer names (read leniently) or, when it names
    none after its retry, the fallback; the speaker that just spoke is never chosen; at
    most `max_rounds` selected turns, then the floor is the human's and the chat ends."""
    from rolecall.routing.selection import fallback, read_answer

    world = real_world(
        "panel", tmp_path, base_url=record.base_url, client=client, cap=CAP,
        speaker_selection="model", max_rounds=ROUNDS, selector={"instructions": SELECTOR},
    )  # fmt: skip
    line = "What cools a street fastest in a heat wave?\n"
    done = cli.run("chat", str(world), "--json", "-q", stdin=line, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cli.refused_connections() == []
    events = events_of(done.stdout)
    import rolecall

    roles = rolecall.load_world(world).roles
    order = [r.id for r in roles]
    names = {r.id: r.display_name for r in roles}
    spoken = [e for e in events if (e["topic"], e["type"]) == ("messages", "message")]
    selections = [e for e in events if (e["topic"], e["type"]) == ("system", "selection")]
    agents = [m for m in spoken if m["sender"] != "human"]
    assert 1 <= len(agents) <= ROUNDS, [m["sender"] for m in agents]  # no livelock
    assert len(selections) >= len(agents)
    last = "human"
    asked = 0
    for choice in selections:
        assert last not in choice["candidates"], choice  # the excluded speaker
        assert choice["chosen"] is not None and choice["chosen"] != last
        assert set(choice["candidates"]) <= set(order)
        answers = choice["answers"]
        if choice["by"] == "model":
            assert answers and choice["answer"] == answers[-1]
            assert read_answer(choice["answer"], choice["candidates"], names) == choice["chosen"]
            assert all(read_answer(a, choice["candidates"], names) is None for a in answers[:-1])
        elif choice["by"] == "fallback":  # it named nobody, asked twice (or a call failed)
            assert all(read_answer(a, choice["candidates"], names) is None for a in answers)
            assert choice["chosen"] == fallback(order, choice["candidates"], last)
        else:  # a reply's first @mention names a candidate: no selector asked
            assert choice["by"] == "mention" and answers == [], choice
        asked += len(answers)
        # the chosen speaker answers next: its message follows this event
        after = events[events.index(choice) + 1 :]
        following = next(e for e in after if (e["topic"], e["type"]) == ("messages", "message"))
        assert following["sender"] == choice["chosen"], (choice, following)
        last = choice["chosen"]
    # every selector answer came from the server, each call capped; its tokens counted
    calls = selector_exchanges(record)
    assert len(calls) == asked >= 1
    replies = [x for x in record.record.exchanges if x not in calls]
    assert len(replies) == len([e for e in events if (e["topic"], e["type"]) == ("sse", "end")])
    for call, answer in zip(calls, [a for c in selections for a in c["answers"]], strict=True):
        assert (
            call.status == 200
            and 0 < (call.body.get("max_tokens") or call.body.get("max_completion_tokens")) <= CAP
        )
        assert call.text.strip() == answer.strip()
    for choice in selections:
        ours = calls[: len(choice["answers"])]
        calls = calls[len(choice["answers"]) :]
        if ours and all(x.usage is not None for x in ours):
            assert choice["output_tokens"] == sum(x.usage["completion_tokens"] for x in ours)
            assert choice["input_tokens"] == sum(x.usage["prompt_tokens"] for x in ours)
    s = stored(cli.home, only_session(cli.home))
    assert_intact(s)
    assert [m["sender"] for m in s.messages if m["kind"] == "agent"] == [
        m["sender"] for m in agents
    ]


GRADE_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["apple", "pear", "plum"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["verdict", "score"],
}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_role_with_a_schema_on_the_real_model(
    client: str, record: RecordingProxy, cli: Cli, tmp_path: Path
) -> None:
    """A role with `output: {schema}`: its request asks for JSON (the lean client sends
    the schema as `response_format`), a reply that does not validate gets one repair
    round, and the message carries `data` valid against the schema, or `data: null` with
    `data_error` and a warning. Whatever the model said, never both, never neither."""
    import jsonschema
    import yaml

    from tests.realmodel import KEY_ENV, real_model_script

    folder = tmp_path / f"graded-{client}"
    folder.mkdir()
    raw = {
        "name": "graded",
        "model": "offline",
        "topic": "which fruit tree to plant in a small garden",
        "roles": [{"id": "grader", "output": {"schema": GRADE_SCHEMA}}],
        "flow": {"steps": [{"id": "grade", "speaker": "grader"}]},
    }
    (folder / "world.yaml").write_text(yaml.safe_dump(raw), "utf-8")
    data = real_model_script().real_world_data(
        folder, base_url=record.base_url, client=client, cap=CAP, key_env=KEY_ENV
    )
    (folder / "world.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    events = run_world(cli, folder)
    (message,) = [e for e in events if (e["topic"], e["type"]) == ("messages", "message")]
    warnings = [e for e in events if (e["topic"], e["type"]) == ("system", "warning")]
    exchanges = record.record.exchanges
    if client == "http":  # the schema asked for as the OpenAI-compatible response_format
        fmt = exchanges[0].body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == GRADE_SCHEMA
        # llama-cpp-python's server refuses `json_schema` (HTTP 500 naming the field):
        # asked again at once with llama.cpp's form (`json_object` with the schema), and
        # with the form it took from then on
        refused = [x for x in exchanges if x.status != 200]
        assert [x.status for x in refused] in ([], [500]), [x.status for x in refused]
        exchanges = exchanges[len(refused) :]
        if refused:
            taken = {"type": "json_object", "schema": GRADE_SCHEMA}
            assert all(x.body.get("response_format") == taken for x in exchanges)
    assert 1 <= len(exchanges) <= 2, len(exchanges)  # the reply, perhaps one repair round
    for exchange in exchanges:
        asked = exchange.body.get("max_tokens") or exchange.body.get("max_completion_tokens")
        assert exchange.status == 200 and asked is not None and asked <= CAP

    def valid(text: str) -> bool:
        body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
        try:
            jsonschema.validate(json.loads(body), GRADE_SCHEMA)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True

    if valid(exchanges[0].text):  # no repair round for a valid reply
        assert len(exchanges) == 1
    if message.get("data") is not None:
        jsonschema.validate(message["data"], GRADE_SCHEMA)
        assert "data_error" not in message and valid(exchanges[-1].text)
    else:
        assert len(exchanges) == 2 and not valid(exchanges[-1].text)
        assert message["data_error"] and warnings
    s = stored(cli.home, only_session(cli.home))
    assert_intact(s)
    (kept,) = [m for m in s.messages if m["kind"] == "agent"]
    assert kept.get("data") == message.get("data")
    assert kept.get("data_error") == message.get("data_error")
