"""Pieces shared by the debate and consensus presets: options, roles, state, judgments."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rolecall.errors import UnknownRoleError, UsageError
from rolecall.mode_registry import Roles
from rolecall.modes.judgments import Invalid, json_object
from rolecall.plans import DriverSite
from rolecall.world.judge_block import option_problems as _option_problems

M = TypeVar("M", bound=BaseModel)
S = TypeVar("S", bound=BaseModel)


def validate_judgment(text: str, model: type[M]) -> M:
    """The judge's JSON object in ``text`` validated as ``model``.

    Raises :class:`~rolecall.modes.judgments.Invalid` (why no object was read, or the
    first validation error as ``field: message``) when it is missing or does not fit.
    """
    obj = json_object(text)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        error = first.get("ctx", {}).get("error")
        if isinstance(error, Invalid):  # a shared check (a score) that names the field
            raise Invalid(str(error)) from None
        where = ".".join(str(p) for p in first["loc"]) or "(object)"
        raise Invalid(f"{where}: {first['msg']}") from None


def parse_options(
    raw: Any, block: str, model: type[BaseModel], problems: list[str]
) -> dict[str, Any]:
    """A mode's options block validated; problems as ``block.field: ...`` lines.

    Returns the validated fields (defaults where the block is invalid), as plain data.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"{block}: expected a mapping of {block} options, got {raw!r}")
        return model().model_dump()
    try:
        return model.model_validate(raw).model_dump()
    except ValidationError as exc:
        problems.extend(_option_problems(block, exc, list(model.model_fields)))
        valid = {k: v for k, v in raw.items() if k in model.model_fields}
        for err in exc.errors():
            if err["loc"]:
                valid.pop(str(err["loc"][0]), None)
        try:
            return model.model_validate(valid).model_dump()
        except ValidationError:
            return model().model_dump()


def merge_roles(
    raw_roles: Any, preset: list[dict[str, Any]], problems: list[str]
) -> list[dict[str, Any]]:
    """The preset's roles with the user's ``roles:`` entries applied by id.

    An entry whose id (or template, when it has no id) is a preset role overrides that
    role's fields; with a ``template:`` of its own it starts from that template instead.
    Other entries are added after the preset's roles.
    """
    if raw_roles is None:
        return [dict(r) for r in preset]
    if not isinstance(raw_roles, list):
        problems.append("roles: expected a list of role overrides, e.g. [{id: pro, model: ...}]")
        return [dict(r) for r in preset]
    by_id = {r["id"]: dict(r) for r in preset}
    extra: list[Any] = []
    for entry in raw_roles:
        rid = None
        if isinstance(entry, dict):
            rid = entry.get("id", entry.get("template"))
        if isinstance(rid, str) and rid in by_id:
            if "template" in entry:
                by_id[rid] = {"id": rid, **entry}
            else:
                by_id[rid] = {**by_id[rid], **entry}
        else:
            extra.append(entry)
    return [*by_id.values(), *extra]


def user_role_ids(raw_roles: Any) -> list[str]:
    out: list[str] = []
    if isinstance(raw_roles, list):
        for entry in raw_roles:
            if isinstance(entry, dict):
                rid = entry.get("id", entry.get("template"))
                if isinstance(rid, str):
                    out.append(rid)
    return out


def preset_settings(raw: Any, *, max_turns: int) -> Any:
    """The world's settings with the hard cap and memory window sized for the preset."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return raw  # the loader reports it
    settings = dict(raw)
    settings.setdefault("max_turns", max_turns)
    settings.setdefault("memory_window", max(12, max_turns))
    return settings


def no_flow(data: Mapping[str, Any], mode: str, problems: list[str]) -> None:
    if data.get("flow") is not None:
        problems.append(
            f"flow: a {mode} world builds its own flow; remove flow: "
            f"(tune the {mode} with its {mode}: block)"
        )


def preset_options(
    raw: dict[str, Any],
    mode: str,
    model: type[BaseModel],
    profiles: Collection[str],
    default: str,
    topic: str,
    problems: list[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What every preset's ``expand`` (debate, consensus) starts with: the world as a
    copy and its ``mode:`` block validated, with a known profile (else ``default``), a
    topic (``topic``: what it is, for the problem when it is missing) and no flow of its
    own. Problems are added to ``problems``."""
    data = dict(raw)
    opts = parse_options(data.get(mode), mode, model, problems)
    if opts["profile"] not in profiles:
        problems.append(
            f"{mode}.profile: unknown profile {opts['profile']!r} (profiles: {', '.join(profiles)})"
        )
        opts["profile"] = default
    text = data.get("topic")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"topic: a {mode} needs a topic, {topic}")
    no_flow(data, mode, problems)
    return data, opts


def judge_role(
    judge: str | None,
    block: str,
    taken: tuple[str, ...],
    raw_roles: Any,
    library: Roles,
    problems: list[str],
) -> list[dict[str, Any]]:
    """The judge's role entry to add, if the world does not define it itself."""
    if judge is None:
        return []
    if judge in taken:
        problems.append(f"{block}.judge: '{judge}' already speaks in the {block}; use another role")
        return []
    if judge in user_role_ids(raw_roles):
        return []
    try:
        library.get(judge)
    except UnknownRoleError:
        problems.append(
            f"{block}.judge: no role '{judge}' (define it under roles:, or use a role library "
            "template such as judge)"
        )
        return []
    except UsageError as exc:  # the user's role file cannot be used
        problems.append(f"{block}.judge: {exc}")
        return []
    return [{"template": judge, "id": judge}]


def set_final_instruction(session: DriverSite, text: str) -> None:
    """Word the flow's closing (final) step, e.g. with the message ids to cite."""
    session.final_instruction = lambda _: text


def cite_list(session: DriverSite, ids: list[str], label: Mapping[str, str]) -> str:
    by_id = session.state.transcript.by_id
    parts = []
    for mid in ids:
        msg = by_id.get(mid)
        if msg is not None:
            parts.append(f"[{mid}] {label.get(msg.sender, msg.sender)}")
    return "; ".join(parts)


def mode_state(session: DriverSite, key: str, model: type[S]) -> S:
    """The mode's typed state, kept in ``session.state.extra[key]`` (stored as its JSON).

    A restored session holds the stored object there; it is validated on first use.
    """
    extra = session.state.extra
    value = extra.get(key)
    if not isinstance(value, model):
        value = model.model_validate(value or {})
        extra[key] = value
    return value


class Decided(BaseModel):
    """Why a preset's dialogue stops (the stop reason and its readable detail)."""

    reason: str
    detail: str


class PresetState(BaseModel):
    """What the debate and consensus presets keep between turns (see their subclasses)."""

    decision: Decided | None = None
    status: str = "no turn yet"  # what the stop checks report while they do not hold


def with_knowledge(
    data: dict[str, Any],
    name: str,
    paths: list[str],
    role_ids: list[str],
    where: str,
    problems: list[str],
) -> None:
    """Give the roles ``role_ids`` of ``data`` (an expanded world) retrieval over the
    documents ``paths`` (knowledge.md): a knowledge collection ``name`` added to the
    world's ``knowledge:`` and named in each role's ``knowledge:``. ``where`` names the
    option in problems (``debate.context``)."""
    if not paths:
        return
    collections = data.get("knowledge")
    if collections is None:
        collections = {}
    if not isinstance(collections, dict):
        return  # the loader says what is wrong with it
    if name in collections:
        problems.append(
            f"knowledge.{name}: the collection {where} makes is named {name}: "
            "rename the world's own"
        )
        return
    data["knowledge"] = {**collections, name: {"paths": list(paths)}}
    roles = data.get("roles")
    if not isinstance(roles, list):
        return
    out: list[Any] = []
    for role in roles:
        if isinstance(role, dict) and role.get("id") in role_ids:
            own = role.get("knowledge")
            own = list(own) if isinstance(own, list) else []
            role = {**role, "knowledge": [*own, name] if name not in own else own}
        out.append(role)
    data["roles"] = out
