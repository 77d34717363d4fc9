"""The flow form saved back to world.yaml: every problem listed, nothing else rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolecall.web.flowedit import FormConflict, apply_form
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


# ------------------------------------------------------------ the file as it is kept


def test_a_symlinked_world_yaml_stays_a_link_and_its_target_keeps_its_mode(
    tmp_path: Path,
) -> None:
    target = tmp_path / "shared" / "world.yaml"
    target.parent.mkdir()
    target.write_text(EDIT_WORLD)
    target.chmod(0o640)
    (tmp_path / "edit").mkdir()
    link = tmp_path / "edit" / "world.yaml"
    link.symlink_to(target)
    assert apply_form(link, _form(loop_1_to="s1", loop_1_max="3"), roles_dir=None).saved
    assert link.is_symlink() and link.resolve() == target
    assert target.read_text() == EDIT_WORLD.replace("max: 2}", "max: 3}")
    assert target.stat().st_mode & 0o777 == 0o640


def test_crlf_line_ends_and_a_byte_order_mark_are_kept_by_an_edit(tmp_path: Path) -> None:
    path = _world(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + EDIT_WORLD.replace("\n", "\r\n").encode())
    assert apply_form(path, _form(loop_1_to="s1", loop_1_max="4"), roles_dir=None).saved
    expected = EDIT_WORLD.replace("max: 2}", "max: 4}").replace("\n", "\r\n")
    assert path.read_bytes() == b"\xef\xbb\xbf" + expected.encode()


def test_a_form_saved_unchanged_leaves_the_file_byte_for_byte(tmp_path: Path) -> None:
    odd = "\ufeff" + EDIT_WORLD.replace(
        "title: 'Edit me'", "title: '" + "long " * 1000 + "'"
    ).replace("model: offline", "model: &unused offline").replace("\n", "\r\n")
    path = _world(tmp_path)
    path.write_bytes(odd.encode())
    before = path.stat().st_mtime_ns
    assert apply_form(path, _form(loop_1_to="s1", loop_1_max="2"), roles_dir=None).saved
    assert path.read_bytes() == odd.encode()
    assert path.stat().st_mtime_ns == before  # not even rewritten


SHARED = """\
name: shared
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
      loop: &back {to: s1, max: 2}
    - id: s3
      speaker: a
      loop: *back
"""


def _shared_form(**fields: str) -> dict[str, str]:
    form = {f"loop.{i}.{k}": "" for i in range(3) for k in ("to", "max", "until")}
    form.update({"loop.1.to": "s1", "loop.1.max": "2", "loop.2.to": "s1", "loop.2.max": "2"})
    form["stop"] = ""
    form.update({k.replace("_", "."): v for k, v in fields.items()})
    return form


def test_a_loop_shared_through_an_alias_gets_the_edit_on_its_own_step_only(
    tmp_path: Path,
) -> None:
    """Editing the anchor's step, or the alias's, changes that step and no other: the
    edit is never lost (it was: the other row, unchanged, wrote the old value back)."""
    for row, untouched in ((1, 2), (2, 1)):
        path = tmp_path / f"row{row}" / "world.yaml"
        path.parent.mkdir()
        path.write_text(SHARED)
        result = apply_form(path, _shared_form(**{f"loop_{row}_max": "5"}), roles_dir=None)
        assert result.saved, result
        flow = load_world(path).world.flow
        assert flow is not None
        edited, other = flow.steps[row].loop, flow.steps[untouched].loop
        assert edited is not None and edited.max == 5
        assert other is not None and other.max == 2


MERGED = """\
name: merged
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
      loop: &base {to: s1, max: 2, until: {contains: DONE}}
    - id: s3
      speaker: a
      loop:
        <<: *base
        max: 3
"""


def _merged_form(**fields: str) -> dict[str, str]:
    form = {f"loop.{i}.{k}": "" for i in range(3) for k in ("to", "max", "until")}
    form.update({"loop.1.to": "s1", "loop.1.max": "2", "loop.1.until": "{contains: DONE}"})
    form.update({"loop.2.to": "s1", "loop.2.max": "3", "loop.2.until": "{contains: DONE}"})
    form["stop"] = ""
    form.update({k.replace("_", "."): v for k, v in fields.items()})
    return form


def test_an_edit_the_file_cannot_hold_as_asked_is_refused_and_nothing_is_saved(
    tmp_path: Path,
) -> None:
    """s3's ``until`` comes from a merge key: the form cannot take it away by editing
    s3 (the merged value would come back): refused, naming the step, not "Saved"."""
    path = _world(tmp_path, MERGED)
    result = apply_form(path, _merged_form(loop_2_until=""), roles_dir=None)
    assert not result.saved
    assert "step 's3'" in " ".join(result.other), result
    assert "cannot write faithfully" in " ".join(result.other)
    assert path.read_text() == MERGED
    # what it can write, it writes: s3's own max
    assert apply_form(path, _merged_form(loop_2_max="6"), roles_dir=None).saved
    assert path.read_text() == MERGED.replace("max: 3", "max: 6")


def test_rows_are_matched_to_steps_by_their_id_not_their_position(tmp_path: Path) -> None:
    """A form whose rows name their steps edits those steps wherever they are in the file
    (here the rows come in the other order); a row naming a step the file no longer has
    is refused, and nothing is saved."""
    path = _world(tmp_path)
    form = _form(step_0="s2", step_1="s1", loop_0_to="s1", loop_0_max="4")
    assert apply_form(path, form, roles_dir=None).saved
    flow = load_world(path).world.flow
    assert flow is not None and flow.steps[0].loop is None
    assert flow.steps[1].loop is not None and flow.steps[1].loop.max == 4
    gone = _form(step_0="s1", step_1="gone", loop_1_to="s1", loop_1_max="2")
    with pytest.raises(FormConflict, match="no step 'gone'"):
        apply_form(path, gone, roles_dir=None)
    with pytest.raises(FormConflict, match="changed since this form was shown"):
        apply_form(path, _form(loop_1_to="s1", loop_1_max="2"), roles_dir=None, expected="0")
    assert path.read_text() == EDIT_WORLD.replace("max: 2}", "max: 4}")
