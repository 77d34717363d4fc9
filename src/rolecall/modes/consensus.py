"""The consensus preset (modes.md, Consensus): round-robin toward an agreed proposal.

``mode: consensus`` expands into an ordinary world:

* one role per participant (the profile's role names, or ``consensus.participants``),
  plus ``synthesizer``, who writes the closing summary. In the ``brainstorm`` profile the
  synthesizer is also a participant: it is one role that speaks in every round and then
  writes the summary;
* round 1: steps ``open_<id>`` (the first opens with no target, each later one answers
  the previous participant): everyone proposes;
* rounds 2..max_rounds: steps ``<id>`` (each answers the previous participant in the
  cycle) asking every participant to end with "I agree" or its open objection; the last
  step loops back to the first;
* ``stop: [consensus, stalemate]``: ``consensus`` holds when every participant agrees
  over the last full round (phrase rules of :mod:`rolecall.modes.termination`), or, with
  ``consensus.judge``, when the judge's verdict after a round says so; ``stalemate`` here
  means max rounds done without consensus (reason ``max_turns``);
* ``final``: the synthesizer's summary, whose instruction lists the message ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from rolecall.bus import ModeEvent
from rolecall.errors import UnknownRoleError
from rolecall.flows.model import Ident
from rolecall.modes.common import (
    Decided,
    PresetState,
    cite_list,
    judge_role,
    merge_roles,
    mode_state,
    no_flow,
    parse_options,
    preset_settings,
    set_final_instruction,
    user_role_ids,
    validate_judgment,
)
from rolecall.modes.judge import ask_judge, hooked_message, store_scores
from rolecall.modes.judgments import Parsed
from rolecall.modes.registry import ModeSpec, register
from rolecall.modes.termination import CONSENSUS, MAX_TURNS, consensus_decision
from rolecall.plans import Host

if TYPE_CHECKING:
    from rolecall.session.state import Message
    from rolecall.world.library import RoleLibrary

PROFILES: Final[dict[str, tuple[str, ...]]] = {
    "balanced": ("analyst", "creative", "critic"),
    "technical-review": ("engineer", "architect", "tester"),
    "brainstorm": ("dreamer", "realist", "synthesizer"),
}
SYNTHESIZER: Final = "synthesizer"
JUDGE_STEP: Final = "judge"
FINAL_STEP: Final = "synthesis"
MIN_PARTICIPANTS: Final = 3


class ConsensusState(PresetState):
    """``extra["consensus"]``: the participant turns so far and the judge's verdicts."""

    turns: list[tuple[str, str]] = Field(default_factory=list)  # (speaker, message id)
    verdicts: list[dict[str, Any] | None] = Field(default_factory=list)  # one per judged round


class ConsensusOptions(BaseModel):
    """The ``consensus:`` block of a world."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = "balanced"
    participants: list[Ident] | None = None
    max_rounds: Annotated[StrictInt, Field(ge=1, le=20)] = 5
    judge: Ident | None = None


# ======================================================================= expand
def participants_of(opts: Mapping[str, Any]) -> list[str]:
    chosen = opts.get("participants")
    if chosen:
        return list(chosen)
    return list(PROFILES.get(opts.get("profile") or "balanced", PROFILES["balanced"]))


def _opening(prev: str | None, prev_name: str) -> str:
    if prev is None:
        return (
            "Open the discussion: give your perspective on the topic and one concrete proposal "
            "the group could adopt."
        )
    return (
        f"Respond to {prev_name} (@{prev}) by name: build on what has been said, then add your "
        "perspective and one concrete proposal."
    )


def _converge(prev: str, prev_name: str) -> str:
    return (
        f"Respond to {prev_name} (@{prev}) by name. Work toward one proposal the whole group "
        "can accept: build on the others' points and resolve open objections. End by stating your "
        'position: say "I agree" if you support the current proposal, '
        "otherwise state your open objection and the change that would resolve it."
    )


def _display(role: Mapping[str, Any], rid: str) -> str:
    name = role.get("name")
    return str(name) if name else rid.replace("_", " ").title()


def expand(raw: dict[str, Any], library: RoleLibrary, problems: list[str]) -> dict[str, Any]:
    data = dict(raw)
    opts = parse_options(data.get("consensus"), "consensus", ConsensusOptions, problems)
    if opts["profile"] not in PROFILES:
        problems.append(
            f"consensus.profile: unknown profile {opts['profile']!r} "
            f"(profiles: {', '.join(PROFILES)})"
        )
        opts["profile"] = "balanced"
    topic = data.get("topic")
    if not isinstance(topic, str) or not topic.strip():
        problems.append(
            "topic: a consensus needs a topic, the question to decide "
            "(e.g. topic: Which database should the team adopt?)"
        )
    no_flow(data, "consensus", problems)
    people = participants_of(opts)
    if len(people) < MIN_PARTICIPANTS:
        problems.append(
            f"consensus.participants: a consensus needs at least {MIN_PARTICIPANTS} participants, "
            f"got {len(people)} ({', '.join(people) or 'none'})"
        )
    if len(set(people)) != len(people):
        dupes = sorted({p for p in people if people.count(p) > 1})
        problems.append(f"consensus.participants: duplicate participants ({', '.join(dupes)})")
        people = list(dict.fromkeys(people))
    user_ids = user_role_ids(data.get("roles"))
    preset: list[dict[str, Any]] = []
    for i, pid in enumerate(people):
        entry: dict[str, Any] = {"id": pid}
        try:
            library.get(pid)
            entry["template"] = pid
        except UnknownRoleError:
            if pid not in user_ids:
                where = f"consensus.participants[{i}]" if opts["participants"] else "consensus"
                problems.append(
                    f"{where}: no role '{pid}' (define it under roles:, or use a role library "
                    "template such as analyst, creative, critic, engineer, architect, tester)"
                )
        preset.append(entry)
    if SYNTHESIZER not in people:
        preset.append({"template": SYNTHESIZER, "id": SYNTHESIZER})
    judge = opts["judge"]
    taken = (*people, SYNTHESIZER)
    preset.extend(judge_role(judge, "consensus", taken, data.get("roles"), library, problems))
    roles = merge_roles(data.get("roles"), preset, problems)
    data["roles"] = roles
    names = {}
    for role in roles:
        if isinstance(role, dict) and isinstance(role.get("id"), str):
            rid = role["id"]
            base: Mapping[str, Any] = {}
            if isinstance(role.get("template"), str):
                try:
                    base = library.get(role["template"])
                except UnknownRoleError:
                    base = {}
            names[rid] = _display({**base, **role}, rid)
    rounds: int = opts["max_rounds"]
    steps: list[dict[str, Any]] = []
    k = len(people)
    for i, pid in enumerate(people):
        prev = people[i - 1] if i > 0 else None
        steps.append(
            {
                "id": f"open_{pid}",
                "speaker": pid,
                "reply_to": {"role": prev} if prev else "none",
                "instruction": _opening(prev, names.get(prev or "", prev or "")),
            }
        )
    if rounds >= 2 and k:
        for i, pid in enumerate(people):
            prev = people[i - 1]
            step: dict[str, Any] = {
                "id": pid,
                "speaker": pid,
                "reply_to": {"role": prev},
                "instruction": _converge(prev, names.get(prev, prev)),
            }
            if i == k - 1:
                step["loop"] = {"to": people[0], "max": rounds - 1}
            steps.append(step)
    if steps:
        data["flow"] = {
            "steps": steps,
            "stop": ["consensus", "stalemate"],
            "final": {
                "id": FINAL_STEP,
                "speaker": SYNTHESIZER,
                "reply_to": "none",
                "instruction": synthesis_instruction(None, ""),
            },
        }
    per_round = k + (2 if judge is not None else 0)
    data["settings"] = preset_settings(data.get("settings"), max_turns=per_round * rounds + 1)
    data.setdefault(
        "title", f"Consensus: {topic}" if isinstance(topic, str) and topic else "Consensus"
    )
    data["consensus"] = {**opts, "participants": people}
    return data


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

    model_config = ConfigDict(extra="ignore", frozen=True)

    consensus: StrictBool
    agreement: Annotated[float, Field(ge=0, le=1)]
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


# ====================================================================== install
def _refresh_final(session: Host) -> None:
    state = mode_state(session, "consensus", ConsensusState)
    world = session.world
    label = {r.id: r.display_name for r in world.roles}
    cites = cite_list(session, [mid for _, mid in state.turns], label)
    set_final_instruction(session, synthesis_instruction(state.decision, cites))


def install(session: Host) -> None:
    world = session.world
    if world.flow is None:
        return
    raw = dict(world.consensus or {})
    people = participants_of(raw)
    opts = ConsensusOptions.model_validate({**raw, "participants": people})
    steps = {f"open_{p}" for p in people} | set(people)
    k = len(people)
    mode_state(session, "consensus", ConsensusState)

    async def after_message(session: Host, message: Message) -> None:
        message = hooked_message(session, message)
        if message.step_id not in steps or message.sender not in people:
            return
        state = mode_state(session, "consensus", ConsensusState)
        if any(mid == message.id for _, mid in state.turns):
            return  # already decided: the hooks run again on resume after a failure
        n = len(state.turns) + 1
        round_done = n % k == 0
        rounds = n // k
        data: dict[str, Any] = {"turn": n, "round": rounds + (0 if round_done else 1)}
        holds = False
        if opts.judge is not None:
            if round_done:
                parsed = await ask_judge(
                    session,
                    opts.judge,
                    message,
                    step_id=JUDGE_STEP,
                    instruction=(
                        f"As the judge, assess round {rounds} of the discussion, which ends with "
                        f"{message.id}: have all participants reached consensus? Reply with only "
                        f"a JSON object in this format and nothing else: {JUDGE_FORMAT}"
                    ),
                    retry_instruction=(
                        "Reply again with ONLY the JSON object, exactly in this format: "
                        f"{JUDGE_FORMAT}"
                    ),
                    parse=parse_judgment,
                )
                if session.state.state == "paused":
                    return  # the judge's turn failed or was cancelled: resume judges again
                state.verdicts.append(parsed.verdict if parsed is not None else None)
                if parsed is not None:
                    store_scores(session, opts.judge, parsed.scores)
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
        if opts.judge is None:
            by_id = session.state.transcript.by_id
            window = [(s, by_id[m].content) for s, m in state.turns[-k:] if m in by_id]
            holds, detail, stances = consensus_decision(window, people)
            data["stances"] = [
                {"speaker": s.speaker, "agrees": s.agrees, "agreement": s.agreement,
                 "objection": s.objection}
                for s in stances
            ]  # fmt: skip
        if holds:
            state.decision = Decided(reason=CONSENSUS, detail=detail)
        elif round_done and rounds >= opts.max_rounds:
            state.decision = Decided(
                reason=MAX_TURNS, detail=f"{rounds} of {opts.max_rounds} rounds without consensus"
            )
        decision = state.decision
        state.status = detail
        data.update(
            stop=decision is not None,
            reason=decision.reason if decision else None,
            detail=decision.detail if decision else detail,
            message_id=message.id,
        )
        session.bus.publish(ModeEvent(mode="consensus", name="check", data=data))
        _refresh_final(session)

    def check(reason: str, word: str) -> Any:
        def run() -> tuple[bool, str, str]:
            state = mode_state(session, "consensus", ConsensusState)
            decision = state.decision
            if decision is not None and decision.reason == reason:
                return True, reason, decision.detail
            return False, word, str(state.status)

        return run

    session.ctx.mode_checks = {
        **session.ctx.mode_checks,
        "consensus": check(CONSENSUS, "consensus"),
        "stalemate": check(MAX_TURNS, "stalemate"),
    }
    session.message_hooks.append(after_message)
    _refresh_final(session)


register(
    ModeSpec(
        "consensus",
        expand,
        install,
        options=ConsensusOptions,
        conditions={
            "consensus": "every participant agrees over the last full round",
            "stalemate": "max_rounds done without consensus",
        },
    )
)
