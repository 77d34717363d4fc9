"""CLI commands are registered with their handler: one module plus one line (registry.py)."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from rolecall.cli import main as cli_main
from rolecall.cli import registry
from rolecall.cli.registry import COMMANDS, Subcommand


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
    line = Subcommand(
        "hello", "say hello", "tests.cli.hello_cmd:add_parser", "tests.cli.hello_cmd:cmd_hello"
    )
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


def test_help_lists_every_command_as_the_whole_parser_does_without_importing_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `rolecall --help` (and `rolecall` alone) builds each command by name and summary
    # only: the same page as the whole parser's, and no command's module imported
    code = (
        "import sys; from rolecall.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('rolecall.cli.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    page, _, loaded = done.stdout.rpartition("\n[")
    assert page + "\n" == cli_main.build_parser().format_help()
    command_modules = {c.parser.partition(":")[0] for c in COMMANDS}
    assert not command_modules & set(ast.literal_eval("[" + loaded))
    assert cli_main.main([]) == 2
    assert capsys.readouterr().out == cli_main.build_parser().format_help()


def test_each_command_s_parser_takes_its_help_line_from_the_registry() -> None:
    whole = cli_main.build_parser()
    for action in whole._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {a.dest: a.help for a in action._choices_actions}
    assert lines == {c.name: c.summary for c in COMMANDS}


def test_a_command_named_after_a_flag_is_parsed_with_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # not the first word: parsed as before, with every command's parser
    assert cli_main.main(["--version", "worlds", "list"]) == 0
    assert capsys.readouterr().out.startswith("rolecall ")


def test_every_command_keeps_its_parser_and_its_handler_in_one_module() -> None:
    apart = [c.name for c in COMMANDS if c.parser.partition(":")[0] != c.handler.partition(":")[0]]
    assert apart == []


def test_every_parser_of_the_command_line_is_made_one_way() -> None:
    # registry.add_command makes every parser, a command's or an action's (sessions list):
    # no other module of the command line calls argparse's add_parser itself
    import rolecall.cli

    root = Path(rolecall.cli.__file__).parent
    raw = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "registry.py"
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_parser"
    ]
    assert raw == []


def _parsers(
    parser: argparse.ArgumentParser, path: str
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


def test_every_command_and_action_help_opens_with_a_sentence_and_ends_with_examples() -> None:
    # made one way, they read one way: `rolecall worlds list --help` as `sessions list`
    for path, parser in _parsers(cli_main.build_parser(), "rolecall")[1:]:
        page = parser.format_help()
        assert parser.description and parser.description.endswith("."), path
        assert "\nexamples:\n  rolecall " in page or "\nexamples:\n  printf " in page, path
