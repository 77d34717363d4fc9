"""``rolecall sessions``: list, show, trace, export and delete stored sessions."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rolecall.cli.manage.common import (
    add_manage_flags,
    check_role_filter,
    clip_cell,
    confirm,
    data_dir_of,
    resolve_session_id,
    role_ids_of,
    text_table,
    with_store,
    write_file,
)
from rolecall.cli.options import SessionsOptions
from rolecall.cli.registry import add_command, summary

if TYPE_CHECKING:
    from rolecall.storage.catalog import SessionRow
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument
    from rolecall.storage.scores import StoredScore


def _list_keys() -> tuple[str, ...]:
    """The keys of `sessions list --json`, in order: the fields of SessionSummary."""
    from rolecall.storage.catalog import SessionSummary

    return tuple(SessionSummary.model_fields)


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", metavar="R", help="only the messages sent by role R")
    p.add_argument(
        "--search", metavar="S", help="only the messages containing S (case-insensitive)"
    )


def _as_role(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--as",
        dest="as_role",
        metavar="ROLE",
        help="the session exactly as role ROLE saw it: its private messages kept, others' left out",
    )


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rolecall sessions`` and its actions to the top-level subparsers ``sub``."""
    sessions = add_command(
        sub,
        "sessions",
        help=summary("sessions"),
        description="Browse and export the sessions stored in the data directory.",
        examples=[
            "rolecall sessions list",
            "rolecall sessions show 20261122-101500-a1b2c3 --role teacher",
            "rolecall sessions trace 20261122-101500-a1b2c3",
            "rolecall sessions export 20261122-101500-a1b2c3 --format html --out lesson.html",
            "rolecall sessions delete 20261122-101500-a1b2c3",
        ],
    )
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    p = add_command(
        ssub,
        "list",
        help="the stored sessions, newest first: id, world, title, status, stop reason, "
        "messages, tokens, cost and what each is about (its first human message, else its "
        "topic)",
        examples=[
            "rolecall sessions list",
            "rolecall sessions list --world panel --status paused --limit 5",
            'rolecall sessions list --search "heat island"',
            "rolecall sessions list --json --data-dir /tmp/rc",
            "rolecall sessions list --batch sweep1",
        ],
    )
    p.add_argument("--batch", metavar="NAME", help="only the sessions of the batch NAME")
    p.add_argument("--world", metavar="W", help="only the sessions of world W (its name)")
    p.add_argument(
        "--status",
        choices=("created", "running", "paused", "finished"),
        help="only the sessions in this state",
    )
    p.add_argument(
        "--search",
        metavar="TEXT",
        help="only the sessions with a message holding every word of TEXT (full-text)",
    )
    p.add_argument("--limit", metavar="N", type=_positive, help="only the N most recently updated")
    p.add_argument("--all", action="store_true", help="also the sessions with no message")
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON array, an object per session: " + ", ".join(_list_keys()),
    )
    p.add_argument(
        "--tree", action="store_true", help="forks under their parent, with the fork point"
    )
    add_manage_flags(p)
    p = add_command(
        ssub,
        "fork",
        help="a new session whose history is the session's m1..mK; prints its id",
        description=(
            "Fork a session right after message mK: the new session has m1..mK (mK's text "
            "replaced by --edit), the flow pointer, loop counters, turn counts and budgets "
            "as they were right after mK, and its own memory files. `rolecall resume NEW` "
            "continues it."
        ),
        examples=[
            "rolecall sessions fork 20261122-101500-a1b2c3 --at m4",
            "rolecall sessions fork 20261122-101500-a1b2c3 --at m4 --edit 'Why is that?'",
            "rolecall sessions fork 20261122-101500-a1b2c3 --at m6 --model openai/gpt-4o --json",
        ],
    )
    p.add_argument("session", metavar="ID", help="the session to fork")
    p.add_argument("--at", required=True, metavar="mK", help="the last message kept, like m4")
    p.add_argument("--edit", metavar="TEXT", help="mK's new text, as its sender would say it")
    p.add_argument("--model", metavar="M", help="the fork's model for every non-scripted role")
    p.add_argument("--json", action="store_true", help="print {session_id, parent, at}")
    add_manage_flags(p)
    p = add_command(
        ssub,
        "show",
        help="a session's transcript as text (who answers whom, steps, loops, tokens)",
        examples=[
            "rolecall sessions show 20261122-101500-a1b2c3",
            "rolecall sessions show 20261122-101500-a1b2c3 --role student --search why",
            "rolecall sessions show 20261122-101500-a1b2c3 -v    # with timestamps",
            "rolecall sessions show 20261122-101500-a1b2c3 --summaries",
        ],
    )
    p.add_argument("session", metavar="ID", help="a session id (see `rolecall sessions list`)")
    _filters(p)
    p.add_argument(
        "--summaries",
        action="store_true",
        help="under each line saying a role now reads a running summary, the summary itself",
    )
    _as_role(p)
    add_manage_flags(p)
    p = add_command(
        ssub,
        "trace",
        help="a session's execution log: one row per executed flow step",
        description=(
            "The execution log: order, step, speaker, message, loop iteration (earlier runs "
            "of that step), result, tokens, start time and duration."
        ),
        examples=["rolecall sessions trace 20261122-101500-a1b2c3"],
    )
    p.add_argument("session", metavar="ID", help="a session id")
    add_manage_flags(p)
    p = add_command(
        ssub,
        "export",
        help="export a session as Markdown, one HTML page, or the session file (JSON)",
        description=(
            "Export a session. md and html show who answers whom, steps and loop "
            "iterations, the stop reason and a per-role token table, and can be filtered; "
            "json is the versioned session document (memory files included) that "
            "`rolecall resume FILE` continues."
        ),
        examples=[
            "rolecall sessions export 20261122-101500-a1b2c3 --format md > lesson.md",
            "rolecall sessions export 20261122-101500-a1b2c3 --format html --out lesson.html",
            "rolecall sessions export 20261122-101500-a1b2c3 --format html --role teacher "
            "--out teacher.html",
            "rolecall sessions export 20261122-101500-a1b2c3 --format json --out saved.json",
            "rolecall sessions export 20261122-101500-a1b2c3 --format pdf --out lesson.pdf",
        ],
    )
    p.add_argument("session", metavar="ID", help="a session id")
    p.add_argument(
        "--format",
        required=True,
        choices=("md", "html", "json", "pdf"),
        help="md, html, json or pdf (pdf needs --out and `pip install 'rolecall[pdf]'`)",
    )
    p.add_argument("--out", metavar="FILE", help="write here (atomically) instead of stdout")
    _filters(p)
    _as_role(p)
    add_manage_flags(p)
    from rolecall.cli.nats_cmd import add_import_parser

    add_import_parser(ssub)
    p = add_command(
        ssub,
        "delete",
        help="delete a session: its stored rows and its memory folder, nothing else",
        examples=["rolecall sessions delete 20261122-101500-a1b2c3"],
    )
    p.add_argument("session", metavar="ID", help="a session id")
    add_manage_flags(p)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


# =================================================================== sessions
def cmd_sessions(args: argparse.Namespace) -> int:
    action: str = args.sessions_command
    if action == "import":
        from rolecall.cli.nats_cmd import cmd_import

        return cmd_import(args)
    opts = SessionsOptions.of(args)
    if action == "list":
        return _sessions_list(opts)
    if action == "delete":
        return _sessions_delete(opts)
    if action == "fork":
        from rolecall.cli.manage.fork_cmd import sessions_fork

        return sessions_fork(opts)
    return _sessions_read(opts)


def _sessions_list(opts: SessionsOptions) -> int:
    from rolecall.paths import db_path
    from rolecall.storage.catalog import SessionFilter

    data = data_dir_of(opts)
    if not db_path(data).is_file():
        _empty(opts, data)
        return 0

    batch = opts.batch
    where = SessionFilter(
        world=opts.world,
        status=opts.status,
        search=opts.search,
        batch=batch,
        limit=opts.limit,
        with_empty=opts.all or batch is not None,  # a batch lists all of its runs
    )

    async def body(store: DataStore) -> tuple[list[SessionRow], dict[str, tuple[str, str]]]:
        from rolecall.batch.tables import BatchTables
        from rolecall.storage.data_store import sqlite_only

        if batch is not None:
            tables = BatchTables(sqlite_only(store, "sessions list --batch"))
            if await tables.plan(batch) is None:
                from rolecall.errors import UsageError

                known = await tables.names()
                listed = ", ".join(known[-10:]) if known else "none stored"
                raise UsageError(f"no batch named {batch!r} (batches: {listed})")
        return await store.list_sessions(where), await store.forks()

    rows, forks = with_store(opts, body, missing="no sessions")
    tree = opts.tree
    if tree:
        from rolecall.cli.manage.fork_cmd import tree_order

        rows = tree_order(rows, forks)
    if opts.json:
        _print_json([_record(r) for r in rows])
        return 0
    if not rows:
        _empty(opts, data)
        return 0
    print(_list_table(rows, forks if tree else {}))
    return 0


def _record(r: SessionRow) -> dict[str, object]:
    """One session as `sessions list --json` prints it (SessionSummary, shared with the
    web view's session list)."""
    from rolecall.storage.catalog import SessionSummary

    return SessionSummary.of(r).model_dump()


def _print_json(records: list[dict[str, object]]) -> None:
    import json

    print(json.dumps(records, ensure_ascii=False, indent=2))


def _list_table(rows: list[SessionRow], forks: dict[str, tuple[str, str]]) -> str:
    """The table of `sessions list`; ``forks`` (with --tree) indents each fork under its
    parent and names its fork point."""
    from rolecall.money import money

    table: list[tuple[str, ...]] = [
        (
            f"{'  ' * _depth(r.id, forks)}└ {r.id} @{forks[r.id][1]}" if r.id in forks else r.id,
            r.world_name,
            clip_cell(r.title, 30) or "-",
            f"paused ({r.pause_reason})" if r.state == "paused" and r.pause_reason else r.state,
            r.stop_reason or "-",
            str(r.messages),
            f"↑{r.input_tokens:,} ↓{r.output_tokens:,}" if r.messages else "-",
            money(r.cost_usd) if r.messages else "-",
            clip_cell(r.preview or r.title, 50),
        )
        for r in rows
    ]
    header = ("ID", "WORLD", "TITLE", "STATUS", "STOP", "MSGS", "TOKENS", "COST", "PREVIEW")
    return text_table(header, table, right={5, 6, 7})


def _empty(opts: SessionsOptions, data: object) -> None:
    if opts.json:
        _print_json([])
        return
    filtered = any((opts.world, opts.status, opts.search, opts.limit, opts.batch))
    confirm(
        opts, f"no sessions match in {data}" if filtered else f"no sessions stored in {data} yet"
    )


def _depth(sid: str, forks: dict[str, tuple[str, str]]) -> int:
    depth, seen = 0, {sid}
    while sid in forks and forks[sid][0] not in seen:
        sid = forks[sid][0]
        seen.add(sid)
        depth += 1
    return depth - 1


def _sessions_read(opts: SessionsOptions) -> int:
    """``show``, ``trace`` and ``export``: load the document, render it."""
    from rolecall.errors import UsageError

    sid = resolve_session_id(opts.session, opts)
    action: str = opts.sessions_command
    fmt, role, search, as_role = opts.format, opts.role, opts.search, opts.as_role
    if fmt == "json" and as_role is not None:
        raise UsageError("--as shows md, html and pdf exports; --format json is the whole session")
    if fmt == "json" and (role is not None or search is not None):
        raise UsageError(
            "--role and --search filter the md and html exports; "
            "--format json is always the whole session document"
        )

    scored: list[StoredScore] = []

    async def body(store: DataStore) -> SessionDocument:
        from rolecall.storage.scores import scores_of

        # every rendering but json's shows the sources of citations: they are in events
        doc = await store.load(sid, with_events=True)
        if action == "show":  # compare.md: the scores given after the fact, after it
            scored.extend((await scores_of(store, [doc.session_id])).get(doc.session_id, ()))
        return doc

    doc = with_store(opts, body, missing=f"no session '{sid}'")
    check_role_filter(doc, role)
    if as_role is not None and as_role != "human" and as_role not in role_ids_of(doc):
        from rolecall.world.library import suggest

        known = [*role_ids_of(doc), "human"]
        raise UsageError(
            f"--as {as_role}: session {doc.session_id} has no role '{as_role}'"
            f"{suggest(as_role, known, listing=True)}"
        )

    from rolecall import export

    if action == "show":
        text = export.to_text(
            doc,
            role=role,
            search=search,
            times=opts.verbose > 0,
            summaries=opts.summaries,
            seen_by=as_role,
        )
        print(text, end="")
        for item in scored:
            print(f"score #{item.number} {item.short()} ({item.model}, {item.scored_at})")
            if item.comment:
                print(f"  {item.comment}")
        return 0
    if action == "trace":
        print(export.to_trace(doc), end="")
        return 0
    if fmt == "json":
        from rolecall.memory import MemoryFiles

        memory = MemoryFiles.in_data_dir(data_dir_of(opts))
        doc.memory = {rid: memory.read(sid, rid) for rid in role_ids_of(doc)}
        # the session file leaves streaming chunks out: the messages hold their text
        doc.events = [e for e in doc.events if e.get("topic") != "sse"]
        if opts.out:
            from pathlib import Path

            from rolecall.storage.document import write_session_file

            write_session_file(Path(opts.out), doc)
        else:
            print(doc.model_dump_json())
    elif fmt == "pdf":
        from pathlib import Path

        from rolecall.export.pdf import to_pdf

        if not opts.out:
            raise UsageError("--format pdf writes a file: give --out FILE.pdf")

        def warn(text: str) -> None:
            print(f"warning: {text}", file=sys.stderr)

        pdf = to_pdf(doc, role=role, search=search, warn=warn, seen_by=as_role)
        write_file(Path(opts.out), pdf)
    else:
        text = (export.to_markdown if fmt == "md" else export.to_html)(
            doc, role=role, search=search, seen_by=as_role
        )
        if opts.out:
            from pathlib import Path

            write_file(Path(opts.out), text)
        else:
            print(text, end="")
    if opts.out:
        shown = export.select(doc, role=role, search=search, seen_by=as_role).describe()
        confirm(opts, f"exported session {sid} as {fmt} to {opts.out}: {shown}")
    return 0


def _sessions_delete(opts: SessionsOptions) -> int:
    import shutil

    from rolecall.errors import StorageError, UsageError
    from rolecall.memory import MemoryFiles

    sid = resolve_session_id(opts.session, opts)
    data = data_dir_of(opts)
    folder = MemoryFiles.in_data_dir(data).root / sid

    def remove_folder(count: int | None) -> bool:
        if not folder.is_dir() or folder.is_symlink():
            return False
        try:
            shutil.rmtree(folder)
        except OSError as exc:
            done = f"deleted the stored session {sid} but not" if count is not None else ""
            what = done or f"cannot delete session {sid}:"
            raise StorageError(f"{what} its memory folder {folder}: {exc.strerror or exc}") from exc
        return True

    async def body(store: DataStore) -> tuple[int | None, bool]:
        claim = store.claim(sid)  # refused while a live session writes it: nothing deleted
        try:
            count = await store.delete(sid)
            return count, remove_folder(count)
        finally:
            claim.release()

    from rolecall.paths import db_path

    count: int | None = None
    has_folder = False
    if db_path(data).is_file():
        count, has_folder = with_store(opts, body, missing=f"no session '{sid}'", read_only=False)
    else:
        has_folder = remove_folder(None)
    if count is None and not has_folder:
        from rolecall.cli.hints import command

        listing = command("sessions list", opts)
        raise UsageError(f"no session '{sid}' in {db_path(data)} (see `{listing}`)")
    parts = []
    if count is not None:
        noun = "message" if count == 1 else "messages"
        parts.append(f"{count} {noun} with their events, execution log and drafts")
    if has_folder:
        parts.append(f"memory folder {folder}")
    confirm(opts, f"deleted session {sid}: {'; '.join(parts)}")
    return 0
