"""Replies with a shape (issue 49, selection.md): a role with ``output: {schema: ...}`` or
``output: json`` asks the provider for JSON (``response_format`` on the lean client), its
reply is validated, repaired once with the error shown, and stored with ``data`` or with
``data_error`` and a warning; offline gives schema-valid data, scripted a mapping; a
judge with a schema reads ``data``. Through the ``rolecall`` command and the loopback
OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.cli.test_run_cli import rolecall
from tests.llm.openai_server import OpenAITestServer, Reply

VERDICT = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["apple", "pear", "plum"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "sure": {"type": "boolean"},
        "share": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["verdict", "score"],
}


def run(tmp_path: Path, world: dict[str, Any], *args: str) -> list[dict[str, Any]]:
    folder = tmp_path / "shaped"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(yaml.safe_dump(world), encoding="utf-8")
    done = rolecall(
        "run",
        str(folder),
        "--json",
        "--data-dir",
        str(tmp_path / "d"),
        *args,
        env={"SHAPE_KEY": "sk-test"},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "message"]


def one_step(role: dict[str, Any], model: str = "offline", **settings: Any) -> dict[str, Any]:
    return {
        "name": "shaped",
        "topic": "which fruit tree to plant in a small garden",
        "model": model,
        "settings": settings,
        "roles": [role],
        "flow": {"steps": [{"id": "judge", "speaker": role["id"]}]},
    }


def test_offline_gives_data_valid_against_the_schema(tmp_path: Path) -> None:
    events = run(tmp_path, one_step({"id": "grader", "output": {"schema": VERDICT}}))
    (message,) = messages(events)
    jsonschema.validate(message["data"], VERDICT)
    assert json.loads(message["content"]) == message["data"]
    assert "data_error" not in message
    assert not [e for e in events if e["type"] == "warning"]


def test_a_scripted_mapping_is_the_reply_and_its_data(tmp_path: Path) -> None:
    role = {
        "id": "grader",
        "model": "scripted",
        "output": "json",
        "script": [{"verdict": "plum", "score": 3}],
    }
    (message,) = messages(run(tmp_path, one_step(role)))
    assert message["data"] == {"verdict": "plum", "score": 3}


def test_a_reply_still_invalid_after_its_repair_carries_its_error(tmp_path: Path) -> None:
    role = {
        "id": "grader",
        "model": "scripted",
        "output": {"schema": VERDICT},
        "script": ['{"verdict": "banana", "score": 3}'],
    }
    events = run(tmp_path, one_step(role))
    (message,) = messages(events)
    assert message["data"] is None
    assert message["data_error"].startswith("verdict: 'banana' is not one of")
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any("even after one repair" in w and "banana" in w for w in warnings), warnings
    # the stored session keeps both
    sid = events[0]["session_id"]
    out = tmp_path / "session.json"
    done = rolecall(
        "sessions", "export", sid, "--format", "json", "--out", str(out),
        "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = json.loads(out.read_text(encoding="utf-8"))["messages"][0]
    assert stored["data_error"] == message["data_error"]


@pytest.mark.parametrize(
    ("output", "asked"),
    [
        ({"schema": VERDICT}, {"type": "json_schema", "json_schema": {"name": "reply", "schema": VERDICT}}),
        ("json", {"type": "json_object"}),
    ],
)  # fmt: skip
def test_the_lean_client_asks_for_json_and_repairs_an_invalid_reply_once(
    tmp_path: Path, output: Any, asked: dict[str, Any]
) -> None:
    with OpenAITestServer() as server:
        server.queue(
            Reply('{"verdict": "apple", "score": 11}'),  # out of range
            Reply('```json\n{"verdict": "apple", "score": 9}\n```'),
        )
        world = one_step(
            {"id": "grader", "output": output},
            model="openai/gpt-4o-mini",
            client="http",
            api_base=server.base_url,
            api_key_env="SHAPE_KEY",
            retries=0,
        )
        events = run(tmp_path, world)
        bodies = [r.body for r in server.requests]
    (message,) = messages(events)
    assert all(b["response_format"] == asked for b in bodies)
    if output == "json":  # any object: the first reply was valid, so no repair was asked
        assert len(bodies) == 1
        assert message["data"] == {"verdict": "apple", "score": 11}
        return
    assert len(bodies) == 2
    repair = bodies[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"verdict": "apple", "score": 11}'}
    assert "score: 11 is greater than the maximum of 10" in repair[-1]["content"]
    assert message["data"] == {"verdict": "apple", "score": 9}
    # the repair's tokens are the message's too (the server's 11 + 7 per call)
    assert (message["input_tokens"], message["output_tokens"]) == (22, 14)


@pytest.mark.parametrize("required", [["scores"], ["scores", "comment"]])
def test_a_judge_with_a_schema_reads_its_data(tmp_path: Path, required: list[str]) -> None:
    schema = {
        "type": "object",
        "properties": {"scores": {"type": "object"}, "comment": {"type": "string"}},
        "required": required,
    }
    world = {
        "name": "judged",
        "model": "offline",
        "roles": [
            {"id": "pro"},
            # its reply always holds a JSON object with the scores; whether the judge
            # counts it depends on its data, valid against the schema or not
            {"id": "judge", "model": "scripted", "output": {"schema": schema},
             "script": [{"scores": {"strength": 7}}]},
        ],
        "judge": {"role": "judge", "after": ["argue"], "scores": ["strength"]},
        "flow": {"steps": [{"id": "argue", "speaker": "pro"}]},
    }  # fmt: skip
    events = run(tmp_path, world)
    judged = [(j["valid"], j["scores"]) for j in events if j["type"] == "judge"]
    if required == ["scores"]:
        assert judged == [(True, {"strength": 7.0})]
    else:  # asked twice (the judge's own retry), ignored both times
        assert judged == [(False, {}), (False, {})]
        errors = [j["verdict"]["error"] for j in events if j["type"] == "judge"]
        assert all("'comment' is a required property" in e for e in errors), errors


def test_a_server_that_refuses_the_response_format_is_asked_with_the_next_form(
    tmp_path: Path,
) -> None:
    """llama-cpp-python's server answers a `json_schema` response_format with an error
    naming the field (HTTP 500, tests/realmodel) and takes llama.cpp's `json_object` with
    a `schema`: the lean client asks again at once with the next form, at last with none
    (the prompt's words still ask for the JSON, and the reply is validated), and keeps
    the form the server took for the rest of the run, the repair round included."""
    from tests.llm.openai_server import Status

    refusal = "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"
    with OpenAITestServer() as server:
        server.queue(
            Status(500, refusal),
            Status(400, "response_format.schema is not supported"),
            Status(422, "unknown field response_format"),
            Reply('{"verdict": "apple", "score": 11}'),  # out of range: one repair round
            Reply('{"verdict": "pear", "score": 6}'),
        )
        world = one_step(
            {"id": "grader", "output": {"schema": VERDICT}},
            model="openai/gpt-4o-mini",
            client="http",
            api_base=server.base_url,
            api_key_env="SHAPE_KEY",
            retries=0,
        )
        events = run(tmp_path, world)
        bodies = [r.body for r in server.requests]
    (message,) = messages(events)
    assert message["data"] == {"verdict": "pear", "score": 6}
    assert [b.get("response_format") for b in bodies] == [
        {"type": "json_schema", "json_schema": {"name": "reply", "schema": VERDICT}},
        {"type": "json_object", "schema": VERDICT},
        {"type": "json_object"},
        None,
        None,
    ]
    assert "valid against this JSON Schema" in bodies[3]["messages"][-1]["content"]
