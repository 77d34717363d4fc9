"""The consensus preset at run time: the judge's verdicts, the consensus check, the summary.

After each participant turn, :class:`ConsensusHook` decides whether the group agrees
(the phrase rules of :mod:`rolecall.modes.termination` over the last full round, or the
judge's JSON verdict after each round when a judge is set), publishes the check as a
``system/mode`` event and keeps the decision in the session's :class:`ConsensusState`,
where the ``consensus`` and ``stalemate`` checks read it.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictBool

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
from rolecall.modes.termination import CONSENSUS, MAX_TURNS, consensus_decision
from rolecall.plans import DriverSite
from rolecall.session.state import TranscriptMessage

JUDGE_STEP: Final = "judge"


class ConsensusState(PresetState):
    """``extra["consensus"]``: the participant turns so far and the judge's verdicts."""

    turns: list[tuple[str, str]] = Field(default_factory=list)  # (speaker, message id)
    verdicts: list[dict[str, Any] | None] = Field(default_factory=list)  # one per judged round


def synthesis_instruction(decision: Decided | None, cites: str) -> str:
    if decision is not None and decision.reason == CONSENSUS:
        ended = "The group reached consensus. "
    elif decision is not None:
        ended = (
            f"The group did not reach consensus ({decision.detail}): give the closest "
            "common ground and the objections still open. "
        )
    else:
        ended = ""
    listing = f" The discussion's messages: {cites}." if cites else ""
    return (
        f"Summarise the discussion as the group's final result. {ended}State the common ground "
        "the participants reached, how differences were resolved or what stays open, and the "
        "final recommendation, crediting who contributed each key idea. Add no new positions. "
        f"Cite the messages you draw on by id in brackets, like [m3].{listing}"
    )


# ======================================================================== judge
class ConsensusJudgment(BaseModel):
    """The JSON a consensus judge returns after each full round (other keys are ignored)."""

    model_config = ConfigDict(defer_build=True, extra="ignore", frozen=True)

    consensus: StrictBool
    agreement: Agreement
    open_objections: list[str] = Field(default_factory=list)


JUDGE_FORMAT: Final = (
    '{"consensus": true | false, "agreement": <0 to 1: how far the participants agree>, '
    '"open_objections": ["each objection still open, in a few words"]}'
)


def parse_judgment(text: str) -> Parsed:
    judgment = validate_judgment(text, ConsensusJudgment)
    scores = {
        "consensus": 1.0 if judgment.consensus else 0.0,
        "agreement": float(judgment.agreement),
        "open_objections": float(len(judgment.open_objections)),
    }
    return Parsed(scores, judgment.model_dump())


# ====================================================================== the hook
class ConsensusHook:
    """The consensus's message hook and its two stop checks, for one session."""

    def __init__(
        self, session: DriverSite, people: list[str], *, judge: str | None, max_rounds: int
    ) -> None:
        self.session = session
        self.people = people
        self.steps = {f"open_{p}" for p in people} | set(people)
        self.judge = judge
        self.max_rounds = max_rounds

    @property
    def state(self) -> ConsensusState:
        return mode_state(self.session, "consensus", ConsensusState)

    async def __call__(self, session: DriverSite, message: TranscriptMessage) -> None:
        message = hooked_message(session, message)
        if message.step_id not in self.steps or message.sender not in self.people:
            return
        state = self.state
        if any(mid == message.id for _, mid in state.turns):
            return  # already decided: the hooks run again on resume after a failure
        k = len(self.people)
        n = len(state.turns) + 1
        round_done = n % k == 0
        rounds = n // k
        data: dict[str, Any] = {"turn": n, "round": rounds + (0 if round_done else 1)}
        holds = False
        if self.judge is not None:
            if round_done:
                parsed = await self._ask(message, rounds)
                if session.state.state == "paused":
                    return  # the judge's turn failed or was cancelled: resume judges again
                state.verdicts.append(parsed.verdict if parsed is not None else None)
                if parsed is not None:
                    store_scores(session, self.judge, parsed.scores)
                    holds = bool(parsed.verdict["consensus"])
                    detail = (
                        f"the judge says consensus after round {rounds}"
                        if holds
                        else f"the judge sees no consensus after round {rounds}"
                    )
                    data["verdict"] = parsed.verdict
                else:
                    detail = f"no valid verdict after round {rounds}"
            else:
                detail = f"round {rounds + 1} in progress; the judge rules after each round"
        state.turns.append((message.sender, message.id))
        if self.judge is None:
            by_id = session.state.transcript.by_id
            window = [(s, by_id[m].content) for s, m in state.turns[-k:] if m in by_id]
            holds, detail, stances = consensus_decision(window, self.people)
            data["stances"] = [
                {"speaker": s.speaker, "agrees": s.agrees, "agreement": s.agreement,
                 "objection": s.objection}
                for s in stances
            ]  # fmt: skip
        if holds:
            state.decision = Decided(reason=CONSENSUS, detail=detail)
        elif round_done and rounds >= self.max_rounds:
            state.decision = Decided(
                reason=MAX_TURNS, detail=f"{rounds} of {self.max_rounds} rounds without consensus"
            )
        self._decided(message, detail, data)

    async def _ask(self, message: TranscriptMessage, rounds: int) -> Parsed | None:
        assert self.judge is not None
        return await ask_judge(
            self.session,
            self.judge,
            message,
            step_id=JUDGE_STEP,
            instruction=(
                f"As the judge, assess round {rounds} of the discussion, which ends with "
                f"{message.id}: have all participants reached consensus? Reply with only "
                f"a JSON object in this format and nothing else: {JUDGE_FORMAT}"
            ),
            retry_instruction=(
                f"Reply again with ONLY the JSON object, exactly in this format: {JUDGE_FORMAT}"
            ),
            parse=parse_judgment,
        )

    def _decided(self, message: TranscriptMessage, detail: str, data: dict[str, Any]) -> None:
        state = self.state
        decision = state.decision
        state.status = detail
        data.update(
            stop=decision is not None,
            reason=decision.reason if decision else None,
            detail=decision.detail if decision else detail,
            message_id=message.id,
        )
        self.session.bus.publish(ModeEvent(mode="consensus", name="check", data=data))
        refresh_final(self.session)

    def check(self, reason: str, word: str) -> ModeCheck:
        """A stop check: holds once the decision's reason is ``reason``."""

        def run() -> tuple[bool, str, str]:
            state = self.state
            decision = state.decision
            if decision is not None and decision.reason == reason:
                return True, reason, decision.detail
            return False, word, state.status

        return run


def attach(session: DriverSite, hook: ConsensusHook) -> None:
    """Attach the hook and its ``consensus`` and ``stalemate`` checks."""
    mode_state(session, "consensus", ConsensusState)
    session.ctx.mode_checks = {
        **session.ctx.mode_checks,
        "consensus": hook.check(CONSENSUS, "consensus"),
        "stalemate": hook.check(MAX_TURNS, "stalemate"),
    }
    session.message_hooks.append(hook)
    refresh_final(session)


def refresh_final(session: DriverSite) -> None:
    """Word the synthesizer's summary with the decision and the discussion's message ids."""
    state = mode_state(session, "consensus", ConsensusState)
    label = {r.id: r.display_name for r in session.world.roles}
    cites = cite_list(session, [mid for _, mid in state.turns], label)
    set_final_instruction(session, synthesis_instruction(state.decision, cites))
