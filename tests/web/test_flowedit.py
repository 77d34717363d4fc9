"""The flow form saved back to world.yaml: every problem listed, nothing else rewritten."""

from __future__ import annotations

from pathlib import Path

from rolecall.web.flowedit import apply_form
from rolecall.world.loader import load_world

EDIT_WORLD = """\
# top comment
name: edit
title: 'Edit me'   # quoted title
topic: "edit topic"
model: offline
settings:
  max_turns: 6
roles:
  - id: a
    name: Alice
  - id: b
    name: Bob
flow:
  steps:
    - id: s1
      speaker: a   # first
    - id: s2
      speaker: b
      loop: {to: s1, max: 2}
"""

FOUR_SPACES = """\
name: four
topic: "t"
model: offline
roles:
    -   id: a
    -   id: b
flow:
    steps:
        -   id: s1   # one
            speaker: a
        -   id: s2
            speaker: b
            loop:        # the loop
                to: s1   # back
                max: 2
    stop:
        -   contains: DONE   # the end
"""


def _world(tmp_path: Path, text: str = EDIT_WORLD) -> Path:
    path = tmp_path / "edit" / "world.yaml"
    path.parent.mkdir()
    path.write_text(text)
    return path


def _form(**fields: str) -> dict[str, str]:
    form = {f"loop.{i}.{k}": "" for i in range(2) for k in ("to", "max", "until")}
    form["stop"] = ""
    form.update({k.replace("_", "."): v for k, v in fields.items()})
    return form


def test_every_wrong_field_is_listed_and_nothing_is_saved(tmp_path: Path) -> None:
    path = _world(tmp_path)
    result = apply_form(
        path,
        _form(
            loop_1_to="s1",
            loop_1_max="lots",
            loop_1_until="{contains: [unclosed",
            stop="{contains: A}\n[bad",
        ),
        roles_dir=None,
    )
    assert not result.saved
    assert sorted(result.errors) == ["loop.1.max", "loop.1.until", "stop"]
    assert "got 'lots'" in result.errors["loop.1.max"][0]
    assert result.errors["loop.1.until"][0].startswith("not YAML")
    assert result.errors["stop"] == [result.errors["stop"][0]]
    assert result.errors["stop"][0].startswith("line 2: not YAML")
    assert path.read_text() == EDIT_WORLD


def test_a_wrong_field_does_not_hide_what_the_world_check_finds(tmp_path: Path) -> None:
    path = _world(tmp_path)
    result = apply_form(
        path,
        _form(
            loop_0_to="nosuch", loop_0_max="3", loop_1_to="s1", loop_1_max="x", stop="{bogus: 1}"
        ),
        roles_dir=None,
    )
    assert not result.saved
    assert sorted(result.errors) == ["loop.0.to", "loop.1.max", "stop"]
    assert "no step 'nosuch'" in result.errors["loop.0.to"][0]
    assert result.errors["stop"][0].startswith("flow.stop[0]")
    assert path.read_text() == EDIT_WORLD


def test_a_valid_edit_rewrites_only_the_lines_it_changes(tmp_path: Path) -> None:
    path = _world(tmp_path)
    result = apply_form(
        path,
        _form(loop_1_to="s1", loop_1_max="5", loop_1_until="{contains: OK}", stop="{flag: done}"),
        roles_dir=None,
    )
    assert result.saved, result
    assert path.read_text() == EDIT_WORLD.replace(
        "      loop: {to: s1, max: 2}\n",
        "      loop: {to: s1, max: 5, until: {contains: OK}}\n  stop:\n    - {flag: done}\n",
    )
    flow = load_world(path).world.flow
    assert flow is not None and flow.steps[1].loop is not None
    assert flow.steps[1].loop.max == 5 and len(flow.stop) == 1


def test_saving_the_form_unchanged_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = _world(tmp_path)
    assert apply_form(path, _form(loop_1_to="s1", loop_1_max="2"), roles_dir=None).saved
    assert path.read_text() == EDIT_WORLD


def test_a_file_indented_its_own_way_keeps_its_indentation_and_block_loop(
    tmp_path: Path,
) -> None:
    path = _world(tmp_path, FOUR_SPACES)
    form = _form(
        loop_1_to="s1", loop_1_max="3", loop_1_until="{contains: OK}", stop="{contains: DONE}"
    )
    assert apply_form(path, form, roles_dir=None).saved
    assert path.read_text() == FOUR_SPACES.replace(
        "                max: 2\n",
        "                max: 3\n                until: {contains: OK}\n",
    )
    assert apply_form(path, _form(stop="{contains: DONE}"), roles_dir=None).saved  # no loop
    text = path.read_text()
    assert "loop:" not in text and "# back" not in text
    assert (
        "        -   id: s1   # one\n" in text
        and "        -   contains: DONE   # the end\n" in text
    )


COMMENTED = """\
name: c
topic: t
model: offline
roles:
  - id: a
  - id: b
flow:
  steps:
    - id: s1
      speaker: a
    - id: s2
      speaker: b
      loop: {to: s1, max: 2}   # loop comment

    # the third step
    - id: s3
      speaker: a
      loop:
        to: s2
        max: 3   # three
      # after s3
  # end of flow
# trailing
"""


def _three(**fields: str) -> dict[str, str]:
    form = {f"loop.{i}.{k}": "" for i in range(3) for k in ("to", "max", "until")}
    form.update({"loop.2.to": "s2", "loop.2.max": "3", "stop": ""})
    form.update({k.replace("_", "."): v for k, v in fields.items()})
    return form


def test_comment_lines_stay_where_they_are_when_loops_and_stops_come_and_go(
    tmp_path: Path,
) -> None:
    path = _world(tmp_path, COMMENTED)
    assert apply_form(path, _three(), roles_dir=None).saved  # s2's loop goes
    assert path.read_text() == COMMENTED.replace(
        "      loop: {to: s1, max: 2}   # loop comment\n", ""
    )
    path.write_text(COMMENTED)
    form = _three(loop_1_to="s1", loop_1_max="2", loop_2_until="{contains: X}", stop="{flag: f}")
    assert apply_form(path, form, roles_dir=None).saved
    assert path.read_text() == COMMENTED.replace(
        "        max: 3   # three\n      # after s3\n",
        "        max: 3   # three\n        until: {contains: X}\n      # after s3\n"
        "  stop:\n    - {flag: f}\n",
    )
    without = COMMENTED.replace("      loop: {to: s1, max: 2}   # loop comment\n", "")
    path.write_text(without)
    assert apply_form(
        path, _three(loop_1_to="s1", loop_1_max="4", loop_2_to=""), roles_dir=None
    ).saved
    assert path.read_text() == without.replace(
        "      speaker: b\n", "      speaker: b\n      loop: {to: s1, max: 4}\n"
    ).replace("      loop:\n        to: s2\n        max: 3   # three\n", "")
