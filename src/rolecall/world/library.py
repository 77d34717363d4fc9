"""The role library: read-only built-in templates plus the user's own roles (YAML)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rolecall.errors import NotTextError, StorageError, UnknownRoleError, UsageError
from rolecall.paths import read_text
from rolecall.world import yamlfile

_ROLE_ID = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
ROLE_FIELDS = ("id", "name", "description", "system_prompt", "style", "constraints")

#: Words no role may take as its id, in a world or in the role library, with why: chat
#: gives them a meaning (chat.md: ``@human`` and ``@all`` are reserved words; ``human``
#: and ``system`` are the senders of the human's and the system's messages, events.md).
#: Mentions match case-insensitively, so ``Human`` is reserved too.
RESERVED_IDS: dict[str, str] = {
    "human": "the sender of the human's messages; @human hands the floor to the human",
    "all": "@all addresses every agent",
    "system": "the sender of system messages",
    "select": "a flow step's `speaker: select` lets the world's speaker selection choose",
}


def reserved_id(role_id: str) -> str | None:
    """``'<id>' is reserved (why); pick another id`` when no role may take ``role_id``."""
    why = RESERVED_IDS.get(role_id.lower())
    if why is None:
        return None
    return f"'{role_id}' is reserved ({why}); pick another id"


@cache
def builtin_roles() -> dict[str, dict[str, Any]]:
    """The built-in templates shipped in ``rolecall/library/roles.yaml``, by id."""
    text = resources.files("rolecall").joinpath("library/roles.yaml").read_text("utf-8")
    # libyaml's parser when PyYAML has it: a tenth of the pure-Python one's 30 ms, paid
    # by every command that loads a world (the file is ours, so nothing parses it twice)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    items = yaml.load(text, Loader=loader) or []
    return {item["id"]: dict(item) for item in items}


class RoleLibrary:
    """Templates by id: the user's roles (``<data dir>/roles/*.yaml``) and the built-ins.

    A user role may not take a built-in's id, so a template name is never ambiguous.
    """

    def __init__(self, user_dir: Path | None = None) -> None:
        self.user_dir = user_dir

    def _user_path(self, role_id: str) -> Path | None:
        """The user role's file; None for a name that is not a role id (never a path)."""
        if self.user_dir is None or not _ROLE_ID.fullmatch(role_id):
            return None
        return self.user_dir / f"{role_id}.yaml"

    def is_builtin(self, role_id: str) -> bool:
        return role_id in builtin_roles()

    def user_ids(self) -> list[str]:
        if self.user_dir is None or not self.user_dir.is_dir():
            return []
        return sorted(p.stem for p in self.user_dir.glob("*.yaml"))

    def ids(self) -> list[str]:
        return sorted(set(builtin_roles()) | set(self.user_ids()))

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def __contains__(self, role_id: object) -> bool:
        return isinstance(role_id, str) and role_id in self.ids()

    def user_file(self, role_id: str) -> RoleFile | None:
        """The user role ``role_id`` as read from its file (RoleFileError when it cannot
        be read as one); None when it is a built-in or no user role has that id."""
        if self.is_builtin(role_id):
            return None
        path = self._user_path(role_id)
        if path is None and self.user_dir is not None and "/" not in role_id:
            odd = self.user_dir / f"{role_id}.yaml"
            if role_id in self.user_ids() and odd.is_file():  # listed, but not usable
                raise RoleFileError(
                    odd,
                    [
                        "its name is not a role id (lowercase letters, digits, '_' and '-', "
                        "starting with a letter, at most 64): rename the file"
                    ],
                )
        if path is None or not path.is_file():
            return None
        return read_role_file(path)

    def get(self, role_id: str) -> dict[str, Any]:
        """The template's fields (a fresh dict), or UnknownRoleError with close matches.

        A user role file that is not a YAML mapping in UTF-8 (or repeats a key) raises
        RoleFileError naming it. Its fields are not checked here: the world loader's
        ``role_template`` checks them against the role model.
        """
        builtin = builtin_roles().get(role_id)
        if builtin is not None:
            return dict(builtin)
        found = self.user_file(role_id)
        if found is not None:
            data = dict(found.data)
            data.setdefault("id", role_id)
            return data
        raise UnknownRoleError(f"no role template '{role_id}'{suggest(role_id, self.ids())}")


class RoleFileError(UsageError):
    """A user role file that cannot be used: every problem found, each one line, starting
    with its line and column in the file when known."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        if len(problems) == 1:
            text = f"{path}: {problems[0]}"
        else:
            noun = "problem" if len(problems) == 1 else "problems"
            text = f"{path}: {len(problems)} {noun}\n" + "\n".join(f"  {p}" for p in problems)
        super().__init__(text)


@dataclass(frozen=True)
class RoleFile:
    """A user role file read as YAML: its path, its text and its mapping of fields."""

    path: Path
    text: str
    data: dict[str, Any]


def read_role_file(path: Path) -> RoleFile:
    """A user role file read: UTF-8, YAML, no key given twice, a mapping (an empty file
    is an empty one). RoleFileError naming the file when it is not; StorageError when it
    cannot be read, as for ``rolecall roles edit``."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except NotTextError as exc:
        raise RoleFileError(path, [f"{exc.problem} (save it as UTF-8)"]) from None
    try:
        data, duplicates = yamlfile.load(text)
    except RecursionError:
        raise RoleFileError(path, ["invalid YAML: nested too deeply"]) from None
    except yaml.YAMLError as exc:
        raise RoleFileError(path, [yamlfile.problem_of(exc)]) from None
    if duplicates:
        raise RoleFileError(path, [str(d) for d in duplicates])
    if data is None:
        data = {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        fields = "id, name, system_prompt, ..."
        raise RoleFileError(path, [f"expected a mapping of role fields ({fields}), got {kind}"])
    return RoleFile(path, text, data)


def suggest(name: str, choices: list[str] | tuple[str, ...], *, listing: bool = True) -> str:
    """`` (did you mean x?)`` and/or a listing of the choices, for error messages."""
    choices = list(dict.fromkeys(choices))  # each candidate named once
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if close:
        return f" (did you mean {' or '.join(close)}?)"
    if listing and choices:
        shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
        return f" (known: {shown})"
    return ""
