"""``did you mean``: mistyped commands, actions and flags get the nearest real one;
world problems about a field a flag set are reported under the flag (:func:`flags_named`).

:class:`Parser` is the ``argparse.ArgumentParser`` every ``rolecall`` parser is made
of (subparsers inherit the class), and :func:`parse` replaces ``parse_args`` so that an
unknown flag is reported by the subcommand it was given to, with that command's usage.
Only ``argparse``, ``difflib`` and ``re`` are imported: ``rolecall --help`` stays fast.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known word nearest ``word``, else ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Parser(argparse.ArgumentParser):
    """An argument parser whose ``invalid choice`` errors suggest the nearest choice."""

    def error(self, message: str) -> NoReturn:
        found = _CHOICE.search(message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            message += did_you_mean(found.group(1), choices)
        super().error(message)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, unknown flags named by the (sub)command that got them."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        target = _innermost(parser, args)
        options = [o for a in target._actions for o in a.option_strings if o.startswith("--")]
        hints = "".join(
            did_you_mean(word.split("=", 1)[0], options) for word in extra if word.startswith("--")
        )
        target.error(f"unrecognized arguments: {' '.join(extra)}{hints}")
    return args


def _innermost(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return _innermost(action.choices[chosen], args)
    return parser


@contextmanager
def flags_named(fields: dict[str, str]) -> Iterator[None]:
    """Report a world problem about a field a flag set under the flag's name.

    ``fields`` maps a world field (``study.delay``) to the flag that sets it
    (``--delay``): ``rolecall study notes.md --delay 9`` then says ``--delay: input
    should be less than or equal to 3 (got 9)``, not the YAML field the user never wrote.
    """
    from rolecall.errors import WorldError

    try:
        yield
    except WorldError as exc:
        problems = [_renamed(p, fields) for p in exc.problems]
        if problems == exc.problems:
            raise
        raise WorldError(exc.source, problems, exc.warnings) from None


def _renamed(problem: str, fields: dict[str, str]) -> str:
    for field, flag in fields.items():
        if problem.startswith(f"{field}:"):
            return flag + problem[len(field) :]
    return problem
