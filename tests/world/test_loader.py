from __future__ import annotations

from pathlib import Path

import pytest

from rolecall.errors import UsageError, WorldError
from rolecall.world.loader import load_world, parse_world, resolve_world_path
from tests.conftest import ROOT

GOOD = """
name: tiny
topic: tea
roles:
  - template: teacher
  - id: student
    system_prompt: You ask.
flow:
  steps:
    - {id: a, speaker: teacher}
    - {id: b, speaker: student, reply_to: {role: teacher}}
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(WorldError) as info:
        parse_world(text)
    return info.value.problems


def test_a_good_world_loads_with_template_fields() -> None:
    world = parse_world(GOOD).world
    teacher = world.role("teacher")
    assert teacher.system_prompt  # taken from the built-in template
    assert world.role_ids == ["teacher", "student"]
    assert world.flow is not None and world.flow.start_id == "a"


def test_fields_beside_a_template_win() -> None:
    world = parse_world(
        GOOD.replace("- template: teacher", "- template: teacher\n    name: Ms. R\n    id: mentor")
        .replace("speaker: teacher", "speaker: mentor")
        .replace("role: teacher", "role: mentor")
    ).world
    mentor = world.role("mentor")
    assert mentor.name == "Ms. R"
    assert mentor.system_prompt


def test_every_problem_is_listed_at_once_with_its_path() -> None:
    text = """
name: broken
roles:
  - id: teacher
    sytem_prompt: hi
  - id: student
  - id: student
flow:
  steps:
    - {id: intro, speaker: profesor}
    - {id: ask, speaker: student, loop: {to: intro}}
    - {id: ask, speaker: teacher, next: [{when: {contains: x}, goto: nowhere}]}
    - {id: more, speaker: teacher, loop: {to: nowhere2, max: 2.5}}
"""
    found = problems_of(text)
    expected = [
        "roles[0].sytem_prompt: unknown field (did you mean system_prompt?)",
        "roles[2].id: duplicate id 'student' (also roles[1])",
        "flow.steps[0].speaker: no role 'profesor'",
        "flow.steps[1].loop.max: a loop needs max",
        "flow.steps[2].id: duplicate step id 'ask' (also flow.steps[1])",
        "flow.steps[2].next[0].goto: no step 'nowhere'",
        "flow.steps[3].loop.to: no step 'nowhere2'",
        "flow.steps[3].loop.max: max must be an integer 1..10000, got 2.5",
    ]
    for line in expected:
        assert any(p.startswith(line) for p in found), f"missing {line!r} in {found}"
    assert len(found) == len(expected)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        # libyaml reads these, and its messages differ: the pure-Python parser's are given
        ("name: x\nroles:\t- a\n", "line 2, column 7: invalid YAML: found character '\\t'"),
        ("name: x\ntopic: \x00\n", "character 16: invalid YAML: special characters are not"),
        # a lone surrogate (JSON's "\ud800") libyaml cannot even encode
        ("name: x\ntopic: \ud800\n", "character 16: invalid YAML: special characters are not"),
    ],
)
def test_bad_yaml_gets_the_same_message_whichever_parser_reads_it(text: str, problem: str) -> None:
    [found] = problems_of(text)
    assert problem in found


def test_unknown_speaker_lists_the_roles_and_the_closest() -> None:
    found = problems_of(GOOD.replace("speaker: student", "speaker: studnet"))
    assert found == [
        "flow.steps[1].speaker: no role 'studnet' (did you mean student?; roles: teacher, student)"
    ]


def test_bad_yaml_names_line_and_column() -> None:
    found = problems_of("name: x\nroles: [\n  - id: a\n")
    assert len(found) == 1
    assert found[0].startswith("line ") and "invalid YAML" in found[0]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("- just\n- a list\n", "(top level): expected a mapping"),
        ("name: x\n", "roles: required field missing"),
        (
            "name: x\nroles: [{template: techer}]\n",
            "roles[0].template: no role template 'techer' (did you mean teacher",
        ),
        ("name: x\nroles: [{id: Bad}]\n", "roles[0].id: bad id 'Bad'"),
        (
            "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a, reply_to: {rol: a}}]}\n",
            "flow.steps[0].reply_to: reply_to must be previous, none",
        ),
        (
            "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], stop: [{bogus: 1}]}\n",
            "flow.stop[0]: not a condition",
        ),
        (
            "name: x\nroles: [{id: a}]\nflow: {start: zz, steps: [{id: s, speaker: a}]}\n",
            "flow.start: no step 'zz'",
        ),
        (
            "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a, loop: {to: s, max: 0}}]}\n",
            "flow.steps[0].loop.max: max must be an integer",
        ),
        (
            "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a, next: nope}]}\n",
            "flow.steps[0].next: no step 'nope'",
        ),
        (
            "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], stop: [{contains: X, role: zed}]}\n",
            "flow.stop[0].role: no role 'zed'",
        ),
        (
            "name: x\nsettings: {turn_limt: 3}\nroles: [{id: a}]\n",
            "settings.turn_limt: unknown field (did you mean turn_limit?)",
        ),
    ],
)
def test_each_kind_of_problem(text: str, needle: str) -> None:
    found = problems_of(text)
    assert any(needle in p for p in found), found


def test_unreachable_steps_are_a_warning_not_an_error() -> None:
    loaded = parse_world(
        """
name: x
roles: [{id: a}]
flow:
  steps:
    - {id: one, speaker: a, next: end}
    - {id: two, speaker: a}
"""
    )
    assert loaded.warnings == ["flow.steps[1]: step 'two' is unreachable from 'one'"]


def test_world_paths_resolve_folder_file_and_name(tmp_path: Path) -> None:
    folder = tmp_path / "worlds" / "tiny"
    folder.mkdir(parents=True)
    (folder / "world.yaml").write_text(GOOD)
    assert resolve_world_path("tiny", cwd=tmp_path) == folder / "world.yaml"
    assert resolve_world_path(str(folder), cwd=tmp_path) == folder / "world.yaml"
    assert resolve_world_path(str(folder / "world.yaml"), cwd=tmp_path) == folder / "world.yaml"
    with pytest.raises(UsageError, match=r"no world 'tinny'.*did you mean tiny"):
        resolve_world_path("tinny", cwd=tmp_path)


@pytest.mark.parametrize(
    "folder", sorted(p.parent.name for p in (ROOT / "worlds").glob("*/world.yaml"))
)
def test_every_shipped_world_is_valid(folder: str) -> None:
    loaded = load_world(ROOT / "worlds" / folder / "world.yaml")
    assert loaded.warnings == []


def test_a_field_of_another_kind_is_named_as_such() -> None:
    found = problems_of(
        "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], stop: [{flag: done, role: a}]}\n"
    )
    assert found == ["flow.stop[0].role: 'role' does not apply to this kind of condition"]


def test_a_scripted_role_needs_a_script() -> None:
    found = problems_of("name: x\nmodel: scripted\nroles: [{id: a}, {id: b, script: [hi]}]\n")
    assert found == ["roles[0].script: role 'a' uses the scripted model but has no script: lines"]


def test_problems_name_their_line_and_column() -> None:
    text = "name: tiny\nroles:\n  - id: teacher\n    sytem_prompt: hi\nflow:\n  steps:\n    - {id: a, speaker: profesor}\n"
    with pytest.raises(WorldError) as info:
        parse_world(text, source="w.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == "w.yaml: 2 problems"
    assert (
        "  line 4, column 5: roles[0].sytem_prompt: unknown field (did you mean system_prompt?)"
        in lines
    )
    assert any(
        line.startswith("  line 7, column 15: flow.steps[0].speaker: no role 'profesor'")
        for line in lines
    )


def test_a_misspelled_field_suggests_each_candidate_once() -> None:
    found = problems_of("name: x\nroles:\n  - id: a\n    tempelate: teacher\n")
    assert found == ["roles[0].tempelate: unknown field (did you mean template or temperature?)"]


def test_a_name_not_under_worlds_is_a_shipped_world(tmp_path: Path) -> None:
    assert resolve_world_path("debate", cwd=tmp_path).parent.name == "debate"
    local = tmp_path / "worlds" / "debate" / "world.yaml"
    local.parent.mkdir(parents=True)
    local.write_text("name: debate\nroles: [{id: a}]\n", encoding="utf-8")
    assert resolve_world_path("debate", cwd=tmp_path) == local


# ------------------------------------------------------------------ reserved ids
@pytest.mark.parametrize(
    ("rid", "why"),
    [
        ("human", "the sender of the human's messages; @human hands the floor to the human"),
        ("all", "@all addresses every agent"),
        ("system", "the sender of system messages"),
    ],
)
def test_a_reserved_word_is_no_role_id(rid: str, why: str) -> None:
    text = f"name: x\nroles:\n  - id: alice\n  - id: {rid}\n"
    with pytest.raises(WorldError) as info:
        parse_world(text, source="w.yaml")
    assert info.value.problems == [f"roles[1].id: '{rid}' is reserved ({why}); pick another id"]
    assert f"  line 4, column 5: roles[1].id: '{rid}' is reserved" in str(info.value)


@pytest.mark.parametrize("rid", ["Human", "ALL", "System"])
def test_reserved_ids_are_matched_case_insensitively(rid: str) -> None:
    found = problems_of(f"name: x\nroles: [{{id: alice}}, {{id: {rid}}}]\n")
    assert any(p.startswith(f"roles[1].id: '{rid}' is reserved") for p in found), found


def test_a_template_cannot_bring_a_reserved_id(tmp_path: Path) -> None:
    from rolecall.world.library import RoleLibrary

    (tmp_path / "human.yaml").write_text("system_prompt: You are a person.\n")
    text = "name: x\nroles: [{id: alice}, {template: human}, {template: human, id: person}]\n"
    with pytest.raises(WorldError) as info:
        parse_world(text, library=RoleLibrary(tmp_path))
    assert [p.split(" (")[0] for p in info.value.problems] == ["roles[1].id: 'human' is reserved"]


def test_the_reserved_mention_words_are_reserved_ids() -> None:
    from rolecall.routing import RESERVED
    from rolecall.world.library import RESERVED_IDS

    assert RESERVED | {"system", "select"} == set(RESERVED_IDS)  # select: a step's speaker


# ------------------------------------------------------------------ keys given twice
TWICE = """\
name: twice
roles:
  - template: teacher
  - template: student
flow:
  steps: [{id: a, speaker: teacher}]
  stop: [{max_turns: 3}]
  steps:
    - {id: b, speaker: student}
"""


def test_a_key_given_twice_is_a_problem_with_its_line_and_column() -> None:
    with pytest.raises(WorldError) as info:
        parse_world(TWICE, source="w.yaml")
    assert info.value.problems == ["flow.steps: duplicate key (also at line 6)"]
    assert str(info.value) == (
        "w.yaml: 1 problem\n  line 8, column 3: flow.steps: duplicate key (also at line 6)"
    )


def test_keys_given_twice_at_any_depth_are_listed_with_every_other_problem() -> None:
    text = (
        "name: x\n"
        "topic: t\n"
        "name: y\n"
        "roles:\n"
        "  - {id: a, name: A, name: B}\n"
        "  - id: b\n"
        "    sytem_prompt: hi\n"
        "flow:\n"
        "  steps:\n"
        "    - id: s\n"
        "      speaker: nobody\n"
        "      speaker: a\n"
        "      loop: {to: s, max: 2, max: 3}\n"
    )
    with pytest.raises(WorldError) as info:
        parse_world(text, source="w.yaml")
    lines = str(info.value).splitlines()
    assert lines == [
        "w.yaml: 5 problems",
        "  line 3, column 1: name: duplicate key (also at line 1)",
        "  line 5, column 22: roles[0].name: duplicate key (also at line 5)",
        "  line 12, column 7: flow.steps[0].speaker: duplicate key (also at line 11)",
        "  line 13, column 29: flow.steps[0].loop.max: duplicate key (also at line 13)",
        "  line 7, column 5: roles[1].sytem_prompt: unknown field (did you mean system_prompt?)",
    ]


def test_a_problem_in_a_repeated_block_points_at_the_block_that_is_kept() -> None:
    found = TWICE.replace("speaker: student", "speaker: studnt")
    with pytest.raises(WorldError) as info:
        parse_world(found, source="w.yaml")
    assert "  line 9, column 15: flow.steps[0].speaker: no role 'studnt'" in str(info.value)


def test_keys_a_merge_brings_in_are_not_repeats() -> None:
    text = (
        "name: x\n"
        "roles:\n"
        "  - &base {id: a, system_prompt: You teach., style: calm}\n"
        "  - <<: *base\n"
        "    id: b\n"
    )
    world = parse_world(text).world
    assert world.role("b").system_prompt == "You teach." and world.role("b").style == "calm"
    with pytest.raises(WorldError) as info:
        parse_world(text + "    id: c\n")
    assert info.value.problems == ["roles[1].id: duplicate key (also at line 5)"]


def test_equal_keys_written_differently_are_repeats() -> None:
    found = problems_of("name: x\nroles: [{id: a}]\nsettings: {max_turns: 3, 'max_turns': 4}\n")
    assert found == ["settings.max_turns: duplicate key (also at line 3)"]


@pytest.mark.parametrize(
    "argv", [["worlds", "validate", "w"], ["run", "w", "-q", "--model", "offline"]]
)
def test_the_cli_refuses_a_world_with_a_key_given_twice(
    data_dir: Path, tmp_path: Path, argv: list[str]
) -> None:
    from tests.cli.test_run_cli import rolecall

    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "world.yaml").write_text(TWICE)
    result = rolecall(*argv, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "line 8, column 3: flow.steps: duplicate key (also at line 6)" in result.stderr
    assert "Traceback" not in result.stderr and not data_dir.exists()


def test_every_problem_of_a_judge_block_is_reported_at_once() -> None:
    text = (ROOT / "worlds" / "courtroom" / "world.yaml").read_text(encoding="utf-8")
    start, end = text.index("\njudge:\n"), text.index("\nflow:\n")
    block = (
        "\njudge: {role: nobody, after: [tree, rebuttal], scale: [10, 0], scores: [a], bogus: 1}"
    )
    text = text[:start] + block + text[end:]
    line = text[: text.index("\njudge:") + 1].count("\n") + 1
    with pytest.raises(WorldError) as info:
        parse_world(text, source="w.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == "w.yaml: 4 problems"
    assert lines[1:] == [
        f"  line {line}, column 77: judge.bogus: unknown field (did you mean about?)",
        f"  line {line}, column 48: judge.scale: the low end must be below the high end, "
        "got [10, 0]",
        f"  line {line}, column 9: judge.role: no role 'nobody' (roles: plaintiff, defense, "
        "judge; add one, e.g. {template: judge})",
        f"  line {line}, column 31: judge.after[0]: no step 'tree' "
        "(steps: opening, answer, argue, rebuttal)",
    ]


def test_a_judge_field_in_error_is_not_checked_again() -> None:
    # an invalid role or after is named once, not also looked up among the roles or steps
    found = problems_of(GOOD + "judge: {role: Bad!, after: 3, scores: [s, s]}\n")
    paths = list(dict.fromkeys(p.partition(":")[0] for p in found))
    assert paths == ["judge.role", "judge.after", "judge.scores"]
    assert found[-1] == "judge.scores: duplicate score names"


def test_a_study_document_problem_is_reported_with_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "world"
    folder.mkdir()
    (tmp_path / "secret.md").write_text("A paragraph long enough to be studied.\n", "utf-8")
    (folder / "link.md").symlink_to(tmp_path / "secret.md")
    text = (
        "name: s\nmode: study\nstudy:\n  document: link.md\n  delay: 9\n  lock: 1\n"
        "roles:\n  - id: bogus\n"
    )
    (folder / "world.yaml").write_text(text, "utf-8")
    with pytest.raises(WorldError) as info:
        load_world(folder)
    lines = str(info.value).splitlines()
    assert lines[0].endswith("world.yaml: 4 problems")
    assert sorted(lines[1:]) == [
        "  line 4, column 3: study.document: 'link.md' leads outside the world folder "
        "(a symbolic link?)",
        "  line 5, column 3: study.delay: input should be less than or equal to 3 (got 9)",
        "  line 6, column 3: study.lock: input should be greater than or equal to 5 (got 1)",
        "  line 8, column 5: roles[0].id: study mode has no role 'bogus' (roles: explainer, "
        "challenger, summarizer, example_generator, misconception_spotter)",
    ]


def test_an_invalid_study_document_is_not_also_called_missing() -> None:
    found = problems_of("name: s\nmode: study\nstudy: {document: ../x.md, delay: 9}\n")
    assert found == [
        "study.document: '../x.md' leaves the world folder ('..' is not allowed)",
        "study.delay: input should be less than or equal to 3 (got 9)",
    ]


def test_a_preset_world_names_its_own_roles_entries_where_they_are() -> None:
    """The mode puts its roles first; a problem of an entry the file added still names
    that entry's index in the file (where the command line finds its line)."""
    problems = problems_of(
        "name: cw\ntopic: Which database?\nmode: consensus\nroles:\n"
        "  - id: analyst\n    sytem_prompt: typo here\n"
        "  - id: helper\n    nme: typo too\n"
    )
    assert problems == [
        "roles[0].sytem_prompt: unknown field (did you mean system_prompt?)",
        "roles[1].nme: unknown field (did you mean name?)",
    ]


def test_the_final_step_reply_targets_and_next_are_checked_like_steps() -> None:
    problems = problems_of(
        "name: x\nmodel: scripted\nroles:\n  - {id: a, script: ['a{n}']}\nflow:\n  steps:\n"
        "    - {id: s1, speaker: a, next: 5}\n"
        "    - {id: s2, speaker: a, next: [{goto: s1, whn: {flag: x}}]}\n"
        "    - {id: end, speaker: a, reply_to: {role: a, step: s2}}\n"
        "  final: {id: s1, speaker: a, instructions: hi, reply_to: {step: nope}}\n"
    )
    assert problems == [
        "flow.steps[0].next: expected a step id, end, or a list of branches "
        "([{goto: S, when: CONDITION}, ...]) (got 5)",
        "flow.steps[1].next[0].whn: unknown field (did you mean when?)",
        "flow.steps[2].reply_to.step: unknown field; a reply target is previous, none, or "
        "one of {role: R}, {step: S}, {message: mK}",
        "flow.final.instructions: unknown field (did you mean instruction?)",
        "flow.steps[2].id: 'end' is reserved (`next: end` ends the flow); pick another id",
        "flow.final.id: 's1' is also the id of flow.steps[0] (the execution log could not "
        "tell them apart)",
        "flow.final.reply_to.step: no step 'nope' (steps: s1, s2, end)",
    ]
