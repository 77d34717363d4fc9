"""The role library page (``/roles``): the built-in roles of ``library/roles.yaml`` and
the user's own (``<data dir>/roles/*.yaml``), as ``rolecall roles list`` and ``roles
show`` give them, each with its persona (what the model is told), searchable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from rolecall.errors import RolecallError
from rolecall.log import get_logger
from rolecall.web.context import WebContext
from rolecall.world import catalog
from rolecall.world.library import RoleFileError, RoleLibrary
from rolecall.world.loader import role_template

log = get_logger(__name__)


@dataclass(frozen=True)
class LibraryRole:
    """One role of the library as the page shows it."""

    id: str
    builtin: bool
    name: str = ""
    description: str = ""
    system_prompt: str = ""
    style: str = ""
    constraints: list[str] = field(default_factory=list)
    problem: str = ""  # a user role file that cannot be used: its first problem

    @property
    def search_text(self) -> str:
        """Its id, name, description and persona in lower case, one field a line (what
        the page's search looks in, and its cards filter by as one types)."""
        fields = (self.id, self.name, self.description, self.system_prompt, self.style)
        return "\n".join(f.lower() for f in (*fields, *self.constraints))

    def matches(self, text: str) -> bool:
        """Whether ``text`` (any case) is in its id, name, description or persona."""
        return text.lower() in self.search_text


def _text(value: str) -> str:
    """``value`` as a page can send it: a byte of a file name that is not UTF-8 written
    ``\\xff`` (any other lone surrogate ``\\ud800``), never a 500 from encoding the page."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _role(library: RoleLibrary, role_id: str) -> LibraryRole:
    """The role as the page shows it; a user role file that cannot be used is shown
    with its first problem and the file named (a warning is logged), never a 500."""
    builtin = library.is_builtin(role_id)
    shown = _text(role_id)
    try:
        data = role_template(library, role_id)
    except RoleFileError as exc:
        return _unusable(shown, builtin, exc.path, exc.problems[0])
    except (RolecallError, OSError, ValueError, RecursionError) as exc:
        path = (library.user_dir or Path()) / f"{role_id}.yaml"
        return _unusable(shown, builtin, path, str(exc).removeprefix(f"{path}: "))
    constraints = data.get("constraints") or []
    return LibraryRole(
        id=role_id,
        builtin=builtin,
        name=str(data.get("name") or ""),
        description=str(data.get("description") or ""),
        system_prompt=str(data.get("system_prompt") or ""),
        style=str(data.get("style") or ""),
        constraints=[str(c) for c in constraints] if isinstance(constraints, list) else [],
    )


def _unusable(role_id: str, builtin: bool, path: Path, problem: str) -> LibraryRole:
    log.warning("role_file_unusable", path=_text(str(path)), problem=_text(problem))
    return LibraryRole(role_id, builtin, problem=_text(f"{path.name}: {problem}"))


def library_roles(library: RoleLibrary) -> list[LibraryRole]:
    """Every role: the user's first (as ``roles list`` orders them), then the built-ins."""
    roles = [_role(library, rid) for rid in library.ids()]
    return sorted(roles, key=lambda r: (r.builtin, r.id))


def used_by(worlds_dir: Path) -> dict[str, list[str]]:
    """Which of the listed worlds (``/start``'s: local and shipped) take each role as a
    template (``template: ID``), by role id; a world file that does not read is skipped."""
    import yaml

    found: dict[str, list[str]] = {}
    for entry in catalog.available(worlds_dir):
        try:
            data = yaml.safe_load(entry.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        roles = data.get("roles") if isinstance(data, dict) else None
        for role in roles if isinstance(roles, list) else []:
            template = role.get("template") if isinstance(role, dict) else None
            if isinstance(template, str) and entry.name not in found.get(template, []):
                found.setdefault(template, []).append(entry.name)
    return found


async def roles_page(request: Request) -> Response:
    """``GET /roles?q=TEXT``."""
    ctx = WebContext.of(request)
    text = (request.query_params.get("q") or "").strip()
    every = library_roles(RoleLibrary(ctx.data_dir / "roles"))
    shown = [r for r in every if r.matches(text)] if text else every
    return ctx.page(
        request,
        "roles.html",
        roles=shown,
        used=used_by(ctx.worlds_dir),
        total=len(every),
        q=text,
        user_dir=ctx.data_dir / "roles",
    )
