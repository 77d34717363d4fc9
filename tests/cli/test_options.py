"""The command line's arguments become one typed, frozen value at the edge (cli/options.py)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rolecall.cli.main import build_parser
from rolecall.cli.options import Options, ResumeOptions, SessionOptions, WorldOptions


def test_a_value_takes_each_field_from_its_flag_and_the_default_for_a_flag_not_there() -> None:
    parsed = argparse.Namespace(data_dir="/d", quiet=True, verbose=2, tools_command="list")
    assert Options.of(parsed) == Options(data_dir="/d", quiet=True, verbose=2)


def test_run_s_flags_are_typed_fields() -> None:
    parsed = build_parser().parse_args(
        ["run", "classroom", "--mode", "step", "--max-turns", "4", "--json", "--record", "-vv"]
    )
    opts = WorldOptions.of(parsed)
    assert (opts.world, opts.mode, opts.max_turns, opts.json, opts.replay, opts.verbose) == (
        "classroom",
        "step",
        4,
        True,
        "record",
        2,
    )
    assert opts.more_turns is None


@pytest.mark.parametrize("flag", ["--more-turns", "--max-turns"])
def test_resume_s_cap_is_more_turns_not_the_world_s_max_turns(flag: str) -> None:
    opts = ResumeOptions.of(build_parser().parse_args(["resume", "last", flag, "3"]))
    assert (opts.session, opts.more_turns, opts.max_turns, opts.mode) == ("last", 3, None, None)


def test_a_value_is_never_changed_once_made() -> None:
    opts = SessionOptions(mode="auto")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.mode = "step"  # type: ignore[misc]
    assert dataclasses.replace(opts, mode="step").mode == "step"
    assert opts.mode == "auto"
