"""The role library: read-only built-in templates plus the user's own roles (YAML)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from rolecall.errors import StorageError, UnknownRoleError, UsageError
from rolecall.paths import read_text

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

    def get(self, role_id: str) -> dict[str, Any]:
        """The template's fields (a fresh dict), or UnknownRoleError with close matches.

        A user role file that is not a YAML mapping in UTF-8 raises UsageError naming it.
        """
        builtin = builtin_roles().get(role_id)
        if builtin is not None:
            return dict(builtin)
        path = self._user_path(role_id)
        if path is not None and path.is_file():
            data = _read_role_file(path)
            data.setdefault("id", role_id)
            return data
        raise UnknownRoleError(f"no role template '{role_id}'{suggest(role_id, self.ids())}")


def _read_role_file(path: Path) -> dict[str, Any]:
    """A user role's fields; UsageError naming the file when it is not a role file
    (StorageError when it cannot be read, as for ``rolecall roles edit``)."""
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        raise UsageError(f"{path}: invalid YAML{where}: {' '.join(str(problem).split())}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a role file must hold a mapping of role fields")
    return data


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
