"""Running a command of ``rolecall``: its handler called, its errors mapped to messages
and exit codes (each command's parser and handler are in its own module: registry.py)."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from pathlib import Path

from rolecall.cli import logs
from rolecall.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from rolecall.cli.options import Options
from rolecall.errors import (
    RolecallError,
    RuntimeFailure,
    StorageError,
    UsageError,
    WorldError,
    first_rolecall_error,
)


def dispatch(args: argparse.Namespace, target: str) -> int:
    """Run the command's handler (``module:function``); its errors become exit codes."""
    opts = Options.of(args)  # what every command may have: logs, data dir, NATS server
    verbosity = -1 if opts.quiet else opts.verbose
    try:
        logs.configure(verbosity, opts.log_file)
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from rolecall.cli.registry import handler
    from rolecall.cli.stdout import silence_stdout, stdout_failed

    try:
        try:
            code = handler(target)(args)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`| head`): not our failure
            silence_stdout()
            return EXIT_OK
        except BaseExceptionGroup as group:  # a failure inside a task group
            found = first_rolecall_error(
                group,
                lambda exc: (
                    damaged_store(opts, exc) if isinstance(exc, sqlite3.DatabaseError) else None
                ),
            )
            if found is None:
                raise
            raise found from group
        except sqlite3.DatabaseError as exc:  # not an OSError: the file's content is bad
            raise damaged_store(opts, exc) from exc
        except OSError as exc:
            if not _stdout_broken():
                raise
            stdout_failed(exc)
            code = EXIT_FAILURE
        failed = stdout_failed()  # also a failure the --json sink noted and went past
        if failed is not None:
            print(
                f"rolecall: cannot write to standard output: {failed.strerror or failed}",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        return code
    except WorldError as exc:
        print(str(exc), file=sys.stderr)
        for warning in exc.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageError as exc:
        if exc.session_id:
            from rolecall.cli.hints import resume_command

            after = (
                f"The session is kept and nothing was lost: everything committed before this "
                f"is stored. Once the cause is fixed, `{resume_command(exc.session_id, opts)}` "
                "continues it."
            )
        else:
            after = "Nothing was written."
        print(f"rolecall: {exc}\n{after}", file=sys.stderr)
        return EXIT_FAILURE
    except RuntimeFailure as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except RolecallError as exc:  # pragma: no cover - control signals never escape
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _stdout_broken() -> bool:
    """Whether stdout refuses a write (after an OSError whose origin is not known)."""
    try:
        sys.stdout.write("")
        sys.stdout.flush()
    except OSError:
        return True
    return False


def damaged_store(opts: Options, exc: sqlite3.DatabaseError) -> StorageError:
    """What to tell the user when reading the store failed on its content (sessions.md)."""
    from rolecall.paths import data_dir, db_path

    path = db_path(data_dir(opts.data_dir))
    if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, I/O: not the content
        return StorageError(f"cannot use the session store {path}: {exc}")
    return StorageError(
        f"the session store {path} is damaged ({exc}); `PRAGMA integrity_check` says: "
        f"{integrity(path)}.\nRestore {path.name} from a backup, or move "
        f"it aside (`mv {path} {path}.damaged`) to start a new store; `sqlite3 {path} .recover` "
        "may save what is readable (sessions.md, A damaged store)."
    )


def integrity(path: Path) -> str:
    """The first lines of ``PRAGMA integrity_check`` on ``path``, opened read-only."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("PRAGMA integrity_check(3)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    return "; ".join(str(r[0]) for r in rows)
