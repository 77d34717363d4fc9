"""``rolecall roles``: the role library (built-in templates and user roles)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rolecall.cli.manage.common import (
    add_manage_flags,
    clip_cell,
    confirm,
    data_dir_of,
    text_table,
    write_file,
)
from rolecall.cli.options import Options
from rolecall.cli.registry import add_command, summary

if TYPE_CHECKING:
    from pathlib import Path

    from rolecall.world.library import RoleLibrary


ROLE_ID_PATTERN = r"^[a-z][a-z0-9_-]*$"


@dataclass(frozen=True, slots=True, kw_only=True)
class RolesOptions(Options):
    """``rolecall roles ACTION``: each action's arguments (None where it has none)."""

    roles_command: str  # list, show, create, edit, import, export, delete
    id: str = ""  # ID (every action but list and import has one)
    from_template: str | None = None  # create --from
    name: str | None = None  # --name
    description: str | None = None  # --description
    system_prompt: str | None = None  # --system-prompt
    style: str | None = None  # --style
    constraints: list[str] | None = None  # --constraint, repeated
    no_constraints: bool = False  # edit --no-constraints
    file: str = ""  # import FILE
    role_id: str | None = None  # import --id
    format: str = "card"  # export --format
    out: str | None = None  # export --out


def _copy_command(role_id: str, opts: RolesOptions) -> str:
    """The command that copies a built-in role into the data directory's roles."""
    from rolecall.cli.hints import command

    return command(f"roles create my-{role_id} --from {role_id}", opts)


def _readonly(role_id: str, opts: RolesOptions) -> str:
    return f"role '{role_id}' is built in and read-only; copy it: {_copy_command(role_id, opts)}"


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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rolecall roles`` and its actions to the top-level subparsers ``sub``."""
    roles = add_command(
        sub,
        "roles",
        help=summary("roles"),
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
            "rolecall roles import captain.png",
            "rolecall roles export teacher --format card",
        ],
    )
    rsub = roles.add_subparsers(dest="roles_command", metavar="ACTION", required=True)
    p = add_command(
        rsub,
        "list",
        help="every role: built-ins (read-only) and your own",
        examples=["rolecall roles list"],
    )
    add_manage_flags(p)
    p = add_command(
        rsub,
        "show",
        help="a role's fields as YAML",
        examples=["rolecall roles show teacher", "rolecall roles show my-teacher"],
    )
    p.add_argument("id", metavar="ID", help="a role id")
    add_manage_flags(p)
    p = add_command(
        rsub,
        "create",
        help="create a user role (from scratch, or a copy of another role)",
        description=(
            "Create <data dir>/roles/ID.yaml. ID: lowercase letters, digits, '_' and '-', "
            "starting with a letter; not a built-in's id, nor human, all or system "
            "(reserved in a world). Without --from, --system-prompt is required."
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
    add_manage_flags(p)
    p = add_command(
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
    add_manage_flags(p)
    p = add_command(
        rsub,
        "import",
        help="add a character card (V2/V3 JSON, or a PNG with the card inside) as your role",
        description=(
            "Read a Character Card (SillyTavern's V2 or V3, JSON or PNG) into "
            "<data dir>/roles/ID.yaml: its name, description and personality as the persona, "
            "scenario and first message in the system prompt, example dialogue as the style."
        ),
        examples=[
            "rolecall roles import captain.png",
            "rolecall roles import card.json --id my-captain",
        ],
    )
    p.add_argument("file", metavar="FILE", help="a .json card or a .png with one")
    p.add_argument("--id", dest="role_id", metavar="ID", help="the role's id (default: its name)")
    add_manage_flags(p)
    p = add_command(
        rsub,
        "export",
        help="write a role as a V2 character card (JSON)",
        examples=[
            "rolecall roles export teacher --format card",
            "rolecall roles export my-captain --format card --out captain.json",
        ],
    )
    p.add_argument("id", metavar="ID", help="a role id (built-in or yours)")
    p.add_argument("--format", choices=("card",), default="card", help="card: a V2 card (JSON)")
    p.add_argument("--out", metavar="FILE", help="write it to FILE (default: standard output)")
    add_manage_flags(p)
    p = add_command(
        rsub,
        "delete",
        help="delete one of your roles (built-ins are read-only)",
        examples=["rolecall roles delete my-teacher"],
    )
    p.add_argument("id", metavar="ID", help="a user role id")
    add_manage_flags(p)


# =================================================================== roles
def role_library(opts: Options) -> RoleLibrary:
    """The role library of the data directory: built-ins plus ``<data dir>/roles/*.yaml``.

    ``run``/``chat`` should load worlds with it so user roles work as ``template:``.
    """
    from rolecall.world.library import RoleLibrary

    return RoleLibrary(data_dir_of(opts) / "roles")


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


def _field_updates(opts: RolesOptions) -> dict[str, Any]:
    updates: dict[str, Any] = {}
    given = {
        "name": opts.name,
        "description": opts.description,
        "system_prompt": opts.system_prompt,
        "style": opts.style,
    }
    for key, value in given.items():
        if value is not None:
            updates[key] = value.strip()
    if opts.constraints is not None:
        updates["constraints"] = [c.strip() for c in opts.constraints]
    if opts.no_constraints:
        from rolecall.errors import UsageError

        if "constraints" in updates:
            raise UsageError("give either --constraint or --no-constraints, not both")
        updates["constraints"] = []
    return updates


def _validated(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` if it makes a valid role (worlds.md fields), else every problem listed."""
    from rolecall.errors import UsageError
    from rolecall.world.loader import role_problems

    problems = role_problems(data)
    if problems:
        lines = "\n".join(f"  {p}" for p in problems)
        raise UsageError(f"{source}: not a valid role\n{lines}")
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
    """The role file's fields as written (RoleFileError naming it when it is not a YAML
    mapping in UTF-8, or repeats a key); checked again once edited."""
    from rolecall.world.library import read_role_file

    return read_role_file(path).data


def _create_file(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` whole, refusing to replace an existing file."""
    from rolecall.errors import StorageError, UsageError
    from rolecall.paths import write_atomically

    try:
        write_atomically(path, text, replace=False)
    except FileExistsError:
        raise UsageError(f"role file {path} already exists") from None
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def cmd_roles(args: argparse.Namespace) -> int:
    opts = RolesOptions.of(args)
    action = opts.roles_command
    library = role_library(opts)
    if action == "list":
        return _roles_list(opts, library)
    if action == "import":
        return _roles_import(opts, library)
    role_id = _role_id(opts.id)
    if action == "export":
        return _roles_export(opts, library, role_id)
    if action == "show":
        return _roles_show(opts, library, role_id)
    if action == "create":
        return _roles_create(opts, library, role_id)
    if action == "edit":
        return _roles_edit(opts, library, role_id)
    return _roles_delete(opts, library, role_id)


def _shown(text: str) -> str:
    """``text`` for one line of the terminal: its control characters shown, not obeyed
    (ESC as ␛, NUL as ␀, as the description column), a byte of a file name that is not
    UTF-8 as ``\\xff``, its lines joined."""
    from rolecall.export.common import visible

    try:  # a file name's undecodable byte: as the byte (\xff)
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # any other lone surrogate: as itself (\ud800)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return " ".join(visible(text).split())


def _roles_list(opts: RolesOptions, library: RoleLibrary) -> int:
    """Every role; a user role file that cannot be used is listed as invalid (its
    problems on stderr, naming the file) and the others are listed as usual: exit 0."""
    from rolecall.errors import RolecallError
    from rolecall.world.library import RoleFileError, builtin_roles
    from rolecall.world.loader import role_template

    rows: list[tuple[str, ...]] = []
    for rid in sorted(builtin_roles()):
        role = builtin_roles()[rid]
        rows.append(
            (rid, "built-in", str(role.get("name", "")), clip_cell(role["description"], 60))
        )
    user = library.user_ids()
    broken: list[str] = []
    for rid in user:
        shown_id = _shown(rid)
        if library.is_builtin(rid):
            rows.append((shown_id, "user", "", "(ignored: a built-in has this id)"))
            continue
        try:
            role = role_template(library, rid)
            rows.append(
                (
                    shown_id,
                    "user",
                    _shown(str(role.get("name", ""))),
                    clip_cell(str(role.get("description", "")), 60),
                )
            )
        except RoleFileError as exc:
            problem = _shown(exc.problems[0])
            rows.append((shown_id, "user", "", f"(invalid: {clip_cell(problem, 50)})"))
            path = _shown(str(exc.path))
            broken.extend(f"warning: role file {path}: {_shown(p)}" for p in exc.problems)
        except (RolecallError, OSError, ValueError, RecursionError) as exc:
            file = f"{library.user_dir}/{rid}.yaml"
            problem = str(exc).removeprefix(f"{file}: ")  # the row names it
            rows.append((shown_id, "user", "", f"(invalid: {clip_cell(_shown(problem), 50)})"))
            broken.append(f"warning: role file {_shown(file)}: {_shown(problem)}")
    rows.sort(key=lambda r: (r[1] != "user", r[0]))
    print(text_table(("ID", "KIND", "NAME", "DESCRIPTION"), rows, right=set()))
    confirm(
        opts,
        f"\n{len(builtin_roles())} built-in (read-only), {len(user)} user "
        f"({library.user_dir}); use one in a world as `template: <id>`",
    )
    if broken:
        print("\n".join(broken), file=sys.stderr)
    return 0


def _roles_import(opts: RolesOptions, library: RoleLibrary) -> int:
    """``roles import FILE``: a character card as a new user role."""
    from pathlib import Path

    from rolecall.errors import UsageError
    from rolecall.knowledge.cards import read_card, role_id_for, role_of_card
    from rolecall.world.library import reserved_id

    assert library.user_dir is not None
    card = read_card(Path(opts.file))
    role_id = _role_id(opts.role_id or role_id_for(str(card["name"])))
    reserved = reserved_id(role_id)
    if reserved is not None or library.is_builtin(role_id):
        raise UsageError(
            f"role id {reserved or repr(role_id) + ' is a built-in'}: choose another with --id"
        )
    path = library.user_dir / f"{role_id}.yaml"
    if path.exists():
        raise UsageError(f"role '{role_id}' already exists ({path}); choose another with --id")
    data = _validated(role_of_card(card, role_id), f"{opts.file}")
    _create_file(path, _dump_yaml(data))
    confirm(
        opts,
        f"imported {_shown(str(card['name']))} as role {role_id}: {path}; use it in a world "
        f"as `template: {role_id}`",
    )
    return 0


def _roles_export(opts: RolesOptions, library: RoleLibrary, role_id: str) -> int:
    """``roles export ID --format card``: the role as a V2 character card."""
    import json
    from pathlib import Path

    from rolecall.knowledge.cards import card_of_role
    from rolecall.world.loader import role_template

    data = role_template(library, role_id)
    data.setdefault("id", role_id)
    text = json.dumps(card_of_role(data), ensure_ascii=False, indent=2) + "\n"
    if opts.out is None or opts.out == "-":
        sys.stdout.write(text)
        return 0
    write_file(Path(opts.out), text)
    confirm(opts, f"wrote role {role_id} as a V2 character card: {opts.out}")
    return 0


def _roles_show(opts: RolesOptions, library: RoleLibrary, role_id: str) -> int:
    from rolecall.world.loader import role_template

    data = role_template(library, role_id)  # a broken role file: RoleFileError, exit 2
    if library.is_builtin(role_id):
        copy = _copy_command(role_id, opts)
        head = f"# {role_id}: built in, read-only (copy it: {copy})"
    else:
        head = f"# {role_id}: user role, {library.user_dir}/{role_id}.yaml"
    print(head)
    print(_dump_yaml(data), end="")
    return 0


def _roles_create(opts: RolesOptions, library: RoleLibrary, role_id: str) -> int:
    from rolecall.cli.hints import command
    from rolecall.errors import UsageError
    from rolecall.world.library import reserved_id

    assert library.user_dir is not None
    reserved = reserved_id(role_id)
    if reserved is not None:  # `template: <id>` gives a world role this id
        raise UsageError(f"role id {reserved}")
    if library.is_builtin(role_id):
        raise UsageError(
            f"role '{role_id}' is built in; pick another id, or copy it: "
            f"{_copy_command(role_id, opts)}"
        )
    path = library.user_dir / f"{role_id}.yaml"
    if path.exists():
        raise UsageError(
            f"role '{role_id}' already exists ({path}); change it with "
            f"`{command(f'roles edit {role_id}', opts)} ...` or delete it first"
        )
    updates = _field_updates(opts)
    data: dict[str, Any] = {}
    template = opts.from_template
    if template is not None:
        from rolecall.world.loader import role_template

        data = role_template(library, _role_id(template, "template id"))
    elif not updates.get("system_prompt"):
        raise UsageError(
            "a new role needs --system-prompt P (or --from TEMPLATE to start from another role)"
        )
    data.update(updates)
    data["id"] = role_id
    text = _dump_yaml(_validated(data, f"role '{role_id}'"))
    _create_file(path, text)
    origin = f" from {template}" if template else ""
    confirm(
        opts, f"created role {role_id}{origin}: {path}; use it in a world as `template: {role_id}`"
    )
    return 0


def _user_role_path(library: RoleLibrary, role_id: str, opts: RolesOptions) -> Path:
    from rolecall.errors import UsageError
    from rolecall.world.library import suggest

    assert library.user_dir is not None
    if library.is_builtin(role_id):
        raise UsageError(_readonly(role_id, opts))
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


def _roles_edit(opts: RolesOptions, library: RoleLibrary, role_id: str) -> int:
    from rolecall.errors import UsageError

    path = _user_role_path(library, role_id, opts)
    updates = _field_updates(opts)
    if not updates:
        raise UsageError(
            "nothing to change: give at least one of --name, --description, --system-prompt, "
            "--style, --constraint, --no-constraints"
        )
    data = _read_user_role(path)
    data.update(updates)
    data["id"] = role_id
    write_file(path, _dump_yaml(_validated(data, str(path))))
    confirm(
        opts,
        f"updated role {role_id} ({', '.join(updates)}); sessions already saved keep the "
        "roles they ran with",
    )
    return 0


def _roles_delete(opts: RolesOptions, library: RoleLibrary, role_id: str) -> int:
    from rolecall.errors import StorageError

    path = _user_role_path(library, role_id, opts)
    try:
        path.unlink()
    except OSError as exc:
        raise StorageError(f"cannot delete {path}: {exc.strerror or exc}") from exc
    confirm(opts, f"deleted role {role_id} ({path}); saved sessions keep their copy")
    return 0
