"""The management commands: ``rolecall sessions``, ``rolecall roles`` and ``rolecall memory``.

Wiring: :func:`register` adds the three commands to the top-level subparsers and returns
their handlers by command name; each handler takes the parsed arguments and returns the
exit code, raising :class:`~rolecall.errors.UsageError` (exit 2) or
:class:`~rolecall.errors.StorageError` (exit 1) like every other command.

Only ``argparse`` and ``typing`` are imported at module level so ``rolecall --help``
stays fast; each handler imports what it needs. Every id that ends up in a path (session,
agent, role, template) is checked with :func:`rolecall.paths.safe_id` before any file is
opened or created, and a data directory is never created by a command that only reads.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from rolecall.session.document import SessionDocument
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.world.library import RoleLibrary

    Handler = Callable[[argparse.Namespace], int]

T = TypeVar("T")

ROLE_ID_PATTERN = r"^[a-z][a-z0-9_-]*$"
ROLE_FIELD_FLAGS = ("name", "description", "system_prompt", "style", "constraints")


def _readonly(role_id: str) -> str:
    return (
        f"role '{role_id}' is built in and read-only; copy it: "
        f"rolecall roles create my-{role_id} --from {role_id}"
    )


# =================================================================== parsers
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="where sessions and roles are stored (env ROLECALL_HOME)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the result itself")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output and logs (-vv)")
    p.add_argument("--log-file", help="write structured JSON logs to this file")


def _add(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    *,
    help: str,
    description: str | None = None,
    examples: list[str],
) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=help,
        description=description or help[:1].upper() + help[1:] + ".",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--role", metavar="R", help="only the messages sent by role R")
    p.add_argument(
        "--search", metavar="S", help="only the messages containing S (case-insensitive)"
    )


def _role_field_flags(p: argparse.ArgumentParser, *, editing: bool) -> None:
    p.add_argument("--name", metavar="N", help="display name, e.g. 'Ms. Rivera'")
    p.add_argument("--description", metavar="D", help="one line: who this role is")
    p.add_argument(
        "--system-prompt", dest="system_prompt", metavar="P", help="what the model is told"
    )
    p.add_argument("--style", metavar="S", help="tone: formal, casual, strict, ... free text")
    p.add_argument(
        "--constraint",
        dest="constraints",
        action="append",
        metavar="C",
        help="a rule the role follows; repeat for several"
        + (" (replaces the role's list)" if editing else ""),
    )
    if editing:
        p.add_argument(
            "--no-constraints",
            dest="no_constraints",
            action="store_true",
            help="remove every constraint",
        )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> dict[str, Handler]:
    """Add ``sessions``, ``roles`` and ``memory`` to ``sub``; their handlers by command name."""
    # ---------------------------------------------------------------- sessions
    sessions = _add(
        sub,
        "sessions",
        help="list, show, trace, export and delete stored sessions",
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
    p = _add(
        ssub,
        "list",
        help="every stored session: id, world, state, stop reason, messages, last update",
        examples=["rolecall sessions list", "rolecall sessions list --data-dir /tmp/rc"],
    )
    _common(p)
    p = _add(
        ssub,
        "show",
        help="a session's transcript as text (who answers whom, steps, loops, tokens)",
        examples=[
            "rolecall sessions show 20261122-101500-a1b2c3",
            "rolecall sessions show 20261122-101500-a1b2c3 --role student --search why",
            "rolecall sessions show 20261122-101500-a1b2c3 -v    # with timestamps",
        ],
    )
    p.add_argument("session", metavar="ID", help="a session id (see `rolecall sessions list`)")
    _filters(p)
    _common(p)
    p = _add(
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
    _common(p)
    p = _add(
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
        ],
    )
    p.add_argument("session", metavar="ID", help="a session id")
    p.add_argument(
        "--format", required=True, choices=("md", "html", "json"), help="md, html or json"
    )
    p.add_argument("--out", metavar="FILE", help="write here (atomically) instead of stdout")
    _filters(p)
    _common(p)
    p = _add(
        ssub,
        "delete",
        help="delete a session: its stored rows and its memory folder, nothing else",
        examples=["rolecall sessions delete 20261122-101500-a1b2c3"],
    )
    p.add_argument("session", metavar="ID", help="a session id")
    _common(p)

    # ------------------------------------------------------------------- roles
    roles = _add(
        sub,
        "roles",
        help="the role library: built-in templates and your own roles",
        description=(
            "The role library. Built-in roles are read-only; your roles are YAML files in "
            "<data dir>/roles/ and usable as `template: <id>` in a world, like built-ins."
        ),
        examples=[
            "rolecall roles list",
            "rolecall roles show teacher",
            "rolecall roles create my-teacher --from teacher --style strict",
            "rolecall roles edit my-teacher --constraint 'Use SI units.'",
            "rolecall roles delete my-teacher",
        ],
    )
    rsub = roles.add_subparsers(dest="roles_command", metavar="ACTION", required=True)
    p = _add(
        rsub,
        "list",
        help="every role: built-ins (read-only) and your own",
        examples=["rolecall roles list"],
    )
    _common(p)
    p = _add(
        rsub,
        "show",
        help="a role's fields as YAML",
        examples=["rolecall roles show teacher", "rolecall roles show my-teacher"],
    )
    p.add_argument("id", metavar="ID", help="a role id")
    _common(p)
    p = _add(
        rsub,
        "create",
        help="create a user role (from scratch, or a copy of another role)",
        description=(
            "Create <data dir>/roles/ID.yaml. ID: lowercase letters, digits, '_' and '-', "
            "starting with a letter; not a built-in's id. Without --from, --system-prompt "
            "is required."
        ),
        examples=[
            "rolecall roles create my-teacher --from teacher --name 'Ms. Rivera'",
            "rolecall roles create critic2 --system-prompt 'You find the weakest claim.' "
            "--constraint 'At most 60 words.' --constraint 'One point per turn.'",
        ],
    )
    p.add_argument("id", metavar="ID", help="the new role's id")
    p.add_argument(
        "--from",
        dest="from_template",
        metavar="TEMPLATE",
        help="start from this role (built-in or yours); flags override its fields",
    )
    _role_field_flags(p, editing=False)
    _common(p)
    p = _add(
        rsub,
        "edit",
        help="change fields of one of your roles (built-ins are read-only)",
        description=(
            "Change fields of a user role. Saved sessions keep the roles they ran with: "
            "editing a role never changes them."
        ),
        examples=[
            "rolecall roles edit my-teacher --system-prompt 'You teach with Socratic questions.'",
            "rolecall roles edit my-teacher --constraint 'At most 80 words.'",
            "rolecall roles edit my-teacher --no-constraints",
        ],
    )
    p.add_argument("id", metavar="ID", help="a user role id")
    _role_field_flags(p, editing=True)
    _common(p)
    p = _add(
        rsub,
        "delete",
        help="delete one of your roles (built-ins are read-only)",
        examples=["rolecall roles delete my-teacher"],
    )
    p.add_argument("id", metavar="ID", help="a user role id")
    _common(p)

    # ------------------------------------------------------------------ memory
    memory = _add(
        sub,
        "memory",
        help="show or clear an agent's passive memory in a session",
        description=(
            "Each agent keeps a memory file per session: every message it received or "
            "wrote. Clearing archives the file beside it and resets the agent's turn count; "
            "its prompts then start after the current last message."
        ),
        examples=[
            "rolecall memory show 20261122-101500-a1b2c3 teacher",
            "rolecall memory clear 20261122-101500-a1b2c3 teacher",
        ],
    )
    msub = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    for action, text in (
        ("show", "an agent's memory entries, oldest first"),
        ("clear", "archive an agent's memory file and reset its turn count"),
    ):
        p = _add(
            msub,
            action,
            help=text,
            examples=[f"rolecall memory {action} 20261122-101500-a1b2c3 teacher"],
        )
        p.add_argument("session", metavar="SESSION", help="a session id")
        p.add_argument("agent", metavar="AGENT", help="a role id of that session")
        _common(p)

    return {"sessions": cmd_sessions, "roles": cmd_roles, "memory": cmd_memory}


# =================================================================== helpers
def _say(args: argparse.Namespace, text: str) -> None:
    """A confirmation (not the command's result): silent with -q."""
    if not getattr(args, "quiet", False):
        print(text, flush=True)


def _data(args: argparse.Namespace) -> Path:
    from rolecall.paths import data_dir

    return data_dir(getattr(args, "data_dir", None))


def _session_id(value: str) -> str:
    from rolecall.paths import safe_id

    return safe_id(value, "session id")


def _with_store(
    args: argparse.Namespace, body: Callable[[SqliteStore], Awaitable[T]], *, missing: str
) -> T:
    """Run ``body`` with the data directory's store open; ``missing`` if there is none.

    A command that reads never creates the data directory or the database.
    """
    import anyio

    from rolecall.errors import UsageError
    from rolecall.paths import db_path
    from rolecall.storage.sqlite import SqliteStore

    path = db_path(_data(args))
    if not path.is_file():
        raise UsageError(f"{missing} in {path} (no sessions stored yet)")

    async def main() -> T:
        async with SqliteStore(path) as store:
            return await body(store)

    return anyio.run(main)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        out = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([fmt(header), *(fmt(r) for r in rows)])


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file beside it and a rename."""
    import os
    import tempfile
    from pathlib import Path as _Path

    from rolecall.errors import StorageError

    path = _Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            _Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _role_ids_of(doc: SessionDocument) -> list[str]:
    roles = doc.world.get("roles")
    if not isinstance(roles, list):
        return []
    return [str(r["id"]) for r in roles if isinstance(r, dict) and "id" in r]


def _check_role_filter(doc: SessionDocument, role: str | None) -> None:
    from rolecall.errors import UsageError
    from rolecall.world.library import suggest

    if role is None:
        return
    known = list(dict.fromkeys([*_role_ids_of(doc), *(m.sender for m in doc.messages)]))
    if role not in known:
        raise UsageError(
            f"session {doc.session_id} has no role '{role}'{suggest(role, known, listing=True)}"
        )


# =================================================================== sessions
def cmd_sessions(args: argparse.Namespace) -> int:
    action: str = args.sessions_command
    if action == "list":
        return _sessions_list(args)
    if action == "delete":
        return _sessions_delete(args)
    return _sessions_read(args)


def _sessions_list(args: argparse.Namespace) -> int:
    import json

    from rolecall.paths import db_path

    data = _data(args)
    if not db_path(data).is_file():
        _say(args, f"no sessions stored in {data} yet")
        return 0

    async def body(store: SqliteStore) -> list[tuple[str, ...]]:
        rows = await store.list_sessions()
        async with store.db.execute("SELECT id, state_json FROM sessions") as cur:
            states = {sid: text for sid, text in await cur.fetchall()}
        out: list[tuple[str, ...]] = []
        for r in rows:
            state = r.state
            if r.state == "paused":
                try:
                    reason = json.loads(states.get(r.id, "{}")).get("pause_reason")
                except ValueError:
                    reason = None
                state = f"paused ({reason})" if reason else state
            out.append(
                (
                    r.id,
                    r.world_name,
                    state,
                    r.stop_reason or "-",
                    str(r.messages),
                    r.updated_at[:19].replace("T", " "),
                    _clip(r.title, 40),
                )
            )
        return out

    rows = _with_store(args, body, missing="no sessions")
    if not rows:
        _say(args, f"no sessions stored in {data} yet")
        return 0
    header = ("ID", "WORLD", "STATE", "STOP", "MSGS", "UPDATED", "TITLE")
    print(_table(header, rows, right={4}))
    return 0


def _sessions_read(args: argparse.Namespace) -> int:
    """``show``, ``trace`` and ``export``: load the document, render it."""
    from rolecall.errors import UsageError

    sid = _session_id(args.session)
    action: str = args.sessions_command
    fmt: str | None = getattr(args, "format", None)
    role: str | None = getattr(args, "role", None)
    search: str | None = getattr(args, "search", None)
    if fmt == "json" and (role is not None or search is not None):
        raise UsageError(
            "--role and --search filter the md and html exports; "
            "--format json is always the whole session document"
        )

    async def body(store: SqliteStore) -> SessionDocument:
        return await store.load(sid, with_events=(fmt == "json"))

    doc = _with_store(args, body, missing=f"no session '{sid}'")
    _check_role_filter(doc, role)

    from rolecall import export

    if action == "show":
        print(export.to_text(doc, role=role, search=search, times=args.verbose > 0), end="")
        return 0
    if action == "trace":
        print(export.to_trace(doc), end="")
        return 0
    if fmt == "json":
        from rolecall.memory import MemoryFiles

        memory = MemoryFiles.in_data_dir(_data(args))
        doc.memory = {rid: memory.read(sid, rid) for rid in _role_ids_of(doc)}
        # the session file leaves streaming chunks out: the messages hold their text
        doc.events = [e for e in doc.events if e.get("topic") != "sse"]
        if args.out:
            from pathlib import Path

            from rolecall.session.document import write_session_file

            write_session_file(Path(args.out), doc)
        else:
            print(doc.model_dump_json())
    else:
        text = (export.to_markdown if fmt == "md" else export.to_html)(
            doc, role=role, search=search
        )
        if args.out:
            from pathlib import Path

            _atomic_write(Path(args.out), text)
        else:
            print(text, end="")
    if args.out:
        shown = export.select(doc, role=role, search=search).describe()
        _say(args, f"exported session {sid} as {fmt} to {args.out}: {shown}")
    return 0


def _sessions_delete(args: argparse.Namespace) -> int:
    import shutil

    from rolecall.errors import StorageError, UsageError
    from rolecall.memory import MemoryFiles

    sid = _session_id(args.session)
    data = _data(args)
    folder = MemoryFiles.in_data_dir(data).root / sid

    async def body(store: SqliteStore) -> int | None:
        async with store.db.execute(
            "SELECT (SELECT COUNT(*) FROM messages WHERE session_id = ?) "
            "FROM sessions WHERE id = ?",
            (sid, sid),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        await store.delete(sid)
        return int(row[0])

    from rolecall.paths import db_path

    count: int | None = None
    if db_path(data).is_file():
        count = _with_store(args, body, missing=f"no session '{sid}'")
    has_folder = folder.is_dir() and not folder.is_symlink()
    if count is None and not has_folder:
        raise UsageError(f"no session '{sid}' in {db_path(data)} (see `rolecall sessions list`)")
    if has_folder:
        try:
            shutil.rmtree(folder)
        except OSError as exc:
            raise StorageError(
                f"deleted the stored session {sid} but not its memory folder {folder}: "
                f"{exc.strerror or exc}"
            ) from exc
    parts = []
    if count is not None:
        parts.append(f"{count} messages with their events, execution log and drafts")
    if has_folder:
        parts.append(f"memory folder {folder}")
    _say(args, f"deleted session {sid}: {'; '.join(parts)}")
    return 0


# =================================================================== roles
def role_library(args: argparse.Namespace) -> RoleLibrary:
    """The role library of the data directory: built-ins plus ``<data dir>/roles/*.yaml``.

    ``run``/``chat`` should load worlds with it so user roles work as ``template:``.
    """
    from rolecall.world.library import RoleLibrary

    return RoleLibrary(_data(args) / "roles")


def _role_id(value: str, what: str = "role id") -> str:
    import re

    from rolecall.errors import UsageError
    from rolecall.paths import safe_id

    safe_id(value, what)
    if not re.match(ROLE_ID_PATTERN, value):
        raise UsageError(
            f"{what} {value!r} is not valid: use lowercase letters, digits, '_' and '-', "
            "starting with a letter (e.g. my-teacher)"
        )
    return value


def _field_updates(args: argparse.Namespace) -> dict[str, Any]:
    updates: dict[str, Any] = {}
    for key in ROLE_FIELD_FLAGS:
        value = getattr(args, key, None)
        if value is None:
            continue
        updates[key] = [c.strip() for c in value] if key == "constraints" else value.strip()
    if getattr(args, "no_constraints", False):
        from rolecall.errors import UsageError

        if "constraints" in updates:
            raise UsageError("give either --constraint or --no-constraints, not both")
        updates["constraints"] = []
    return updates


def _validated(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` if it makes a valid role (worlds.md fields), else every problem listed."""
    from pydantic import ValidationError

    from rolecall.errors import UsageError
    from rolecall.world.models import Role

    try:
        Role.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(role)"
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"  {where}: {msg}")
        raise UsageError(f"{source}: not a valid role\n" + "\n".join(problems)) from None
    return data


def _ordered(data: dict[str, Any]) -> dict[str, Any]:
    from rolecall.world.library import ROLE_FIELDS

    first = {k: data[k] for k in ROLE_FIELDS if k in data}
    return {**first, **{k: v for k, v in data.items() if k not in first}}


def _dump_yaml(data: dict[str, Any]) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(_ordered(data), Dumper=Dumper, sort_keys=False, allow_unicode=True, width=88)


def _read_user_role(path: Path) -> dict[str, Any]:
    import yaml

    from rolecall.errors import StorageError, UsageError

    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a role file must hold a mapping of role fields")
    return data


def _create_file(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` whole, refusing to replace an existing file."""
    import os
    import tempfile
    from pathlib import Path as _Path

    from rolecall.errors import StorageError, UsageError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.link(tmp, path)  # atomic, and fails if path exists
        finally:
            _Path(tmp).unlink(missing_ok=True)
    except FileExistsError:
        raise UsageError(f"role file {path} already exists") from None
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def cmd_roles(args: argparse.Namespace) -> int:
    action: str = args.roles_command
    library = role_library(args)
    if action == "list":
        return _roles_list(args, library)
    role_id = _role_id(args.id)
    if action == "show":
        return _roles_show(args, library, role_id)
    if action == "create":
        return _roles_create(args, library, role_id)
    if action == "edit":
        return _roles_edit(args, library, role_id)
    return _roles_delete(args, library, role_id)


def _roles_list(args: argparse.Namespace, library: RoleLibrary) -> int:
    from rolecall.errors import RolecallError
    from rolecall.world.library import builtin_roles

    rows: list[tuple[str, ...]] = []
    for rid in sorted(builtin_roles()):
        role = builtin_roles()[rid]
        rows.append((rid, "built-in", str(role.get("name", "")), _clip(role["description"], 60)))
    user = library.user_ids()
    for rid in user:
        if library.is_builtin(rid):
            rows.append((rid, "user", "", "(ignored: a built-in has this id)"))
            continue
        try:
            role = library.get(rid)
            rows.append(
                (
                    rid,
                    "user",
                    str(role.get("name", "")),
                    _clip(str(role.get("description", "")), 60),
                )
            )
        except (RolecallError, OSError, ValueError) as exc:
            rows.append((rid, "user", "", f"(invalid: {_clip(str(exc), 50)})"))
    rows.sort(key=lambda r: (r[1] != "user", r[0]))
    print(_table(("ID", "KIND", "NAME", "DESCRIPTION"), rows, right=set()))
    _say(
        args,
        f"\n{len(builtin_roles())} built-in (read-only), {len(user)} user "
        f"({library.user_dir}); use one in a world as `template: <id>`",
    )
    return 0


def _roles_show(args: argparse.Namespace, library: RoleLibrary, role_id: str) -> int:
    data = library.get(role_id)
    if library.is_builtin(role_id):
        copy = f"rolecall roles create my-{role_id} --from {role_id}"
        head = f"# {role_id}: built in, read-only (copy it: {copy})"
    else:
        head = f"# {role_id}: user role, {library.user_dir}/{role_id}.yaml"
    print(head)
    print(_dump_yaml(data), end="")
    return 0


def _roles_create(args: argparse.Namespace, library: RoleLibrary, role_id: str) -> int:
    from rolecall.errors import UsageError

    assert library.user_dir is not None
    if library.is_builtin(role_id):
        raise UsageError(
            f"role '{role_id}' is built in; pick another id, or copy it: "
            f"rolecall roles create my-{role_id} --from {role_id}"
        )
    path = library.user_dir / f"{role_id}.yaml"
    if path.exists():
        raise UsageError(
            f"role '{role_id}' already exists ({path}); change it with "
            f"`rolecall roles edit {role_id} ...` or delete it first"
        )
    updates = _field_updates(args)
    data: dict[str, Any] = {}
    template = getattr(args, "from_template", None)
    if template is not None:
        data = library.get(_role_id(template, "template id"))
        data.pop("template", None)
    elif not updates.get("system_prompt"):
        raise UsageError(
            "a new role needs --system-prompt P (or --from TEMPLATE to start from another role)"
        )
    data.update(updates)
    data["id"] = role_id
    text = _dump_yaml(_validated(data, f"role '{role_id}'"))
    _create_file(path, text)
    origin = f" from {template}" if template else ""
    _say(
        args, f"created role {role_id}{origin}: {path}; use it in a world as `template: {role_id}`"
    )
    return 0


def _user_role_path(library: RoleLibrary, role_id: str) -> Path:
    from rolecall.errors import UsageError
    from rolecall.world.library import suggest

    assert library.user_dir is not None
    if library.is_builtin(role_id):
        raise UsageError(_readonly(role_id))
    path = library.user_dir / f"{role_id}.yaml"
    if not path.is_file():
        users = library.user_ids()
        hint = (
            suggest(role_id, users)
            if users
            else " (you have no roles yet: rolecall roles create ...)"
        )
        raise UsageError(f"no user role '{role_id}' in {library.user_dir}{hint}")
    return path


def _roles_edit(args: argparse.Namespace, library: RoleLibrary, role_id: str) -> int:
    from rolecall.errors import UsageError

    path = _user_role_path(library, role_id)
    updates = _field_updates(args)
    if not updates:
        raise UsageError(
            "nothing to change: give at least one of --name, --description, --system-prompt, "
            "--style, --constraint, --no-constraints"
        )
    data = _read_user_role(path)
    data.update(updates)
    data["id"] = role_id
    _atomic_write(path, _dump_yaml(_validated(data, str(path))))
    _say(
        args,
        f"updated role {role_id} ({', '.join(updates)}); sessions already saved keep the "
        "roles they ran with",
    )
    return 0


def _roles_delete(args: argparse.Namespace, library: RoleLibrary, role_id: str) -> int:
    from rolecall.errors import StorageError

    path = _user_role_path(library, role_id)
    try:
        path.unlink()
    except OSError as exc:
        raise StorageError(f"cannot delete {path}: {exc.strerror or exc}") from exc
    _say(args, f"deleted role {role_id} ({path}); saved sessions keep their copy")
    return 0


# =================================================================== memory
async def reset_agent_memory(store: SqliteStore, session_id: str, agent: str) -> int:
    """In the stored session: ``agent``'s turn count to 0, its memory start to now.

    One transaction on the store's connection. The state keeps the JSON shape of
    :class:`~rolecall.session.document.StateDoc`; ``memory_start[agent]`` becomes the
    number of stored messages, which is returned.
    """
    import sqlite3
    from datetime import UTC, datetime

    from rolecall.errors import StorageError, UsageError
    from rolecall.paths import safe_id
    from rolecall.session.document import StateDoc

    sid = safe_id(session_id, "session id")
    db = store.db
    try:
        await db.execute("BEGIN IMMEDIATE")
        try:
            async with db.execute("SELECT state_json FROM sessions WHERE id = ?", (sid,)) as cur:
                row = await cur.fetchone()
            if row is None:
                raise UsageError(f"no session '{sid}' in {store.path}")
            async with db.execute(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)
            ) as cur:
                counted = await cur.fetchone()
            count = int(counted[0]) if counted else 0
            state = StateDoc.model_validate_json(row[0])
            state.turn_counts[agent] = 0
            state.memory_start[agent] = count
            await db.execute(
                "UPDATE sessions SET state_json = ?, updated_at = ? WHERE id = ?",
                (state.model_dump_json(), datetime.now(UTC).isoformat(), sid),
            )
        except BaseException:
            await db.rollback()
            raise
        await db.commit()
    except sqlite3.Error as exc:
        raise StorageError(f"cannot update the session store {store.path}: {exc}") from exc
    return count


def cmd_memory(args: argparse.Namespace) -> int:
    from rolecall.errors import UsageError
    from rolecall.memory import MemoryFiles
    from rolecall.paths import safe_id
    from rolecall.world.library import suggest

    sid = _session_id(args.session)
    agent = safe_id(args.agent, "agent id")
    memory = MemoryFiles.in_data_dir(_data(args))
    clearing = args.memory_command == "clear"

    async def body(store: SqliteStore) -> tuple[SessionDocument, int, Path | None]:
        doc = await store.load(sid, with_events=False)
        agents = _role_ids_of(doc)
        if agent not in agents:
            raise UsageError(f"session {sid} has no agent '{agent}'{suggest(agent, agents)}")
        if not clearing:
            return doc, 0, None
        archive = memory.clear(sid, agent)
        return doc, await reset_agent_memory(store, sid, agent), archive

    doc, start, archive = _with_store(args, body, missing=f"no session '{sid}'")
    path = memory.path(sid, agent)
    if clearing:
        what = f"archived {path.name} as {archive.name}" if archive else "no memory file yet"
        _say(
            args,
            f"cleared the memory of {agent} in session {sid}: {what}; turn count reset; "
            f"its prompts start after message {start}",
        )
        return 0
    entries = memory.read(sid, agent)
    noun = "entry" if len(entries) == 1 else "entries"
    print(f"memory of {agent} in session {sid}: {len(entries)} {noun} ({path})")
    begin = doc.state.memory_start.get(agent, 0)
    if begin:
        print(f"cleared after message {begin}: its prompts use only the messages after it")
    archives = list(path.parent.glob(f"{agent}.*.jsonl.archived")) if path.parent.is_dir() else []
    if archives:
        print(f"{len(archives)} archived file(s) beside it from earlier clears")
    for entry in entries:
        role = entry.get("role")
        if role == "assistant":
            who = "own message"
        elif role == "system":
            who = "system"
        else:
            who = f"from {entry.get('name', '?')}"
        stamp = str(entry.get("ts", ""))[:19].replace("T", " ")
        print(f"\n[{entry.get('message_id', '?')}] {who}  {stamp}".rstrip())
        content = str(entry.get("content", ""))
        for line in content.splitlines() or [""]:
            print(f"  {line}")
    return 0
