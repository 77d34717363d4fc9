"""CLI commands are registered with their handler: one module plus one line (registry.py)."""

from __future__ import annotations

import argparse

import pytest

from rolecall.cli import main as cli_main
from rolecall.cli import registry
from rolecall.cli.registry import COMMANDS, Command


def subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def test_the_parser_has_every_registered_command_in_registry_order() -> None:
    assert subcommands(cli_main.build_parser()) == [c.name for c in COMMANDS]


def test_a_new_command_is_one_module_plus_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = Command("hello", "tests.cli.hello_cmd:add_parser", "tests.cli.hello_cmd:cmd_hello")
    monkeypatch.setattr(registry, "COMMANDS", (*COMMANDS, line))
    assert cli_main.main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    assert cli_main.main(["hello", "nobody"]) == 3
    with pytest.raises(SystemExit):
        cli_main.main(["--help"])
    assert "hello     say hello" in capsys.readouterr().out
