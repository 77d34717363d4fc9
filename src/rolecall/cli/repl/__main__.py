"""``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``)."""

from __future__ import annotations

import sys

from rolecall.cli.repl.entry import cmd_repl, cmd_resume_repl


def main(argv: list[str] | None = None) -> int:
    """``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``):
    the REPL without ``cmd_chat``/``cmd_resume``."""
    from rolecall.cli import logs
    from rolecall.cli.main import build_parser
    from rolecall.errors import RolecallError, RuntimeFailure, UsageError, WorldError

    words = list(sys.argv[1:] if argv is None else argv)
    resume = bool(words) and words[0] == "resume"
    args = build_parser().parse_args(words if resume else ["chat", *words])
    verbosity = -1 if args.quiet else args.verbose
    logs.configure(verbosity, args.log_file)
    try:
        return cmd_resume_repl(args) if resume else cmd_repl(args)
    except WorldError as exc:
        print(str(exc), file=sys.stderr)
        for warning in exc.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return 2
    except (RuntimeFailure, RolecallError) as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
