"""Study mode (modes.md, Study): a document-driven dialogue of five fixed roles.

``mode: study`` in a world file (or ``rolecall study DOC``) expands into the five study
roles and settings; :func:`install` gives the session the
:class:`~rolecall.modes.study_turns.StudyDirector` built from the world's ``study:``
block, which replaces the flow as the source of turns (the run time:
:mod:`rolecall.modes.study_turns`).

Reading the document: when the loader passes the world folder (a :class:`~pathlib.Path`
under :data:`FOLDER_KEY` in the raw mapping) :func:`expand` reads it into ``study.text``;
otherwise :func:`load_study` does it for a loaded world. Either way the session's world
carries the text, so a saved session resumes without the file.

The ``study:`` block (:class:`StudyOptions`)::

    study:
      document: notes.md   # TXT, Markdown or PDF, relative to the world folder
      text: "..."          # or the document inline (the loader stores what it read here)
      delay: 3             # D: turns before a reallocation takes effect (2-3)
      lock: 7              # H: turns a role pushed back stays locked (5-10)
      contradictions: true # find contradictions between the roles (module 7)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from rolecall.errors import UsageError, WorldError
from rolecall.mode_registry import ModeSpec, Roles
from rolecall.modes.common import with_knowledge
from rolecall.modes.install import register_mode
from rolecall.modes.study_turns import StudyDirector
from rolecall.plans import DriverSite
from rolecall.study.document import DocumentError, check_relative, read_document
from rolecall.study.document import resolve_in_folder as _resolve
from rolecall.study.queue import ROLES
from rolecall.study.realloc import DELAY_DEFAULT, LOCK_DEFAULT
from rolecall.study.segment import segment, title
from rolecall.world.library import suggest
from rolecall.world.models import World

__all__ = [
    "FOLDER_KEY",
    "StudyOptions",
    "default_topic",
    "director",
    "expand",
    "install",
    "load_study",
]

FOLDER_KEY: Final = "__world_folder__"  # the loader's Path of the world folder (never YAML)
MAX_TURNS: Final = 1000  # the hard cap when the world sets none (a study run is bounded)


class StudyOptions(BaseModel):
    """The ``study:`` block of a world file."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    document: str | None = None
    text: str | None = None
    delay: Annotated[StrictInt, Field(ge=2, le=3)] = DELAY_DEFAULT
    lock: Annotated[StrictInt, Field(ge=5, le=10)] = LOCK_DEFAULT
    contradictions: StrictBool = True  # module 7: find them and have them addressed
    # reference material the five roles retrieve from beside the document (knowledge.md):
    # files or folders relative to the world's folder
    knowledge: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @field_validator("document")
    @classmethod
    def _safe(cls, value: str | None) -> str | None:
        if value is not None:
            problem = check_relative(value)
            if problem is not None:
                raise ValueError(problem)
        return value


_OPTION_FIELDS: Final = tuple(StudyOptions.model_fields)


def _option_problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        where = ".".join(["study", *loc])
        if err["type"] == "extra_forbidden":
            hint = suggest(loc[-1], list(_OPTION_FIELDS), listing=False)
            out.append(
                f"{where}: unknown field{hint or ' (fields: ' + ', '.join(_OPTION_FIELDS) + ')'}"
            )
            continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        short = isinstance(value, int | float | bool) or (
            isinstance(value, str) and len(value) < 60
        )
        shown = f" (got {value!r})" if short and err["type"] != "value_error" else ""
        out.append(f"{where}: {msg[0].lower() + msg[1:]}{shown}")
    return out


def parse_options(block: Any, problems: list[str]) -> StudyOptions | None:
    """The validated ``study:`` block, or None with its problems appended."""
    found: list[str] = []
    options = _read_options(block, found)
    problems.extend(found)
    return None if found else options


def _read_options(block: Any, problems: list[str]) -> StudyOptions | None:
    """The ``study:`` block's options, every problem with it appended: a field in error is
    left at its default, so the others (the document above all) can still be checked.
    None when there is no block, it is not a mapping, or it gives no document."""
    if block is None:
        problems.append("study: required for mode: study (give study.document: <file>)")
        return None
    if not isinstance(block, dict):
        problems.append(f"study: expected a mapping of study options, got {type(block).__name__}")
        return None
    bad: set[str] = set()
    try:
        options = StudyOptions.model_validate(block)
    except ValidationError as exc:
        problems.extend(_option_problems(exc))
        bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        valid = {k: v for k, v in block.items() if k in _OPTION_FIELDS and k not in bad}
        try:
            options = StudyOptions.model_validate(valid)
        except ValidationError:  # the fields do not depend on each other: not expected
            return None
    if options.document is None and options.text is None:
        if not bad & {"document", "text"}:  # a document given but invalid is named already
            problems.append(
                "study.document: required (a TXT, Markdown or PDF file in the world folder)"
            )
        return None
    return options


def default_topic(document: str | None, text: str) -> str:
    """The document's title (its first ``#`` or ``===`` heading), else its file name."""
    found = title(text)
    if found:
        return f"Studying {found}"
    if document:
        return f"Studying {Path(document).name}"
    return "Studying a document"


def _merge_roles(raw_roles: Any, problems: list[str]) -> list[dict[str, Any]]:
    """The five study roles; entries under ``roles:`` override them by id, in their order."""
    overrides: dict[str, dict[str, Any]] = {}
    if raw_roles is not None and not isinstance(raw_roles, list):
        problems.append("roles: expected a list of role overrides by id (study mode)")
        raw_roles = []
    for i, entry in enumerate(raw_roles or []):
        if not isinstance(entry, dict):
            problems.append(f"roles[{i}]: expected a mapping with an id")
            continue
        rid = entry.get("id", entry.get("template"))
        if rid not in ROLES:
            close = suggest(str(rid), list(ROLES), listing=False)
            problems.append(
                f"roles[{i}].id: study mode has no role {rid!r}"
                f"{close[:-1] + '; ' if close else ' ('}roles: {', '.join(ROLES)})"
            )
            continue
        if rid in overrides:
            problems.append(f"roles[{i}].id: duplicate id '{rid}'")
            continue
        overrides[rid] = entry
    out: list[dict[str, Any]] = []
    for rid in [*overrides, *(r for r in ROLES if r not in overrides)]:
        entry = {"template": rid, "id": rid, **overrides.get(rid, {})}
        entry.setdefault("temperature", 0.0)  # deterministic on real models too
        out.append(entry)
    return out


def expand(raw: dict[str, Any], library: Roles, problems: list[str]) -> dict[str, Any]:
    """``mode: study``: the five roles, settings and the validated ``study:`` block.

    When the loader passes the world folder (``FOLDER_KEY``), the document is read here
    and its text stored in ``study.text``, so document problems are load problems.
    """
    del library  # the roles come from the library through their `template:` entries
    data = dict(raw)
    folder = data.pop(FOLDER_KEY, None)
    if folder is not None and not isinstance(folder, Path):
        # only the loader may say where the world lives (a Path; YAML cannot make one)
        problems.append(f"{FOLDER_KEY}: unknown field")
        folder = None
    if data.get("flow") is not None:
        problems.append(
            "flow: study mode has no flow: the document's units and role queues decide who "
            "speaks (remove flow)"
        )
    data["roles"] = _merge_roles(data.get("roles"), problems)
    settings = data.get("settings")
    if settings is None:
        data["settings"] = {"max_turns": MAX_TURNS}
    elif isinstance(settings, dict) and "max_turns" not in settings:
        data["settings"] = {**settings, "max_turns": MAX_TURNS}
    found: list[str] = []
    options = _read_options(data.get("study"), found)
    problems.extend(found)
    if options is None:
        return data
    study = options.model_dump(exclude_none=True)
    if options.text is None and options.document is not None and folder is not None:
        try:
            path = _resolve(folder, options.document)
            study["text"] = read_document(path, name=options.document).text
        except DocumentError as exc:
            problems.append(f"study.document: {exc}")
            return data
    text = study.get("text")
    if isinstance(text, str):
        if not _has_units(text):
            problems.append(
                "study.document: nothing to study: no paragraph of 20 characters or more"
            )
        if not data.get("topic"):
            data["topic"] = default_topic(options.document, text)
    if not found:  # the block as validated (with the text read); else as written
        data["study"] = study
    with_knowledge(data, "reference", options.knowledge, list(ROLES), "study.knowledge", problems)
    return data


def _has_units(text: str) -> bool:
    return bool(segment(text))


def load_study(world_folder: Path, world: World) -> World:
    """The world with its study document read (``study.text``) and topic filled in.

    For a world loaded without its folder reaching :func:`expand`; a no-op when the text
    is already there or the world is not a study world. Raises :class:`WorldError`.
    """
    if world.mode != "study":
        return world
    source = str(world_folder / "world.yaml")
    problems: list[str] = []
    options = _read_options(world.block("study"), problems)
    if options is None:
        raise WorldError(source, problems)
    study = dict(world.block("study") or {})
    if options.text is None:
        assert options.document is not None
        try:
            path = _resolve(world_folder, options.document)
            study["text"] = read_document(path, name=options.document).text
        except DocumentError as exc:
            problems.append(f"study.document: {exc}")
    text = study.get("text")
    if isinstance(text, str) and not _has_units(text):
        problems.append("study.document: nothing to study: no paragraph of 20 characters or more")
    if problems:
        raise WorldError(source, problems)
    assert isinstance(text, str)
    world = world.with_block("study", study)
    if not world.topic:
        world = world.model_copy(update={"topic": default_topic(options.document, text)})
    return world


# ------------------------------------------------------------------ install
def director(world: World) -> StudyDirector:
    """The study director of a loaded study world, from its ``study:`` block; a
    :class:`UsageError` when the block is invalid or its document was not read."""
    problems: list[str] = []
    options = parse_options(world.block("study"), problems)
    if options is None:
        raise UsageError(f"world '{world.name}': " + "; ".join(problems))
    if options.text is None:
        raise UsageError(
            f"world '{world.name}': the study document {options.document!r} was not read; "
            "load the world from its folder (or call rolecall.modes.study.load_study)"
        )
    return StudyDirector(
        world,
        options.text,
        delay=options.delay,
        lock=options.lock,
        contradictions=options.contradictions,
    )


def install(session: DriverSite) -> None:
    """Give the session its study director (fresh or restored)."""
    session.director = director(session.world)


register_mode(
    ModeSpec(
        "study",
        expand,
        options=StudyOptions,
    ),
    install,
)
