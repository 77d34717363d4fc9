"""Loading a world file: YAML, templates, typed validation, cross-references.

Loading never half-works: every problem is collected, each as one line
``path: what is wrong (hint)``, and :class:`WorldError` carries them all.
Unreachable steps are warnings, not errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rolecall.errors import NotTextError, UnknownRoleError, UsageError, WorldError
from rolecall.flows import conditions
from rolecall.flows.model import Branch, FinalStep, Flow, Loop, Step
from rolecall.paths import read_text
from rolecall.world import yamlfile
from rolecall.world.library import RoleFileError, RoleLibrary, reserved_id, suggest
from rolecall.world.models import Respond, Role, Settings, World
from rolecall.world.positions import positions

_FIELDS: dict[str, tuple[str, ...]] = {
    "role": tuple(Role.model_fields),
    "settings": tuple(Settings.model_fields),
    "flow": tuple(Flow.model_fields),
    "step": tuple(Step.model_fields),
    "loop": tuple(Loop.model_fields),
    "branch": tuple(Branch.model_fields),
    "final step": tuple(FinalStep.model_fields),
    "respond": tuple(Respond.model_fields),
}
# keys a kind of thing had under another name: (kind, old) -> new
_RENAMED: dict[tuple[str, str], str] = {("respond", "judge"): "ask_model"}
_COND_FIELDS: tuple[str, ...] = conditions.fields()


def _world_fields() -> tuple[str, ...]:
    """A world's keys: its fields, each registered mode's options block and ``judge``."""
    from rolecall.mode_registry import known_modes

    own = tuple(f for f in World.model_fields if f != "blocks")
    return (*own, *known_modes(), "judge")


@dataclass
class LoadedWorld:
    world: World
    path: Path | None
    warnings: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path | None:
        return self.path.parent if self.path else None


def resolve_world_path(spec: str, cwd: Path | None = None) -> Path:
    """WORLD is a folder, a ``world.yaml`` path, a name under ``./worlds/`` or a shipped name."""
    from rolecall.world import catalog

    base = cwd or Path.cwd()
    candidate = Path(spec)
    if not candidate.is_absolute():
        candidate = base / candidate
    if candidate.is_file():
        return candidate
    if candidate.is_dir() and (candidate / "world.yaml").is_file():
        return candidate / "world.yaml"
    named = catalog.find(spec, base / "worlds")
    if named is not None:
        return named
    known = [entry.name for entry in catalog.available(base / "worlds")]
    hint = suggest(spec, known) if known else ""
    raise UsageError(
        f"no world '{spec}': not a world.yaml, a folder with one, a name under ./worlds/ "
        f"or a shipped world{hint}"
    )


def load_world(spec: str | Path, library: RoleLibrary | None = None) -> LoadedWorld:
    path = spec if isinstance(spec, Path) else resolve_world_path(spec)
    if path.is_dir():
        path = path / "world.yaml"
    try:
        text = read_text(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the world file ({exc.strerror})") from exc
    except NotTextError as exc:
        raise WorldError(str(path), [f"{exc.problem} (save the file as UTF-8)"]) from None
    loaded = parse_world(text, source=str(path), library=library, path=path)
    replay_file = loaded.world.settings.replay_file
    if replay_file is not None and not Path(replay_file).is_absolute():
        # settings.replay_file is relative to the world's folder, like a study's document
        settings = loaded.world.settings.model_copy(
            update={"replay_file": str(path.parent / replay_file)}
        )
        loaded.world = loaded.world.model_copy(update={"settings": settings})
    if loaded.world.knowledge:  # knowledge paths too (knowledge.md)
        problems = knowledge_path_problems(loaded.world, path.parent)
        if problems:
            raise WorldError(str(path), problems, loaded.warnings)
        loaded.world = with_knowledge_paths(loaded.world, path.parent)
    return loaded


def knowledge_path_problems(world: World, folder: Path) -> list[str]:
    """Why the knowledge paths of a world file could lead outside its folder (a world
    file never makes rolecall read, nor send to a model, a file outside its folder)."""
    from rolecall.study.document import check_relative

    problems: list[str] = []
    root = folder.resolve()
    for name, collection in world.knowledge.items():
        entries = [(f"knowledge.{name}.root", collection.root)] if collection.root else []
        base = collection.root or ""
        entries += [
            (f"knowledge.{name}.paths[{i}]", str(Path(base) / p) if base else p)
            for i, p in enumerate(collection.paths)
        ]
        for where, entry in entries:
            problem = check_relative(entry)
            if problem is None and not (root / entry).resolve().is_relative_to(root):
                problem = f"{entry!r} leads outside the world folder (a symbolic link?)"
            if problem is not None:
                problems.append(f"{where}: {problem}")
    return problems


def with_knowledge_paths(world: World, folder: Path) -> World:
    """``world`` with its knowledge collections' relative paths made absolute (under
    their ``root``, by default ``folder``, the world's folder)."""
    collections = {}
    for name, c in world.knowledge.items():
        root = folder / c.root if c.root else folder
        paths = [str(root / p) for p in c.paths]
        collections[name] = c.model_copy(update={"paths": paths, "root": str(root)})
    return world.model_copy(update={"knowledge": collections})


def parse_world(
    text: str,
    *,
    source: str = "world.yaml",
    library: RoleLibrary | None = None,
    path: Path | None = None,
) -> LoadedWorld:
    try:
        raw, duplicates = yamlfile.load(text)
    except RecursionError:
        raise WorldError(source, ["(top level): invalid YAML: nested too deeply"]) from None
    except yaml.YAMLError as exc:
        raise WorldError(source, [yamlfile.problem_of(exc)]) from None
    if not isinstance(raw, dict):
        kind = type(raw).__name__ if raw is not None else "nothing"
        raise WorldError(source, [f"(top level): expected a mapping of world fields, got {kind}"])
    # a key given twice: the file is refused, the repeats listed first, with the rest
    repeated = [d.problem for d in duplicates]
    repeated_at = {d.problem: d.where for d in duplicates}
    try:
        loaded = build_world(raw, source=source, library=library or RoleLibrary(), path=path)
    except RecursionError:
        raise WorldError(source, ["(top level): the world file is nested too deeply"]) from None
    except WorldError as exc:
        if exc.source != source or (exc.where and not repeated):
            raise
        where = {**(exc.where or positions(text, exc.problems)), **repeated_at}
        problems = _dedupe([*repeated, *exc.problems])
        raise WorldError(source, problems, exc.warnings, where=where) from None
    if repeated:
        raise WorldError(source, repeated, loaded.warnings, where=repeated_at)
    return loaded


def build_world(
    raw: dict[str, Any], *, source: str, library: RoleLibrary, path: Path | None = None
) -> LoadedWorld:
    problems: list[str] = []
    data = dict(raw)
    expanded = data.get("mode") is not None
    if expanded:
        from rolecall.mode_registry import expand

        if path is not None:  # a mode may read files next to world.yaml (study's document)
            data["__world_folder__"] = path.parent
        data = expand(data, library, problems)
        data.pop("__world_folder__", None)
    # the mode put its own roles first: a problem of role j names the file's entry
    origin = _role_origins(raw.get("roles"), data.get("roles")) if expanded else {}
    first = len(problems)
    if isinstance(data.get("roles"), list):
        data["roles"] = _apply_templates(data["roles"], library, problems)
    if data.get("judge") is not None:
        from rolecall.world.judge_block import check_world

        problems.extend(check_world(data))
    try:
        world = World.model_validate(data)
    except ValidationError as exc:
        problems.extend(_format_validation(exc))
        world = None
    problems.extend(_cross_check(data))
    warnings = _unreachable(data)
    if origin:
        problems[first:] = [_in_file(p, origin) for p in problems[first:]]
    if problems:
        raise WorldError(source, _dedupe(problems), warnings)
    assert world is not None
    return LoadedWorld(world=world, path=path, warnings=warnings)


_ROLE_AT = re.compile(r"^roles\[(\d+)\]")


def _role_origins(raw_roles: Any, roles: Any) -> dict[int, int]:
    """Where each role of an expanded world came from: its index -> the index of the
    file's ``roles:`` entry it was made from (by identity, else by id or template);
    a role the mode added on its own has none."""
    if not isinstance(raw_roles, list) or not isinstance(roles, list):
        return {}
    by_key: dict[str, int] = {}
    for i, entry in enumerate(raw_roles):
        if isinstance(entry, dict):
            key = entry.get("id", entry.get("template"))
            if isinstance(key, str):
                by_key.setdefault(key, i)
    origin: dict[int, int] = {}
    for j, role in enumerate(roles):
        same = next((i for i, entry in enumerate(raw_roles) if entry is role), None)
        if same is None and isinstance(role, dict) and isinstance(role.get("id"), str):
            same = by_key.get(role["id"])
        if same is not None:
            origin[j] = same
    return origin


def _in_file(problem: str, origin: dict[int, int]) -> str:
    """``problem`` naming the file's ``roles[i]`` instead of the expanded world's."""
    return _ROLE_AT.sub(lambda m: f"roles[{origin.get(int(m[1]), int(m[1]))}]", problem, count=1)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _apply_templates(roles: list[Any], library: RoleLibrary, problems: list[str]) -> list[Any]:
    out: list[Any] = []
    for i, entry in enumerate(roles):
        if not isinstance(entry, dict) or "template" not in entry:
            out.append(entry)
            continue
        name = entry["template"]
        if not isinstance(name, str):
            problems.append(f"roles[{i}].template: expected a role id, got {name!r}")
            out.append({k: v for k, v in entry.items() if k != "template"})
            continue
        try:
            base = role_template(library, name)
        except UsageError as exc:  # no such template, or its role file cannot be used
            if isinstance(exc, RoleFileError):  # each problem in it, naming the file
                at = f"roles[{i}].template: role file {exc.path}"
                problems.extend(f"{at}: {problem}" for problem in exc.problems)
            elif isinstance(exc, UnknownRoleError):
                problems.append(
                    f"roles[{i}].template: no role template '{name}'{suggest(name, library.ids())}"
                )
            else:
                problems.append(f"roles[{i}].template: {exc}")
            merged = {k: v for k, v in entry.items() if k != "template"}
            merged.setdefault("id", name)
            out.append(merged)
            continue
        merged = {**base, **entry}
        merged.setdefault("id", name)
        out.append(merged)
    return out


def role_template(library: RoleLibrary, role_id: str) -> dict[str, Any]:
    """The fields of template ``role_id`` (a fresh dict). A user role's file is checked
    as a role: RoleFileError naming it, with every problem and its line and column there
    (UnknownRoleError with close matches when no template has that id)."""
    found = library.user_file(role_id)
    if found is None:
        return library.get(role_id)
    problems = role_problems({**found.data, "id": found.data.get("id", role_id)})
    if problems:
        where = positions(found.text, problems)
        ordered = sorted(problems, key=lambda p: _line_of(where.get(p)))  # as in the file
        raise RoleFileError(found.path, [f"{where[p]}: {p}" if p in where else p for p in ordered])
    data = dict(found.data)
    data.setdefault("id", role_id)
    return data


def _line_of(where: str | None) -> tuple[int, int]:
    """``line L, column C`` as (L, C), for sorting; a problem without one goes first."""
    if where is None:
        return (0, 0)
    line, _, column = where.removeprefix("line ").partition(", column ")
    return (int(line), int(column))


def role_problems(data: dict[str, Any]) -> list[str]:
    """What is wrong with ``data`` as a role of the library, one ``field: what`` each
    (worlds.md fields; ``template:`` is for a world's roles, a role file has none)."""
    problems: list[str] = []
    if "template" in data:
        problems.append(
            "template: a role file cannot start from a template; copy its fields instead "
            "(rolecall roles create ID --from TEMPLATE)"
        )
    problems.extend(_not_text(data))
    try:
        Role.model_validate(data)
    except ValidationError as exc:
        fields = {"role": tuple(f for f in Role.model_fields if f != "template")}
        for problem in _format_validation(exc, within=("roles", 0), fields=fields):
            path, _, what = problem.partition(": ")
            field_path = path.removeprefix("roles[0]").removeprefix(".") or "(top level)"
            problems.append(f"{field_path}: {what}")
    return problems


def _not_text(data: dict[str, Any]) -> list[str]:
    """``field: not text ...`` for each string of ``data`` (walked without recursion)
    holding a lone surrogate, as a ``"\\udc80"`` escape makes: no file, terminal or web
    page can take it as UTF-8."""
    found: list[str] = []
    stack: list[tuple[str, object]] = [(str(k), v) for k, v in reversed(data.items())]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            bad = next((ch for ch in item if "\ud800" <= ch <= "\udfff"), None)
            if bad is not None:
                found.append(
                    f"{where}: not text: a lone surrogate U+{ord(bad):04X} (a \\u escape of "
                    "half a character)"
                )
        elif isinstance(item, dict):
            stack.extend((f"{where}.{k}", v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return found


# ------------------------------------------------------------ pydantic errors
def _path(loc: tuple[Any, ...]) -> str:
    if loc[:1] == ("blocks",):  # a mode's block is written at the top level
        loc = loc[1:]
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (":" in part or "[" in part or "(" in part):
            continue  # discriminator tags and function wrappers are not part of the path
        else:
            name = str(part) if str(part).isprintable() else repr(part)
            out += f".{name}" if out else name
    return out or "(top level)"


def _kind_of(loc: tuple[Any, ...]) -> str:
    names = [p for p in loc[:-1] if isinstance(p, str) and ":" not in p and "[" not in p]
    if not names:
        return "world"
    last = names[-1]
    if last == "roles":
        return "role"
    if last == "steps":
        return "step"
    if last in ("settings", "flow", "loop", "respond"):
        return last
    if last == "next":
        return "branch"
    if last == "final":
        return "final step"
    if last == "reply_to":
        return "reply target"
    return "condition"


_NEXT_FORMS = ("str", "list[Branch]")  # how pydantic names the two forms of `next:`


def _next_at(loc: tuple[Any, ...]) -> int | None:
    """Where ``next`` is in ``loc`` when the part after it names one of its forms."""
    for i, part in enumerate(loc[:-1]):
        if part == "next" and loc[i + 1] in _NEXT_FORMS:
            return i
    return None


def _one_next_error(errors: list[Any]) -> list[Any]:
    """``next:`` is a step id or a list of branches, and pydantic reports a wrong value
    against both forms. A list with wrong branches: only the branches' errors. Neither
    form: one error saying what ``next:`` takes."""
    located = [(err, tuple(err["loc"]), _next_at(tuple(err["loc"]))) for err in errors]
    lists = {
        loc[: at + 1]
        for _, loc, at in located
        if at is not None and loc[at + 1] == "list[Branch]" and len(loc) > at + 2
    }
    keep: list[Any] = []
    told: set[tuple[Any, ...]] = set()
    for err, loc, at in located:
        if at is None:
            keep.append(err)
            continue
        where = loc[: at + 1]
        if where in lists:
            if len(loc) > at + 2:
                keep.append(err)  # a branch's own problem
        elif where not in told:
            told.add(where)
            keep.append(
                {
                    "loc": where,
                    "type": "next_form",
                    "msg": "Expected a step id, end, or a list of branches "
                    "([{goto: S, when: CONDITION}, ...])",
                    "input": err.get("input"),
                }
            )
    return keep


def _format_validation(
    exc: ValidationError,
    within: tuple[str | int, ...] = (),
    fields: dict[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """One line per error. ``within`` is where the validated value sits in a world;
    ``fields`` replaces the known fields of a kind of thing (for hints)."""
    out = []
    for err in _one_next_error(list(exc.errors())):
        loc = (*within, *err["loc"])
        where = _path(loc)
        kind = err["type"]
        value = err.get("input")
        if kind == "extra_forbidden":
            key = str(loc[-1]) if str(loc[-1]).isprintable() else repr(loc[-1])
            kind = _kind_of(loc)
            if kind == "reply target":
                out.append(
                    f"{where}: unknown field; a reply target is previous, none, or one of "
                    "{role: R}, {step: S}, {message: mK}"
                )
                continue
            renamed = _RENAMED.get((kind, key))
            if renamed is not None:
                out.append(f"{where}: unknown field; it is called {renamed} now")
                continue
            known = {**_FIELDS, **(fields or {})}
            names = _world_fields() if kind == "world" else known.get(kind, _COND_FIELDS)
            if key in names:  # a real field, but not of this kind of thing
                what = "this kind of condition" if kind == "condition" else f"a {kind}"
                out.append(f"{where}: '{key}' does not apply to {what}")
                continue
            hint = suggest(key, list(names), listing=False)
            out.append(f"{where}: unknown field{hint or ' (fields: ' + ', '.join(names) + ')'}")
        elif kind == "missing":
            if loc and loc[-1] == "max" and "loop" in loc:
                out.append(f"{where}: a loop needs max (an integer 1..10000)")
            else:
                out.append(f"{where}: required field missing")
        elif kind == "string_pattern_mismatch" and loc and loc[-1] in ("id", "name"):
            out.append(
                f"{where}: bad id {value!r} (use lowercase letters, digits, _ and -, "
                "starting with a letter)"
            )
        elif loc and loc[-1] == "max" and "loop" in loc:
            out.append(f"{where}: max must be an integer 1..10000, got {value!r}")
        else:
            msg = err["msg"]
            # no "(got ...)" for a container, or when the message already quotes the value
            quoted = isinstance(value, str) and repr(value) in msg
            shown = f" (got {value!r})" if not isinstance(value, dict | list) and not quoted else ""
            if isinstance(value, bool) and kind == "string_type":
                # YAML 1.1 (PyYAML, here) reads yes/no/on/off as booleans; YAML 1.2 (most
                # editors checking `worlds schema`) as text: quoted, both read text
                shown += "; YAML reads yes/no/on/off/true/false as a boolean: quote the text"
            out.append(f"{where}: {msg[0].lower() + msg[1:]}{shown}")
    return out


# ------------------------------------------------------------ cross-references
def _knowledge_refs(data: dict[str, Any]) -> list[str]:
    """Each role's ``knowledge:`` names a collection of the world's, once; each lore
    entry's ``roles:`` names roles of the world."""
    problems: list[str] = []
    roles = data.get("roles")
    known = data.get("knowledge")
    names = list(known) if isinstance(known, dict) else []
    ids = [r.get("id") for r in roles if isinstance(r, dict)] if isinstance(roles, list) else []
    for i, role in enumerate(roles if isinstance(roles, list) else []):
        wanted = role.get("knowledge") if isinstance(role, dict) else None
        if not isinstance(wanted, list):
            continue
        seen: set[str] = set()
        for j, name in enumerate(wanted):
            if not isinstance(name, str):
                continue
            if name in seen:
                problems.append(f"roles[{i}].knowledge[{j}]: collection '{name}' named twice")
            elif name not in names:
                have = ", ".join(names) if names else "none: add a top-level knowledge: block"
                problems.append(
                    f"roles[{i}].knowledge[{j}]: no knowledge collection '{name}' "
                    f"(collections: {have})"
                )
            seen.add(name)
    lore = data.get("lore")
    for i, entry in enumerate(lore if isinstance(lore, list) else []):
        who = entry.get("roles") if isinstance(entry, dict) else None
        for j, rid in enumerate(who if isinstance(who, list) else []):
            if isinstance(rid, str) and rid not in ids:
                problems.append(f"lore[{i}].roles[{j}]: no role '{rid}' in this world")
    return problems


def _cross_check(data: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    roles = data.get("roles")
    role_ids: list[str] = []
    seen: dict[str, int] = {}
    if isinstance(roles, list):
        for i, role in enumerate(roles):
            rid = role.get("id") if isinstance(role, dict) else None
            if not isinstance(rid, str):
                continue
            reserved = reserved_id(rid)
            if reserved is not None:
                problems.append(f"roles[{i}].id: {reserved}")
            if rid in seen:
                problems.append(f"roles[{i}].id: duplicate id '{rid}' (also roles[{seen[rid]}])")
            else:
                seen[rid] = i
                role_ids.append(rid)
    problems.extend(_knowledge_refs(data))
    problems.extend(_sees_refs(roles, role_ids))
    world_model = data.get("model", "offline")
    if isinstance(roles, list):
        for i, role in enumerate(roles):
            if not isinstance(role, dict):
                continue
            model = role.get("model") or world_model
            if model == "scripted" and not role.get("script"):
                problems.append(
                    f"roles[{i}].script: role '{role.get('id')}' uses the scripted model "
                    "but has no script: lines"
                )
    flow = data.get("flow")
    if not isinstance(flow, dict):
        return problems
    steps = flow.get("steps")
    if not isinstance(steps, list):
        return problems
    step_ids: list[str] = []
    step_seen: dict[str, int] = {}
    for i, step in enumerate(steps):
        sid = step.get("id") if isinstance(step, dict) else None
        if isinstance(sid, str):
            if sid in RESERVED_STEP_IDS:
                problems.append(
                    f"flow.steps[{i}].id: '{sid}' is reserved ({RESERVED_STEP_IDS[sid]}); "
                    "pick another id"
                )
            if sid in step_seen:
                problems.append(
                    f"flow.steps[{i}].id: duplicate step id '{sid}' "
                    f"(also flow.steps[{step_seen[sid]}])"
                )
            else:
                step_seen[sid] = i
                step_ids.append(sid)

    def role_ref(where: str, value: Any) -> None:
        if isinstance(value, str) and value not in role_ids:
            problems.append(f"{where}: no role '{value}'{_roles_hint(value, role_ids)}")

    def step_ref(where: str, value: Any, *, allow_end: bool = False) -> None:
        if not isinstance(value, str) or value in step_ids or (allow_end and value == "end"):
            return
        extra = " or end" if allow_end else ""
        problems.append(f"{where}: no step '{value}'{_steps_hint(value, step_ids, extra)}")

    def reply_refs(where: str, reply: Any) -> None:
        if isinstance(reply, dict):
            role_ref(f"{where}.role", reply.get("role"))
            step_ref(f"{where}.step", reply.get("step"))

    start = flow.get("start")
    if start is not None:
        step_ref("flow.start", start)
    stops = flow.get("stop")
    for i, cond in enumerate(stops if isinstance(stops, list) else []):
        _cond_refs(f"flow.stop[{i}]", cond, role_ref)
    final = flow.get("final")
    if isinstance(final, dict):
        role_ref("flow.final.speaker", final.get("speaker"))
        fid = final.get("id", "final")
        if isinstance(fid, str) and fid in step_seen:
            problems.append(
                f"flow.final.id: '{fid}' is also the id of flow.steps[{step_seen[fid]}] "
                "(the execution log could not tell them apart)"
            )
        elif isinstance(fid, str) and fid in RESERVED_STEP_IDS and fid != "final":
            problems.append(f"flow.final.id: '{fid}' is reserved ({RESERVED_STEP_IDS[fid]})")
        reply_refs("flow.final.reply_to", final.get("reply_to"))
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        at = f"flow.steps[{i}]"
        if step.get("speaker") != "select":
            role_ref(f"{at}.speaker", step.get("speaker"))
            if step.get("candidates") is not None:
                problems.append(
                    f"{at}.candidates: only a step with `speaker: select` has candidates"
                )
        chosen_from = step.get("candidates")
        for j, candidate in enumerate(chosen_from if isinstance(chosen_from, list) else []):
            role_ref(f"{at}.candidates[{j}]", candidate)
        if step.get("judge") is not None:
            role_ref(f"{at}.judge", step.get("judge"))
        audience = step.get("audience")
        if isinstance(audience, list):
            for j, member in enumerate(audience):
                role_ref(f"{at}.audience[{j}]", member)
        reply_refs(f"{at}.reply_to", step.get("reply_to"))
        loop = step.get("loop")
        if isinstance(loop, dict):
            step_ref(f"{at}.loop.to", loop.get("to"))
            if loop.get("until") is not None:
                _cond_refs(f"{at}.loop.until", loop["until"], role_ref)
        nxt = step.get("next")
        if isinstance(nxt, str):
            step_ref(f"{at}.next", nxt, allow_end=True)
        elif isinstance(nxt, list):
            for j, branch in enumerate(nxt):
                if isinstance(branch, dict):
                    step_ref(f"{at}.next[{j}].goto", branch.get("goto"), allow_end=True)
                    if branch.get("when") is not None:
                        _cond_refs(f"{at}.next[{j}].when", branch["when"], role_ref)
    return problems


def _sees_refs(roles: Any, role_ids: list[str]) -> list[str]:
    """A role's ``sees:`` names roles of the world (audiences.md); the human is always seen."""
    problems: list[str] = []
    for i, role in enumerate(roles if isinstance(roles, list) else []):
        sees = role.get("sees") if isinstance(role, dict) else None
        if not isinstance(sees, list):
            continue
        for j, rid in enumerate(sees):
            if not isinstance(rid, str) or rid in role_ids:
                continue
            if rid == "human":
                problems.append(
                    f"roles[{i}].sees[{j}]: 'human' need not be listed (every role sees "
                    "the human's messages)"
                )
            else:
                problems.append(
                    f"roles[{i}].sees[{j}]: no role '{rid}'{_roles_hint(rid, role_ids)}"
                )
    return problems


# step ids with a meaning of their own: in `next:`, in the execution log
RESERVED_STEP_IDS = {
    "end": "`next: end` ends the flow",
    "final": "the id of the flow's final step in the execution log",
    "interjection": "the execution log's id for a turn a human message asked for",
}


def _roles_hint(value: str, role_ids: list[str]) -> str:
    close = suggest(value, role_ids, listing=False)
    listing = ", ".join(role_ids) if role_ids else "none defined"
    return f"{close[:-1]}; roles: {listing})" if close else f" (roles: {listing})"


def _steps_hint(value: str, step_ids: list[str], extra: str) -> str:
    close = suggest(value, step_ids, listing=False)
    listing = ", ".join(step_ids) + extra
    return f"{close[:-1]}; steps: {listing})" if close else f" (steps: {listing})"


def _cond_refs(where: str, cond: Any, role_ref: Any) -> None:
    for at, kind, raw in conditions.raw_walk(where, cond):
        for key in kind.role_fields:
            if key in raw and not (kind.human_role and raw[key] == "human"):
                role_ref(f"{at}.{key}", raw[key])


def _unreachable(data: dict[str, Any]) -> list[str]:
    flow = data.get("flow")
    if not isinstance(flow, dict) or not isinstance(flow.get("steps"), list):
        return []
    steps = [s for s in flow["steps"] if isinstance(s, dict) and isinstance(s.get("id"), str)]
    ids = [s["id"] for s in steps]
    if not ids:
        return []
    edges: dict[str, set[str]] = {sid: set() for sid in ids}
    for i, step in enumerate(steps):
        following = ids[i + 1] if i + 1 < len(ids) else None
        out = edges[step["id"]]
        loop = step.get("loop")
        if isinstance(loop, dict) and isinstance(loop.get("to"), str):
            out.add(loop["to"])
        nxt = step.get("next")
        sequential = True
        if isinstance(nxt, str):
            out.add(nxt)
            sequential = False
        elif isinstance(nxt, list):
            for branch in nxt:
                if isinstance(branch, dict) and isinstance(branch.get("goto"), str):
                    out.add(branch["goto"])
                    if branch.get("when") is None:
                        sequential = False
        if sequential and following:
            out.add(following)
    given = flow.get("start")
    start: str = given if isinstance(given, str) and given in edges else ids[0]
    seen = {start}
    todo = [start]
    while todo:
        for nxt_id in edges.get(todo.pop(), ()):
            if nxt_id in edges and nxt_id not in seen:
                seen.add(nxt_id)
                todo.append(nxt_id)
    return [
        f"flow.steps[{i}]: step '{sid}' is unreachable from '{start}'"
        for i, sid in enumerate(ids)
        if sid not in seen
    ]
