"""The debate preset at run time: the judge's verdicts, termination, the synthesis wording.

After each debater turn, :class:`DebateHook` decides termination (the keyword rules of
:mod:`rolecall.modes.termination`, or the judge's JSON verdict when a judge is set),
publishes the decision as a ``system/mode`` event and keeps it in the session's
:class:`DebateState`, where the ``concession`` and ``stalemate`` checks read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from rolecall.bus import ModeEvent
from rolecall.flows.conditions import ModeCheck
from rolecall.modes.common import (
    Decided,
    PresetState,
    cite_list,
    mode_state,
    set_final_instruction,
    validate_judgment,
)
from rolecall.modes.judge import ask_judge, hooked_message, store_scores
from rolecall.modes.judgments import Agreement, Parsed
from rolecall.modes.termination import (
    CONCESSION,
    DISENGAGEMENT,
    MAX_TURNS,
    REPETITION,
    DebateVerdict,
    Decision,
    debate_decision,
    judged_debate_decision,
)
from rolecall.plans import DriverSite
from rolecall.session.state import TranscriptMessage

DEBATER_STEPS: Final[frozenset[str]] = frozenset(("opening", "con", "pro"))
JUDGE_STEP: Final = "judge"
STOP_GROUPS: Final[dict[str, frozenset[str]]] = {
    "concession": frozenset((CONCESSION,)),
    "stalemate": frozenset((REPETITION, DISENGAGEMENT, MAX_TURNS)),
}


class DebateState(PresetState):
    """``extra["debate"]``: the debater turns judged so far and the judge's verdicts."""

    turns: list[str] = Field(default_factory=list)  # message ids of the debater turns
    # one per debater turn when a judge is set (None: its verdict was ignored)
    verdicts: list[dict[str, float] | None] = Field(default_factory=list)


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

    model_config = ConfigDict(defer_build=True, extra="ignore", frozen=True)

    stance: Literal["pro", "con", "undecided"]
    new_arguments: list[str] | Annotated[StrictInt, Field(ge=0)]
    concessions: list[str] | Annotated[StrictInt, Field(ge=0)]
    agreement: Agreement

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


# ====================================================================== the hook
class DebateHook:
    """The debate's message hook and its two stop checks, for one session."""

    def __init__(
        self, session: DriverSite, *, judge: str | None, max_turns: int, dynamic: bool
    ) -> None:
        self.session = session
        self.judge = judge
        self.max_turns = max_turns
        self.dynamic = dynamic

    @property
    def state(self) -> DebateState:
        return mode_state(self.session, "debate", DebateState)

    async def __call__(self, session: DriverSite, message: TranscriptMessage) -> None:
        message = hooked_message(session, message)
        if message.step_id not in DEBATER_STEPS or message.sender not in ("pro", "con"):
            return
        state = self.state
        if message.id in state.turns:
            return  # already decided: the hooks run again on resume after a failure
        if self.judge is not None:
            verdict = await self._verdict(message)
            if session.state.state == "paused":
                return  # the judge's turn failed or was cancelled: resume judges again
            state.turns.append(message.id)
            state.verdicts.append(verdict)
            decision, checks = judged_debate_decision(
                [_verdict(v) for v in state.verdicts],
                max_turns=self.max_turns,
                dynamic=self.dynamic,
            )
        else:
            state.turns.append(message.id)
            by_id = session.state.transcript.by_id
            texts = [by_id[mid].content for mid in state.turns if mid in by_id]
            decision, checks = debate_decision(
                texts, max_turns=self.max_turns, dynamic=self.dynamic
            )
        self._decided(message, decision, checks)

    async def _verdict(self, message: TranscriptMessage) -> dict[str, float] | None:
        """Ask the judge about a debater turn; its numbers, or None when it was ignored."""
        assert self.judge is not None
        session = self.session
        speaker = f"{session.world.role(message.sender).display_name} (@{message.sender})"
        parsed = await ask_judge(
            session,
            self.judge,
            message,
            step_id=JUDGE_STEP,
            instruction=(
                f"As the debate's judge, assess {speaker}'s turn {message.id}. Reply with only "
                f"a JSON object in this format and nothing else: {JUDGE_FORMAT}"
            ),
            retry_instruction=(
                f"Reply again with ONLY the JSON object, exactly in this format: {JUDGE_FORMAT}"
            ),
            parse=parse_judgment,
        )
        if parsed is None or session.state.state == "paused":
            return None
        store_scores(session, self.judge, parsed.scores)
        return {
            "agreement": parsed.scores["agreement"],
            "new_arguments": int(parsed.scores["new_arguments"]),
            "concessions": int(parsed.scores["concessions"]),
        }

    def _decided(
        self, message: TranscriptMessage, decision: Decision | None, checks: Mapping[str, Any]
    ) -> None:
        state = self.state
        if decision is not None:
            state.decision = Decided(reason=decision.reason, detail=decision.detail)
            state.status = f"{decision.reason}: {decision.detail}"
        else:
            state.status = _status(checks)
        self.session.bus.publish(
            ModeEvent(
                mode="debate",
                name="termination",
                data={
                    "turn": len(state.turns),
                    "message_id": message.id,
                    "speaker": message.sender,
                    "stop": decision is not None,
                    "reason": decision.reason if decision else None,
                    "detail": decision.detail if decision else state.status,
                    "checks": dict(checks),
                },
            )
        )
        refresh_final(self.session)

    def check(self, group: str) -> ModeCheck:
        """The ``concession`` or ``stalemate`` condition: holds once the decision is one."""

        def run() -> tuple[bool, str, str]:
            state = self.state
            decision = state.decision
            if decision is not None and decision.reason in STOP_GROUPS[group]:
                return True, decision.reason, decision.detail
            return False, group, state.status

        return run


def _verdict(v: dict[str, float] | None) -> DebateVerdict | None:
    if v is None:
        return None
    return DebateVerdict(v["agreement"], int(v["new_arguments"]), int(v["concessions"]))


def names_of(session: DriverSite) -> dict[str, str]:
    world = session.world
    return {r: world.role(r).display_name for r in ("pro", "con") if r in world.role_ids}


def synthesis_instruction(names: Mapping[str, str], decision: Decided | None, cites: str) -> str:
    pro, con = names.get("pro", "Pro"), names.get("con", "Con")
    ended = ""
    if decision is not None:
        ended = f"The debate ended: {decision.reason} ({decision.detail}). "
    listing = f" The debate's messages: {cites}." if cites else ""
    return (
        f"Summarise the debate as its neutral moderator, without taking sides. {ended}"
        f"Cover: the strongest points of {pro} (PRO) and of {con} (CON); the common ground "
        "they found; the disagreements that remain; any concessions made; and your assessment "
        "of which arguments held up best and why. Cite the messages you draw on by id in "
        f"brackets, like [m3]. This closes the debate: nobody speaks after you, so ask no "
        f"question and hand the floor to no one.{listing}"
    )


def attach(session: DriverSite, hook: DebateHook) -> None:
    """Attach the debate's hook and its ``concession`` and ``stalemate`` checks."""
    mode_state(session, "debate", DebateState)
    session.ctx.mode_checks = {
        **session.ctx.mode_checks,
        "concession": hook.check("concession"),
        "stalemate": hook.check("stalemate"),
    }
    session.message_hooks.append(hook)
    refresh_final(session)


def refresh_final(session: DriverSite) -> None:
    """Word the moderator's synthesis with the decision and the debate's message ids."""
    state = mode_state(session, "debate", DebateState)
    names = names_of(session)
    label = {side: f"{names.get(side, side)} ({side.upper()})" for side in ("pro", "con")}
    cites = cite_list(session, state.turns, label)
    set_final_instruction(session, synthesis_instruction(names, state.decision, cites))


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
        off = "" if checks.get("dynamic", True) else " (dynamic termination off)"
        return "; ".join(parts) + off
    if not checks.get("dynamic", True):
        return parts[0] + " (dynamic termination off)"
    parts.append("no concession")
    rep = checks.get("repetition")
    parts.append(f"repetition {rep:g}" if rep is not None else "repetition n/a")
    counts = checks.get("last_word_counts")
    if counts:
        parts.append(f"last turns {counts[0]} and {counts[1]} words")
    return "; ".join(parts)
