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


def _command_help(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name].format_help()
    raise AssertionError(f"no command {name}")


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_a_command_parsed_alone_has_the_flags_and_help_it_has_among_all(name: str) -> None:
    # `rolecall NAME ...` builds NAME's parser alone (a faster start): what it accepts
    # and what `rolecall NAME --help` prints must not depend on the other commands
    whole = _command_help(cli_main.build_parser(), name)
    alone, handlers = cli_main._build(name)
    assert list(handlers) == [name]
    assert _command_help(alone, name) == whole


def test_a_mistyped_command_still_gets_the_nearest_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main.main(["rnu", "classroom"])
    assert exit_.value.code == 2
    assert "did you mean 'run'?" in capsys.readouterr().err
