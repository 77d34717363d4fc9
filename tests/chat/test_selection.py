"""Speaker selection (issue 49, selection.md): a rule or a model chooses who speaks next,
never the excluded speaker, never in a loop; every choice is a ``system/selection``
event; a recorded session replays the same choices with no model.

Through the ``rolecall`` command, with a ``scripted`` selector for each way a selector
goes wrong (garbage, the excluded speaker, two names) and the loopback OpenAI-compatible
server for one that times out and for record/replay.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from rolecall.routing.selection import candidates, fallback, read_answer
from tests.cli.test_run_cli import rolecall
from tests.llm.openai_server import OpenAITestServer, Reply, Stall

ROLES = ["alice", "bob", "carol"]


def world(selector: dict[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    return {
        "name": "trio",
        "topic": "lunch",
        "model": "scripted",
        "settings": {
            "speaker_selection": "model",
            "selector": selector or {},
            **settings,
        },
        "roles": [
            {"id": rid, "description": f"{rid} likes lunch", "script": [f"{rid} says hi {{n}}"]}
            for rid in ROLES
        ],
    }


def chat(
    tmp_path: Path, data: dict[str, Any], said: str = "What shall we eat?", *extra: str
) -> list[dict[str, Any]]:
    folder = tmp_path / "trio"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    done = rolecall(
        "chat",
        str(folder),
        "--json",
        "--data-dir",
        str(tmp_path / "d"),
        *extra,
        stdin=said + "\n",
        env={"SEL_KEY": "sk-test"},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def speakers(events: list[dict[str, Any]]) -> list[str]:
    return [e["sender"] for e in events if e["type"] == "message" and e["sender"] in ROLES]


def selections(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "selection"]


def assert_never_excluded(events: list[dict[str, Any]]) -> None:
    """Each chosen speaker was a candidate, and no speaker followed itself."""
    said = speakers(events)
    for choice in selections(events):
        assert choice["chosen"] in choice["candidates"], choice
    assert all(a != b for a, b in itertools.pairwise(said)), said


def test_a_selector_answering_garbage_falls_back_in_role_order(tmp_path: Path) -> None:
    events = chat(tmp_path, world({"model": "scripted", "script": ["¯\\_(ツ)_/¯ no idea"]}))
    chosen = selections(events)
    assert [c["by"] for c in chosen] == ["fallback"] * 3  # max_rounds: 3, then the human
    # asked twice each time (one retry), both answers kept
    assert all(c["answers"] == ["¯\\_(ツ)_/¯ no idea"] * 2 for c in chosen)
    assert speakers(events) == ["alice", "bob", "carol"]  # the next after the last speaker
    assert_never_excluded(events)


def test_a_selector_naming_the_excluded_speaker_never_gives_it_the_floor(tmp_path: Path) -> None:
    events = chat(
        tmp_path, world({"model": "scripted", "script": ["@alice, surely"]}, max_rounds=5)
    )
    said = speakers(events)
    assert said == ["alice", "bob", "alice", "bob", "alice"]
    assert [c["by"] for c in selections(events)] == [
        "model",
        "fallback",  # alice just spoke: the answer names no candidate, twice
        "model",
        "fallback",
        "model",
    ]
    assert_never_excluded(events)


def test_a_selector_naming_two_candidates_gets_the_first_it_names(tmp_path: Path) -> None:
    events = chat(tmp_path, world({"model": "scripted", "script": ["Carol, or maybe Bob"]}))
    said = speakers(events)
    assert said == ["carol", "bob", "carol"]
    assert [c["by"] for c in selections(events)] == ["model", "model", "model"]
    assert_never_excluded(events)


def test_every_choice_has_its_event_and_the_floor_returns_after_max_rounds(
    tmp_path: Path,
) -> None:
    events = chat(tmp_path, world(speaker_selection="round_robin", max_rounds=4))
    chosen = selections(events)
    assert len(chosen) == len(speakers(events)) == 4
    assert [c["chosen"] for c in chosen] == ["alice", "bob", "carol", "alice"]
    assert {c["by"] for c in chosen} == {"round_robin"}
    assert all(c["answer"] is None for c in chosen)
    # each choice comes before the message of the speaker it chose
    order = [(e["type"], e.get("chosen") or e.get("sender")) for e in events]
    for choice in chosen:
        at = order.index(("selection", choice["chosen"]))
        assert ("message", choice["chosen"]) in order[at:]


def test_a_human_mention_chooses_by_mention(tmp_path: Path) -> None:
    events = chat(tmp_path, world(speaker_selection="round_robin"), "@carol what now?")
    first = selections(events)[0]
    assert (first["chosen"], first["by"]) == ("carol", "mention")
    assert speakers(events)[0] == "carol"


def test_random_selection_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    first = chat(tmp_path / "a", world(speaker_selection="random", seed=7, max_rounds=6))
    again = chat(tmp_path / "b", world(speaker_selection="random", seed=7, max_rounds=6))
    assert speakers(first) == speakers(again)
    assert {c["by"] for c in selections(first)} == {"random"}
    assert_never_excluded(first)


def test_a_selector_that_times_out_falls_back_and_the_session_goes_on(tmp_path: Path) -> None:
    with OpenAITestServer() as server:
        server.queue(*[Stall(5.0)] * 4)
        selector = {"model": "openai/gpt-4o-mini"}
        data = world(
            selector,
            client="http",
            api_base=server.base_url,
            api_key_env="SEL_KEY",
            timeout=0.5,
            retries=0,
            max_rounds=2,
        )
        events = chat(tmp_path, data)
        asked = len(server.requests)
    assert asked == 4  # two choices, each asked twice (the question and once more)
    chosen = selections(events)
    assert all("timed out" in (c["error"] or "").lower() for c in chosen), chosen
    assert [c["by"] for c in chosen] == ["fallback", "fallback"]
    assert speakers(events) == ["alice", "bob"]
    assert_never_excluded(events)


def test_a_replayed_session_chooses_the_same_speakers_with_no_model(tmp_path: Path) -> None:
    store = tmp_path / "calls.jsonl"
    with OpenAITestServer() as server:
        server.queue(Reply("carol"), Reply("I pick alice"), Reply("bob please"))
        data = world(
            {"model": "openai/gpt-4o-mini"},
            client="http",
            api_base=server.base_url,
            api_key_env="SEL_KEY",
            retries=0,
        )
        recorded = chat(
            tmp_path, data, "What shall we eat?", "--record", "--replay-file", str(store)
        )
        asked = len(server.requests)
    assert asked == 3
    # the server is gone: every selector call must come from the recording
    replayed = chat(tmp_path, data, "What shall we eat?", "--replay", "--replay-file", str(store))
    assert speakers(recorded) == speakers(replayed) == ["carol", "alice", "bob"]
    assert [c["answer"] for c in selections(replayed)] == ["carol", "I pick alice", "bob please"]
    # the selector's calls are in the session's tokens (the server's 11 + 7 per call)
    assert sum(c["input_tokens"] + c["output_tokens"] for c in selections(replayed)) == 3 * 18


def test_the_selector_counts_in_max_tokens(tmp_path: Path) -> None:
    # the roles' scripted turns are cheap; the selector's prompt is what runs out first
    events = chat(
        tmp_path,
        world({"model": "scripted", "script": ["bob"]}, max_tokens=400, max_rounds=20),
    )
    stop = [e for e in events if e["type"] == "stop"]
    assert stop and stop[0]["reason"] == "max_tokens"
    used = sum(e["input_tokens"] + e["output_tokens"] for e in events if e["type"] == "message")
    spent = sum(c["input_tokens"] + c["output_tokens"] for c in selections(events))
    assert used + spent <= 400 < used + spent + 200
    assert spent > 0


# -------------------------------------------------------------- the pure fallback
names = st.sampled_from(["ann", "bo", "cy", "dee", "ed"])


@given(
    roles=st.lists(names, min_size=1, max_size=5, unique=True),
    last=st.none() | names,
    allowed=st.none() | st.lists(names, unique=True),
    at_limit=st.lists(names, unique=True),
    answer=st.text(max_size=40) | st.lists(names).map(" and ".join),
)
def test_no_rule_ever_returns_the_excluded_speaker(
    roles: list[str],
    last: str | None,
    allowed: list[str] | None,
    at_limit: list[str],
    answer: str,
) -> None:
    options = candidates(roles, last, allowed=allowed, at_limit=at_limit)
    assert last not in options
    assert not set(options) & set(at_limit)
    chosen = [
        fallback(roles, options, last),
        read_answer(answer, options, {r: r.title() for r in roles}),
    ]
    for pick in chosen:
        assert pick is None or pick in options
    assert (fallback(roles, options, last) is None) == (not options)


# ------------------------------------------------------------ a flow step's select
def panel_flow(rule: str) -> dict[str, Any]:
    data = world(speaker_selection=rule)
    data["roles"].insert(0, {"id": "host", "script": ["Welcome, {n}."]})
    data["settings"]["selector"] = {"model": "scripted", "script": ["host, no: bob"]}
    data["flow"] = {
        "steps": [
            {"id": "open", "speaker": "host"},
            {
                "id": "answer",
                "speaker": "select",
                "candidates": ["alice", "bob"],
                "loop": {"to": "answer", "max": 3},
            },
        ]
    }
    return data


def run(tmp_path: Path, data: dict[str, Any], *args: str) -> list[dict[str, Any]]:
    folder = tmp_path / "flowsel"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    done = rolecall("run", str(folder), "--json", "--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_select_step_chooses_among_its_candidates_and_logs_the_chosen_speaker(
    tmp_path: Path,
) -> None:
    events = run(tmp_path, panel_flow("model"))
    chosen = selections(events)
    assert [c["step_id"] for c in chosen] == ["answer"] * 3
    # the host is never a candidate, and whoever just spoke is not one either
    assert [c["candidates"] for c in chosen] == [["alice", "bob"], ["alice"], ["bob"]]
    assert [(c["chosen"], c["by"]) for c in chosen] == [
        ("bob", "model"),
        ("alice", "fallback"),
        ("bob", "model"),
    ]
    steps = [(e["step_id"], e["speaker"]) for e in events if e["type"] == "step"]
    assert steps == [("open", "host"), ("answer", "bob"), ("answer", "alice"), ("answer", "bob")]


def test_worlds_check_counts_the_selectors_calls(tmp_path: Path) -> None:
    folder = tmp_path / "flowsel"
    folder.mkdir()
    (folder / "world.yaml").write_text(yaml.safe_dump(panel_flow("model")), encoding="utf-8")
    done = rolecall("worlds", "check", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["per_role"]["selector"]["turns"] == 6  # three selected turns, asked twice
    assert report["per_role"]["selector"]["input_tokens"] > 0
    assert "carol" not in report["per_role"] or report["per_role"]["carol"]["turns"] == 0


def test_the_shipped_moderated_world_is_the_same_every_run_offline(tmp_path: Path) -> None:
    runs = []
    for n in range(2):
        done = rolecall("run", "moderated", "--json", "--data-dir", str(tmp_path / str(n)))
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        runs.append(
            [(e["sender"], e["content"]) for e in events if e["type"] == "message"]
            + [(c["chosen"], c["answer"]) for c in selections(events)]
        )
        chosen = selections(events)
        assert len(chosen) == 5 and {c["by"] for c in chosen} == {"model"}
        assert {c["chosen"] for c in chosen} == {"economist", "psychologist", "manager"}
    assert runs[0] == runs[1]


def test_worlds_check_cuts_sooner_when_the_selector_spends_the_tokens(tmp_path: Path) -> None:
    reports = {}
    for rule in ("round_robin", "model"):
        data = panel_flow(rule)
        data["settings"]["max_tokens"] = 1500
        folder = tmp_path / rule
        folder.mkdir()
        (folder / "world.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
        done = rolecall("worlds", "check", str(folder), "--json")
        assert done.returncode == 0, done.stderr
        reports[rule] = json.loads(done.stdout)
    assert reports["round_robin"]["cut_by"] is None
    assert reports["model"]["cut_by"] == "max_tokens"
    assert reports["model"]["worst_case_turns"] < reports["round_robin"]["worst_case_turns"]
