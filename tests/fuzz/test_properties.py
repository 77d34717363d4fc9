"""Property tests of the parsers and the routing: whatever the input, a result or a clear
refusal, never another exception and never a hang.

* ``parse_world``: a World, or a WorldError whose every problem is one line
  ``<path>: <message>``; fed arbitrary text, YAML-ish text, and mappings built from the
  real keys of world files with values of every type.
* ``parse_document``: a SessionDocument, or a UsageError; fed arbitrary text, arbitrary
  JSON, and real session documents with one part deleted or replaced.
* ``route`` never raises for a valid sender; the mention and reply helpers never raise.

Examples are derandomized (the same every run, no example database): a failure here is
reproducible. ``deadline`` is generous: it catches
runaway inputs (a hang or an exponential blow-up), not a slow machine.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from datetime import UTC, datetime
from functools import cache
from typing import Any

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rolecall
from rolecall.errors import UsageError, WorldError
from rolecall.routing import (
    auto_mention,
    extract_pass,
    find_mentions,
    first_mention,
    route,
    strip_self_mentions,
    unknown_mention_notice,
)
from rolecall.storage.document import SessionDocument, parse_document
from rolecall.storage.in_memory import InMemoryStore
from rolecall.world.loader import parse_world
from rolecall.world.models import World

FUZZ = settings(
    max_examples=200,
    deadline=5000,  # ms; far above any sane parse, far below the 60 s test timeout
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PROBLEM = re.compile(r"(?P<path>[^\n\r]+?): (?P<message>[^\n\r]+)")


def check_world(text: str) -> None:
    """The property of the world loader, for one input."""
    try:
        loaded = parse_world(text)
    except WorldError as exc:
        problems = exc.problems
    else:
        assert isinstance(loaded.world, World)
        return
    assert problems, "a WorldError without problems"
    for problem in problems:
        assert PROBLEM.fullmatch(problem), f"not one '<path>: <message>' line: {problem!r}"


# ------------------------------------------------------------------ strategies
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
# What a YAML file may hold: no control characters but tab and line breaks (the YAML
# reader refuses the others; test_control_character_in_a_world_file covers that).
FILE_TEXT = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Cn"), include_characters="\t\n\r"),
    max_size=200,
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
# keys on one line: a key with a line break is test_key_with_a_line_break_is_one_problem_line
KEY = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n\r"), max_size=12)
ANY = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3),
    max_leaves=8,
)
IDENT = st.sampled_from(
    [
        *("a", "b", "teacher", "student", "s1", "end", "previous", "none", "human", "all"),
        *("A", "", "-x", "../x", "a/b", "x" * 200),
    ]
)

WORLD_KEYS = ["name", "title", "description", "topic", "model", "mode", "settings", "roles"]
WORLD_KEYS += ["flow", "debate", "consensus", "study", "judge"]
ROLE_KEYS = ["id", "name", "description", "system_prompt", "style", "constraints", "model"]
ROLE_KEYS += ["temperature", "max_tokens", "api_base", "api_key_env", "script", "template"]
SETTINGS_KEYS = ["memory_window", "turn_limit", "max_turns", "max_tokens", "max_seconds"]
SETTINGS_KEYS += ["constraints", "api_base", "api_key_env", "timeout", "retries"]
STEP_KEYS = ["id", "speaker", "instruction", "reply_to", "loop", "next", "judge"]
COND_KEYS = ["contains", "regex", "role", "name", "max_turns", "max_tokens", "max_seconds"]
COND_KEYS += ["flag", "any", "all", "not", "judge", "at_least", "mode"]
COND_KEYS += ["concession", "stalemate", "consensus"]


def mapping(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Mappings of real keys (now and then an unknown one) to ``values``."""
    key = st.sampled_from(keys) | st.sampled_from(["sytem_prompt", "extra", "Speaker"])
    return st.dictionaries(key, values, max_size=min(len(keys), 5))


CONDITION = st.deferred(
    lambda: (
        mapping(COND_KEYS, ANY | IDENT | st.lists(CONDITION, max_size=2) | CONDITION)
        | st.sampled_from(["concession", "stalemate", "consensus"])
    )
)
LOOP = mapping(["to", "max", "until"], ANY | IDENT | CONDITION | st.integers(-3, 20000))
BRANCH = mapping(["when", "goto"], ANY | IDENT | CONDITION)
STEP = mapping(
    STEP_KEYS,
    ANY
    | IDENT
    | LOOP
    | st.lists(BRANCH, max_size=3)
    | st.sampled_from(["previous", "none"])
    | mapping(["role", "step", "message"], IDENT | ANY),
)
FLOW = mapping(
    ["start", "steps", "final", "stop"],
    IDENT | st.lists(STEP, max_size=4) | STEP | st.lists(CONDITION, max_size=2) | ANY,
)
ROLE = mapping(ROLE_KEYS, ANY | IDENT | st.lists(TEXT, max_size=2))
SETTINGS = mapping(SETTINGS_KEYS, ANY | st.integers(-5, 20000) | st.sampled_from(["X_KEY", "a b"]))
WORLD = st.fixed_dictionaries(
    {},
    optional={
        "name": IDENT | ANY,
        "title": ANY,
        "topic": ANY,
        "model": st.sampled_from(["offline", "scripted", "openai/x"]) | ANY,
        "mode": st.sampled_from(["debate", "consensus", "study", "nope"]) | ANY,
        "settings": SETTINGS | ANY,
        "roles": st.lists(ROLE | st.builds(dict, template=IDENT) | ANY, max_size=4) | ANY,
        "flow": FLOW | ANY,
        "debate": mapping(["profile", "pro", "con", "max_turns", "judge"], ANY | IDENT) | ANY,
        "consensus": mapping(["profiles", "threshold", "max_rounds"], ANY | IDENT) | ANY,
        "study": mapping(["document", "text", "delay", "lock"], ANY | IDENT) | ANY,
        "judge": mapping(["role", "every", "criteria"], ANY | IDENT) | ANY,
        "extra_key": ANY,
    },
)
YAMLISH = st.lists(
    st.sampled_from(
        [
            *WORLD_KEYS,
            *("id", "speaker", "steps", "loop", "max", "to", ":", ": ", " ", "\n", "\n  "),
            *("- ", "{", "}", "[", "]", ", ", "&a ", "*a", "!!python/object:os.system"),
            *("!!binary", "'", '"', "#", "null", "~", "true", "1e3", "0x1F", "|", ">", "---"),
            *("...", "? ", "\t", "%YAML 1.1", "<<: *a", "\\u0000", "\ufeff", "é"),
        ]
    ),
    max_size=40,
).map("".join)


# ------------------------------------------------------------------ the world loader
@FUZZ
@given(FILE_TEXT)
def test_world_loader_on_arbitrary_text(text: str) -> None:
    check_world(text)


@FUZZ
@given(YAMLISH)
def test_world_loader_on_yamlish_text(text: str) -> None:
    check_world(text)


@FUZZ
@given(WORLD)
def test_world_loader_on_real_keys_with_values_of_any_type(data: dict[str, Any]) -> None:
    check_world(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


VALID_WORLD: dict[str, Any] = {
    "name": "valid",
    "title": "A valid world to mutate",
    "topic": "mutation",
    "model": "scripted",
    "settings": {"max_turns": 20, "turn_limit": 3, "constraints": ["be brief"]},
    "roles": [
        {"id": "a", "name": "Ann", "script": ["a {n}"], "temperature": 0.5},
        {"template": "teacher", "id": "b", "script": ["b {n}"]},
    ],
    "flow": {
        "start": "one",
        "steps": [
            {"id": "one", "speaker": "a", "instruction": "Open."},
            {"id": "two", "speaker": "b", "reply_to": {"role": "a"}},
            {
                "id": "three",
                "speaker": "a",
                "loop": {"to": "two", "max": 3, "until": {"contains": "done", "role": "b"}},
                "next": [{"when": {"any": [{"flag": "x"}, {"regex": "y+"}]}, "goto": "one"}],
            },
            {"id": "four", "speaker": "b", "reply_to": {"step": "two"}, "next": "end"},
        ],
        "stop": [{"contains": "FINAL", "name": "final"}, {"not": {"max_turns": 50}}],
    },
}


@FUZZ
@given(st.data())
def test_world_loader_on_valid_worlds_with_one_part_changed(data: st.DataObject) -> None:
    world = copy.deepcopy(VALID_WORLD)
    assert parse_world(yaml.safe_dump(world)).world.name == "valid"  # unchanged, it loads
    path = data.draw(st.sampled_from(paths(world)), label="path")
    *parents, last = path
    holder: Any = world
    for key in parents:
        holder = holder[key]
    if data.draw(st.booleans(), label="delete"):
        del holder[last]
    else:
        holder[last] = data.draw(ANY | IDENT | CONDITION | STEP, label="value")
    check_world(yaml.safe_dump(world, allow_unicode=True))


@pytest.mark.parametrize("stop", ["5", "true", "3.5"])
def test_flow_stop_that_is_not_a_list_is_a_problem_line(stop: str) -> None:
    check_world(
        f"name: w\nroles: [{{id: a}}]\nflow: {{steps: [{{id: s, speaker: a}}], stop: {stop}}}\n"
    )


@pytest.mark.parametrize("start", ["[]", "[one]", "{step: one}"])
def test_flow_start_that_is_not_a_step_id_is_a_problem_line(start: str) -> None:
    check_world(
        f"name: w\nroles: [{{id: a}}]\nflow: {{start: {start}, steps: [{{id: one, speaker: a}}]}}\n"
    )


def test_deeply_nested_world_file_is_a_problem_line() -> None:
    check_world("name: w\nroles: [{id: a}]\ntopic: " + "[" * 5000 + "]" * 5000 + "\n")


def test_control_character_in_a_world_file_is_a_problem_line() -> None:
    check_world("name: w\x01\nroles: [{id: a}]\n")


def test_key_with_a_line_break_is_one_problem_line() -> None:
    check_world('name: w\nroles: [{id: a}]\nsettings: {"max\\nturns": 3}\n')


def test_an_unknown_mode_with_a_line_break_is_one_problem_line() -> None:
    check_world('name: w\nmode: "\\n"\nroles: [{id: a}]\n')
    check_world(
        'name: w\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], stop: [{mode: "a\\nb"}]}\n'
    )


def test_alias_bomb_is_refused_without_expanding_it() -> None:
    anchors = ["  a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        anchors.append(f"  {cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    for tail in ("topic: *i", "roles: *i", "settings: {constraints: *i}", "flow: {steps: *i}"):
        check_world("name: w\nanchors:\n" + "\n".join(anchors) + f"\nroles: [{{id: a}}]\n{tail}\n")


# ------------------------------------------------------------------ the session-file loader
def check_document(text: str) -> None:
    try:
        doc = parse_document(text, "fuzz.json")
    except UsageError as exc:
        message = str(exc)
    else:
        assert isinstance(doc, SessionDocument)
        return
    assert message.startswith("fuzz.json: "), message  # names the file, says what is wrong


@cache
def real_document() -> dict[str, Any]:
    """A real session document (a short scripted flow, run in process) as JSON data."""
    world = parse_world(
        "name: doc\ntopic: fuzzing\nmodel: scripted\nroles:\n"
        "  - {id: a, script: ['a says {n}']}\n  - {id: b, script: ['b @a {n}']}\n"
        "flow:\n  steps:\n    - {id: one, speaker: a}\n"
        "    - {id: two, speaker: b, loop: {to: one, max: 2}}\n"
    ).world

    async def run() -> SessionDocument:
        store = InMemoryStore()
        result = await rolecall.run(world, store=store)
        return await store.load(result.session_id, with_events=False)

    data: dict[str, Any] = json.loads(anyio.run(run).model_dump_json())
    data["created_at"] = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    parse_document(json.dumps(data), "real")  # the unmutated document loads
    return data


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            out.extend(paths(inner, (*prefix, key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            out.extend(paths(inner, (*prefix, index)))
    return out


@FUZZ
@given(st.text(max_size=300) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")))
def test_document_loader_on_arbitrary_text(text: str) -> None:
    check_document(text)


@FUZZ
@given(
    ANY
    | st.fixed_dictionaries(
        {"format": st.just("rolecall-session") | TEXT, "version": st.integers(-2, 3) | ANY},
        optional={k: ANY for k in SessionDocument.model_fields if k not in ("format", "version")},
    )
)
def test_document_loader_on_arbitrary_json(data: Any) -> None:
    check_document(json.dumps(data))


@FUZZ
@given(st.data())
def test_document_loader_on_mutated_real_documents(data: st.DataObject) -> None:
    doc = copy.deepcopy(real_document())
    path = data.draw(st.sampled_from(paths(doc)), label="path")
    *parents, last = path
    holder: Any = doc
    for key in parents:
        holder = holder[key]
    if data.draw(st.booleans(), label="delete"):
        del holder[last]
    else:
        holder[last] = data.draw(ANY, label="value")
    check_document(json.dumps(doc))


def test_deeply_nested_session_file_is_a_usage_error() -> None:
    check_document(
        '{"format": "rolecall-session", "version": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}"
    )


# ------------------------------------------------------------------ routing and mentions
ROLE_ID = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
MENTIONISH = st.lists(
    st.sampled_from(
        [
            *("@", "@a", "@A", "@all", "@ALL", "@human", "@@b", "b@c.com", "**@a**", "(@b)"),
            *("@a-", "@a_", "-", "_", ".", " ", "\n", "\t", "<world>pass</world>"),
            *("< WORLD >PASS</ world >", "@zed", "é", "@é", "＠a", "@İx", "@3po", "> ", "`@b`"),
            *("@a,", "@b:", "hi", "@-x"),
        ]
    ),
    max_size=12,
).map("".join)
MESSAGE = MENTIONISH | st.text(max_size=60)
PASS_TAG = re.compile(r"<\s*world\s*>\s*pass\s*<\s*/\s*world\s*>", re.IGNORECASE)


@FUZZ
@given(
    st.data(),
    st.lists(ROLE_ID | st.sampled_from(["a", "b"]), min_size=1, max_size=6, unique=True),
    MESSAGE,
)
def test_route_never_raises_for_valid_senders(
    data: st.DataObject, role_ids: list[str], text: str
) -> None:
    sender = data.draw(st.sampled_from(["human", "system", *role_ids]), label="sender")
    decision = route(sender, text, role_ids)
    order = [role_ids.index(a) for a in decision.answerers]
    assert order == sorted(set(order)), "answerers are role ids, once each, in role order"
    assert sender not in decision.answerers
    if sender == "system":
        assert decision.answerers == ()
    if decision.unknown is not None:
        assert set(decision.suggestions) <= set(role_ids)
        assert decision.unknown in unknown_mention_notice(decision) or len(decision.unknown) > 40
    assert decision.mention == first_mention(text)


@FUZZ
@given(MESSAGE, ROLE_ID, st.sampled_from([None, "human", "system", "a", "b"]))
def test_mention_helpers_never_raise(text: str, agent: str, answering: str | None) -> None:
    mentions = find_mentions(text)
    assert first_mention(text) == (mentions[0] if mentions else None)
    for name in mentions:
        assert name and name == name.lower() and "@" not in name and not name[0].isspace()
    stripped = strip_self_mentions(text, agent)
    assert text.endswith(stripped)
    rest, passed = extract_pass(text)
    assert passed == bool(PASS_TAG.search(text))
    assert (rest == text) if not passed else not PASS_TAG.search(rest)
    replied = auto_mention(stripped, answering, agent)
    assert replied.endswith(stripped.lstrip()) or replied == stripped


# ------------------------------------------------------------------ regex conditions
# patterns built from the pieces that make backtracking explode: nested and overlapping
# repetition, alternation of prefixes of each other, anchors, backreferences
REGEX = st.recursive(
    st.sampled_from(["a", "aa", "b", ".", r"\w", r"\s", "[ab]", "^", "$", r"\b"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,3}", "{2,}", "*?", "++"])).map(
            "".join
        ),
        st.lists(inner, min_size=1, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map("|".join),
        inner.map(lambda p: f"({p})"),
        inner.map(lambda p: f"({p})\\1"),
    ),
    max_leaves=8,
)
# the classic shapes of exponential backtracking, with overlapping pieces and a tail that fails
_PIECE = st.sampled_from(["a", "aa", "a?", r"\w", "[ab]", ".", "a+", "(?:a|a)"])
EXPLODING = st.builds(
    "{}{}{}".format,
    st.sampled_from(["", "^", r"\b"]),
    st.one_of(
        st.tuples(_PIECE, _PIECE).map(lambda ab: f"({ab[0]}|{ab[1]})+"),
        _PIECE.map(lambda a: f"({a}+)+"),
        _PIECE.map(lambda a: f"({a}*)*"),
        st.tuples(_PIECE, _PIECE).map(lambda ab: f"(?:{ab[0]}{ab[1]}?)*"),
    ),
    st.sampled_from(["$", "b", "!$", r"\d", "c"]),
)
TEXT = st.text(alphabet="ab! \n", max_size=80) | st.integers(0, 60).map(lambda n: "a" * n + "!")


@FUZZ
@given(EXPLODING | REGEX, TEXT)
def test_a_regex_condition_never_outruns_its_bound(pattern: str, text: str) -> None:
    """A search answers or raises PatternTimeout; either way within the bound (issue 13).

    The bound is lowered to 50 ms here so that exploding patterns cost little; the
    assertion allows twenty times that for a loaded machine: it catches a hang, the
    defect (minutes), not a slow answer.
    """
    import time
    from unittest import mock

    from rolecall.flows import patterns

    try:
        patterns.check(pattern)
    except ValueError:
        return  # refused at load time, with the reason (e.g. a backreference to no group)
    with mock.patch.object(patterns, "SEARCH_SECONDS", 0.05):
        began = time.monotonic()
        with contextlib.suppress(patterns.PatternTimeout):
            patterns.search(pattern, text)
        assert time.monotonic() - began < 1.0, f"/{pattern}/ on {text!r}"
