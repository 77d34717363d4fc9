"""The debate preset (modes.md, Debate): PRO and CON alternate, a moderator synthesises.

``mode: debate`` expands into an ordinary world:

* roles ``pro`` and ``con`` (persona profile or user persona texts) and ``moderator``
  (plus the judge role when ``debate.judge`` names one);
* a flow ``opening`` (PRO, no target) → ``con`` (answers PRO) → ``pro`` (answers CON),
  ``pro`` looping back to ``con``: PRO speaks on odd debater turns, CON on even ones;
* ``stop: [concession, stalemate]``: mode conditions backed by this module (the
  ``stalemate`` check also ends the debate, reason ``max_turns``, when the debater turn
  count reaches ``debate.max_turns``);
* ``final``: the moderator's synthesis, whose instruction lists the debate's message ids;
* ``settings.max_turns`` (hard cap, when not given) large enough for every debater turn,
  judge turns (two per debater turn: the verdict and one retry) and the synthesis.

After each debater turn a message hook decides termination (keyword rules of
:mod:`rolecall.modes.termination`, or the judge's JSON verdict when a judge is set),
publishes the decision as a ``system/mode`` event and stores it in
``session.state.extra["debate"]``, where the mode checks read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from rolecall.bus import ModeEvent
from rolecall.errors import UnknownRoleError
from rolecall.flows.model import Ident
from rolecall.modes import ModeSpec, register
from rolecall.modes.common import validate_judgment
from rolecall.modes.judge import (
    Parsed,
    ask_judge,
    hooked_message,
    store_scores,
)
from rolecall.modes.judge import option_problems as _option_problems
from rolecall.modes.termination import (
    CONCESSION,
    DISENGAGEMENT,
    MAX_TURNS,
    REPETITION,
    DebateVerdict,
    debate_decision,
    judged_debate_decision,
)

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.session.state import Message
    from rolecall.world.library import RoleLibrary

PROFILES: Final[tuple[str, ...]] = (
    "classic",
    "technical",
    "business",
    "scientific",
    "ethical",
    "political",
)
ROLE_IDS: Final[tuple[str, ...]] = ("pro", "con", "moderator")
DEBATER_STEPS: Final[frozenset[str]] = frozenset(("opening", "con", "pro"))
JUDGE_STEP: Final = "judge"
FINAL_STEP: Final = "synthesis"
STOP_GROUPS: Final[dict[str, frozenset[str]]] = {
    "concession": frozenset((CONCESSION,)),
    "stalemate": frozenset((REPETITION, DISENGAGEMENT, MAX_TURNS)),
}
DEFAULT_CONSTRAINTS: Final[tuple[str, ...]] = (
    "Address your opponent's latest argument.",
    "At most 150 words.",
)


class DebateOptions(BaseModel):
    """The ``debate:`` block of a world."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = "classic"
    pro: Annotated[str, Field(min_length=1)] | None = None
    con: Annotated[str, Field(min_length=1)] | None = None
    dynamic_termination: StrictBool = True
    judge: Ident | None = None
    max_turns: Annotated[StrictInt, Field(ge=2, le=20)] = 10


# ================================================================ shared helpers
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


def judge_role(
    judge: str | None,
    block: str,
    taken: tuple[str, ...],
    raw_roles: Any,
    library: RoleLibrary,
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
    return [{"template": judge, "id": judge}]


def set_final_instruction(session: Session, text: str) -> None:
    """Word the flow's closing (final) step, e.g. with the message ids to cite."""
    session.final_instruction = lambda _: text


def cite_list(session: Session, ids: list[str], label: Mapping[str, str]) -> str:
    by_id = session.state.transcript.by_id
    parts = []
    for mid in ids:
        msg = by_id.get(mid)
        if msg is not None:
            parts.append(f"[{mid}] {label.get(msg.sender, msg.sender)}")
    return "; ".join(parts)


def mode_state(session: Session, mode: str) -> dict[str, Any]:
    state: dict[str, Any] = session.state.extra.setdefault(mode, {})
    state.setdefault("turns", [])
    state.setdefault("verdicts", [])
    state.setdefault("decision", None)
    state.setdefault("status", "no turn yet")
    return state


# ======================================================================= expand
def persona_prompt(text: str) -> str:
    """A persona text as a system prompt: "You are <text>." (kept when it says "you")."""
    text = text.strip()
    if text.lower().startswith(("you ", "you're")):
        return text
    return f"You are {text.rstrip('.')}."


def _debater(
    side: Literal["pro", "con"],
    opts: Mapping[str, Any],
    library: RoleLibrary,
    names: dict[str, str],
) -> dict[str, Any]:
    other = "con" if side == "pro" else "pro"
    stance = "for" if side == "pro" else "against"
    persona: str | None = opts[side]
    if persona is not None:
        role: dict[str, Any] = {
            "id": side,
            "name": side.title(),
            "description": persona.strip(),
            "system_prompt": persona_prompt(persona),
            "constraints": list(DEFAULT_CONSTRAINTS),
        }
    else:
        base = library.get(f"{opts['profile']}_{side}")
        role = {k: v for k, v in base.items() if k != "id"}
        role.update(id=side, template=f"{opts['profile']}_{side}")
    names[side] = str(role.get("name") or side.title())
    role["system_prompt"] = (
        f"{role.get('system_prompt', '').strip()}\n"
        f"In this debate you are {side.upper()}: you argue {stance} the proposition (the "
        f"topic). @{other} argues the other side. Answer their latest argument directly and "
        "by name, bring a new argument each turn instead of repeating yourself, and concede "
        "only when an argument truly convinces you."
    ).strip()
    return role


def _instruction(side: str, other_name: str, other: str) -> str:
    stance = "for" if side == "pro" else "against"
    return (
        f"Respond directly to {other_name} (@{other}): address them by name and answer their "
        f"latest argument, then give your strongest new argument {stance} the proposition. "
        "Concede a point only if it truly convinces you."
    )


def expand(raw: dict[str, Any], library: RoleLibrary, problems: list[str]) -> dict[str, Any]:
    data = dict(raw)
    opts = parse_options(data.get("debate"), "debate", DebateOptions, problems)
    if opts["profile"] not in PROFILES:
        problems.append(
            f"debate.profile: unknown profile {opts['profile']!r} (profiles: {', '.join(PROFILES)})"
        )
        opts["profile"] = "classic"
    topic = data.get("topic")
    if not isinstance(topic, str) or not topic.strip():
        problems.append(
            "topic: a debate needs a topic, the proposition to argue "
            "(e.g. topic: Cities should ban cars from their centres)"
        )
    no_flow(data, "debate", problems)
    names: dict[str, str] = {}
    pro = _debater("pro", opts, library, names)
    con = _debater("con", opts, library, names)
    moderator = {
        "template": "moderator",
        "id": "moderator",
        "description": "A neutral moderator who writes the closing synthesis of the debate.",
        "constraints": ["Do not take sides.", "Cite messages by id, like [m3]."],
    }
    judge = opts["judge"]
    extra = judge_role(judge, "debate", ROLE_IDS, data.get("roles"), library, problems)
    data["roles"] = merge_roles(data.get("roles"), [pro, con, moderator, *extra], problems)
    max_turns: int = opts["max_turns"]
    data["flow"] = {
        "steps": [
            {
                "id": "opening",
                "speaker": "pro",
                "reply_to": "none",
                "instruction": "Open the debate: make your strongest case for the proposition.",
            },
            {
                "id": "con",
                "speaker": "con",
                "reply_to": {"role": "pro"},
                "instruction": _instruction("con", names["pro"], "pro"),
            },
            {
                "id": "pro",
                "speaker": "pro",
                "reply_to": {"role": "con"},
                "instruction": _instruction("pro", names["con"], "con"),
                "loop": {"to": "con", "max": max_turns},
            },
        ],
        "stop": ["concession", "stalemate"],
        "final": {
            "id": FINAL_STEP,
            "speaker": "moderator",
            "reply_to": "none",
            "instruction": synthesis_instruction(names, None, ""),
        },
    }
    per_turn = 3 if judge is not None else 1  # a verdict and one retry per debater turn
    data["settings"] = preset_settings(data.get("settings"), max_turns=max_turns * per_turn + 1)
    data.setdefault("title", f"Debate: {topic}" if isinstance(topic, str) and topic else "Debate")
    data["debate"] = opts
    return data


def synthesis_instruction(names: Mapping[str, str], decision: Any, cites: str) -> str:
    pro, con = names.get("pro", "Pro"), names.get("con", "Con")
    ended = ""
    if isinstance(decision, dict):
        ended = f"The debate ended: {decision['reason']} ({decision['detail']}). "
    listing = f" The debate's messages: {cites}." if cites else ""
    return (
        f"Summarise the debate as its neutral moderator, without taking sides. {ended}"
        f"Cover: the strongest points of {pro} (PRO) and of {con} (CON); the common ground "
        "they found; the disagreements that remain; any concessions made; and your assessment "
        "of which arguments held up best and why. Cite the messages you draw on by id in "
        f"brackets, like [m3].{listing}"
    )


# ======================================================================== judge
_STANCES: Final[dict[str, str]] = {
    "pro": "pro",
    "for": "pro",
    "con": "con",
    "against": "con",
    "undecided": "undecided",
    "neutral": "undecided",
    "mixed": "undecided",
}


class DebateJudgment(BaseModel):
    """The JSON a debate judge returns after each debater turn (other keys are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    stance: Literal["pro", "con", "undecided"]
    new_arguments: list[str] | Annotated[StrictInt, Field(ge=0)]
    concessions: list[str] | Annotated[StrictInt, Field(ge=0)]
    agreement: Annotated[float, Field(ge=0, le=1)]

    @field_validator("stance", mode="before")
    @classmethod
    def _stance(cls, value: Any) -> Any:
        return _STANCES.get(value.strip().lower(), value) if isinstance(value, str) else value

    @staticmethod
    def count(value: list[str] | int) -> int:
        return value if isinstance(value, int) else len(value)


JUDGE_FORMAT: Final = (
    '{"stance": "pro" | "con" | "undecided", "new_arguments": ["each new argument of this '
    'turn, in a few words"], "concessions": ["each point this turn concedes"], '
    '"agreement": <0 to 1: how far the two sides now agree>}'
)


def parse_judgment(text: str) -> Parsed:
    judgment = validate_judgment(text, DebateJudgment)
    scores = {
        "agreement": float(judgment.agreement),
        "new_arguments": float(DebateJudgment.count(judgment.new_arguments)),
        "concessions": float(DebateJudgment.count(judgment.concessions)),
    }
    return Parsed(scores, judgment.model_dump())


def _judge_instruction(message: Message, speaker: str) -> str:
    return (
        f"As the debate's judge, assess {speaker}'s turn {message.id}. Reply with only a JSON "
        f"object in this format and nothing else: {JUDGE_FORMAT}"
    )


# ====================================================================== install
def _names(session: Session) -> dict[str, str]:
    world = session.world
    return {r: world.role(r).display_name for r in ("pro", "con") if r in world.role_ids}


def _refresh_final(session: Session) -> None:
    state = mode_state(session, "debate")
    names = _names(session)
    label = {side: f"{names.get(side, side)} ({side.upper()})" for side in ("pro", "con")}
    cites = cite_list(session, state["turns"], label)
    set_final_instruction(session, synthesis_instruction(names, state["decision"], cites))


def install(session: Session) -> None:
    world = session.world
    if world.flow is None:
        return
    opts = DebateOptions.model_validate(world.debate or {})
    mode_state(session, "debate")

    async def after_message(session: Session, message: Message) -> None:
        message = hooked_message(session, message)
        if message.step_id not in DEBATER_STEPS or message.sender not in ("pro", "con"):
            return
        state = mode_state(session, "debate")
        if message.id in state["turns"]:
            return  # already decided: the hooks run again on resume after a failure
        if opts.judge is not None:
            speaker = f"{world.role(message.sender).display_name} (@{message.sender})"
            parsed = await ask_judge(
                session,
                opts.judge,
                message,
                step_id=JUDGE_STEP,
                instruction=_judge_instruction(message, speaker),
                retry_instruction=(
                    f"Reply again with ONLY the JSON object, exactly in this format: {JUDGE_FORMAT}"
                ),
                parse=parse_judgment,
            )
            if session.state.state == "paused":
                return  # the judge's turn failed or was cancelled: resume judges again
            state["turns"].append(message.id)
            verdict: dict[str, Any] | None = None
            if parsed is not None:
                store_scores(session, opts.judge, parsed.scores)
                verdict = {
                    "agreement": parsed.scores["agreement"],
                    "new_arguments": int(parsed.scores["new_arguments"]),
                    "concessions": int(parsed.scores["concessions"]),
                }
            state["verdicts"].append(verdict)
            decision, checks = judged_debate_decision(
                [DebateVerdict(**v) if v else None for v in state["verdicts"]],
                max_turns=opts.max_turns,
            )
        else:
            state["turns"].append(message.id)
            by_id = session.state.transcript.by_id
            texts = [by_id[mid].content for mid in state["turns"] if mid in by_id]
            decision, checks = debate_decision(
                texts, max_turns=opts.max_turns, dynamic=opts.dynamic_termination
            )
        n = len(state["turns"])
        if decision is not None:
            state["decision"] = {"reason": decision.reason, "detail": decision.detail}
            state["status"] = f"{decision.reason}: {decision.detail}"
        else:
            state["status"] = _status(checks)
        session.bus.publish(
            ModeEvent(
                mode="debate",
                name="termination",
                data={
                    "turn": n,
                    "message_id": message.id,
                    "speaker": message.sender,
                    "stop": decision is not None,
                    "reason": decision.reason if decision else None,
                    "detail": decision.detail if decision else state["status"],
                    "checks": checks,
                },
            )
        )
        _refresh_final(session)

    def check(group: str) -> Any:
        def run() -> tuple[bool, str, str]:
            state = mode_state(session, "debate")
            decision = state["decision"]
            if decision is not None and decision["reason"] in STOP_GROUPS[group]:
                return True, str(decision["reason"]), str(decision["detail"])
            return False, group, str(state["status"])

        return run

    session.ctx.mode_checks = {
        **session.ctx.mode_checks,
        "concession": check("concession"),
        "stalemate": check("stalemate"),
    }
    session.message_hooks.append(after_message)
    _refresh_final(session)


def _status(checks: Mapping[str, Any]) -> str:
    n = checks.get("turns", 0)
    if "pending" in checks:
        return f"{n} debater turns; {checks['pending']}"
    parts = [f"{n} of {checks.get('max_turns')} debater turns"]
    if checks.get("judged"):
        if "agreement" in checks:
            parts.append(f"judge's agreement {checks['agreement']:g}")
        else:
            parts.append("no valid verdict on the latest turn")
        return "; ".join(parts)
    if not checks.get("dynamic", True):
        return parts[0] + " (dynamic termination off)"
    parts.append("no concession")
    rep = checks.get("repetition")
    parts.append(f"repetition {rep:g}" if rep is not None else "repetition n/a")
    counts = checks.get("last_word_counts")
    if counts:
        parts.append(f"last turns {counts[0]} and {counts[1]} words")
    return "; ".join(parts)


register(ModeSpec("debate", expand, install))
