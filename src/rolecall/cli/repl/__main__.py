"""``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``):
    the REPL without ``cmd_chat``/``cmd_resume``; its failures become the command line's
    exit codes (:func:`rolecall.cli.commands.dispatch`)."""
    from rolecall.cli.commands import dispatch
    from rolecall.cli.main import build_parser

    words = list(sys.argv[1:] if argv is None else argv)
    resume = bool(words) and words[0] == "resume"
    args = build_parser().parse_args(words if resume else ["chat", *words])
    entry = "cmd_resume_repl" if resume else "cmd_repl"
    return dispatch(args, f"rolecall.cli.repl.entry:{entry}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
