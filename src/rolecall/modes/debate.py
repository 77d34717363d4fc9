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

This module expands the world; :mod:`rolecall.modes.debate_turns` runs it: after each
debater turn a message hook decides termination (keyword rules of
:mod:`rolecall.modes.termination`, or the judge's JSON verdict when a judge is set),
publishes the decision as a ``system/mode`` event and keeps it in the session's typed
``DebateState``, where the mode checks read it.
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
)

from rolecall.flows.model import Ident
from rolecall.mode_registry import ModeSpec
from rolecall.modes.common import (
    judge_role,
    merge_roles,
    preset_options,
    preset_settings,
    with_knowledge,
)
from rolecall.modes.debate_turns import DebateHook, attach, synthesis_instruction
from rolecall.modes.install import register_mode
from rolecall.modes.termination import (
    CONCESSION,
    DISENGAGEMENT,
    MAX_TURNS,
    REPETITION,
)
from rolecall.plans import DriverSite

if TYPE_CHECKING:
    from rolecall.mode_registry import Roles

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

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    profile: str = "classic"
    pro: Annotated[str, Field(min_length=1)] | None = None
    con: Annotated[str, Field(min_length=1)] | None = None
    dynamic_termination: StrictBool = True
    judge: Ident | None = None
    max_turns: Annotated[StrictInt, Field(ge=2, le=20)] = 10
    # documents every debater and the moderator retrieve from (knowledge.md), relative
    # to the world's folder
    context: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


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
    library: Roles,
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


def expand(raw: dict[str, Any], library: Roles, problems: list[str]) -> dict[str, Any]:
    data, opts = preset_options(
        raw,
        "debate",
        DebateOptions,
        PROFILES,
        "classic",
        "the proposition to argue (e.g. topic: Cities should ban cars from their centres)",
        problems,
    )
    topic = data.get("topic")
    names: dict[str, str] = {}
    pro = _debater("pro", opts, library, names)
    con = _debater("con", opts, library, names)
    moderator = {
        "template": "moderator",
        "id": "moderator",
        "description": "A neutral moderator who writes the closing synthesis of the debate.",
        # the library moderator hands the floor on; this one speaks once, to close
        "system_prompt": (
            "You are the neutral moderator of a formal debate, and you speak once: the "
            "closing synthesis after the debaters have finished. Summarise what each side "
            "argued, where they agreed, where they still disagree and what was conceded, and "
            "assess which arguments held up best. Cite messages by id. This is the end of "
            "the debate: do not ask questions and do not hand the floor to anyone."
        ),
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
    with_knowledge(
        data, "context", opts["context"], ["pro", "con", "moderator"], "debate.context", problems
    )
    per_turn = 3 if judge is not None else 1  # a verdict and one retry per debater turn
    data["settings"] = preset_settings(data.get("settings"), max_turns=max_turns * per_turn + 1)
    data.setdefault("title", f"Debate: {topic}" if isinstance(topic, str) and topic else "Debate")
    data["debate"] = opts
    return data


def install(session: DriverSite) -> None:
    if session.world.flow is None:
        return
    opts = DebateOptions.model_validate(session.world.block("debate") or {})
    hook = DebateHook(
        session, judge=opts.judge, max_turns=opts.max_turns, dynamic=opts.dynamic_termination
    )
    attach(session, hook)


register_mode(
    ModeSpec(
        "debate",
        expand,
        options=DebateOptions,
        conditions={
            "concession": "a debater concedes (keyword rules, or the judge's agreement)",
            "stalemate": "the debate repeats itself, disengages, or reaches max_turns",
        },
    ),
    install,
)
