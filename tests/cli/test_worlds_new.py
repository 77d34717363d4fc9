"""`rolecall worlds new`: a world of your own from a preset or a copy of any world, in
your worlds folder, never in the package (real subprocesses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall
from tests.conftest import ROOT

SHIPPED = ROOT / "src" / "rolecall" / "worlds"


def _package_files() -> set[Path]:
    return {p for p in SHIPPED.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("shipped", ["classroom", "tutoring", "review", "garden", "manor"])
def test_new_starts_from_any_shipped_world(tmp_path: Path, shipped: str) -> None:
    made = rolecall("worlds", "new", "mine", "--from", shipped, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "worlds" / "mine"
    assert f"wrote {Path('worlds') / 'mine' / 'world.yaml'}" in made.stdout
    text = (folder / "world.yaml").read_text(encoding="utf-8")
    assert "\nname: mine\n" in f"\n{text}" and f"name: {shipped}\n" not in text
    original = SHIPPED / shipped
    copied = {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}
    assert copied == {p.relative_to(original) for p in original.rglob("*") if p.is_file()}
    # it is a world of its own, found by name and listed as local
    checked = rolecall("worlds", "validate", "mine", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    listed = rolecall("worlds", "list", cwd=tmp_path).stdout
    assert any(line.split()[:2] == ["mine", "local"] for line in listed.splitlines())
    ran = rolecall(
        "run", "mine", "--max-turns", "2", "--data-dir", str(tmp_path / "d"), cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr


def test_new_refuses_to_write_into_the_package(tmp_path: Path) -> None:
    """In a checkout ./worlds links to src/rolecall/worlds: nothing is written there."""
    (tmp_path / "worlds").symlink_to(SHIPPED)
    before = _package_files()
    for start in ("debate", "classroom"):
        made = rolecall("worlds", "new", "mine", "--from", start, cwd=tmp_path)
        assert made.returncode == 2, made.stdout + made.stderr
        assert "inside the rolecall package" in made.stderr
        assert "--dir my-worlds" in made.stderr  # what to do instead
        assert "Traceback" not in made.stderr
    also = rolecall("worlds", "new", "x", "--from", "study", "--dir", str(SHIPPED), cwd=tmp_path)
    assert also.returncode == 2 and "inside the rolecall package" in also.stderr
    assert _package_files() == before
    # a folder of your own works from the same place
    mine = rolecall(
        "worlds", "new", "mine", "--from", "classroom", "--dir", "my-worlds", cwd=tmp_path
    )
    assert mine.returncode == 0, mine.stderr
    assert (tmp_path / "my-worlds" / "mine" / "world.yaml").is_file()


def test_new_from_an_unknown_world_names_the_choices(tmp_path: Path) -> None:
    made = rolecall("worlds", "new", "mine", "--from", "clasroom", cwd=tmp_path)
    assert made.returncode == 2
    assert "(did you mean 'classroom'?)" in made.stderr
    assert "presets: debate, consensus, study" in made.stderr and "tutoring" in made.stderr
    assert not (tmp_path / "worlds").exists()
    assert os.listdir(tmp_path) == []
