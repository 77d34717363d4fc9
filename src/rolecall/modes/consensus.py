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

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from rolecall.errors import UnknownRoleError, UsageError
from rolecall.flows.model import Ident
from rolecall.mode_registry import ModeSpec
from rolecall.modes.common import (
    judge_role,
    merge_roles,
    preset_options,
    preset_settings,
    user_role_ids,
)
from rolecall.modes.consensus_turns import ConsensusHook, attach, synthesis_instruction
from rolecall.modes.install import register_mode
from rolecall.plans import DriverSite

if TYPE_CHECKING:
    from rolecall.mode_registry import Roles

PROFILES: Final[dict[str, tuple[str, ...]]] = {
    "balanced": ("analyst", "creative", "critic"),
    "technical-review": ("engineer", "architect", "tester"),
    "brainstorm": ("dreamer", "realist", "synthesizer"),
    # the original consensus system's five generic personas, cycling in turn
    "five-voices": ("analyst", "creative", "critic", "pragmatist", "stakeholder"),
}
SYNTHESIZER: Final = "synthesizer"
JUDGE_STEP: Final = "judge"
FINAL_STEP: Final = "synthesis"
MIN_PARTICIPANTS: Final = 3


class ConsensusOptions(BaseModel):
    """The ``consensus:`` block of a world."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    profile: str = "balanced"
    participants: list[Ident] | None = None
    max_rounds: Annotated[StrictInt, Field(ge=1, le=20)] = 5
    judge: Ident | None = None


# ======================================================================= expand
def participants_of(opts: Mapping[str, Any]) -> list[str]:
    chosen = opts.get("participants")
    if chosen is not None:  # an explicit list, even an empty one (too few: an error)
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


def expand(raw: dict[str, Any], library: Roles, problems: list[str]) -> dict[str, Any]:
    data, opts = preset_options(
        raw,
        "consensus",
        ConsensusOptions,
        PROFILES,
        "balanced",
        "the question to decide (e.g. topic: Which database should the team adopt?)",
        problems,
    )
    topic = data.get("topic")
    people = participants_of(opts)
    if len(set(people)) != len(people):
        dupes = sorted({p for p in people if people.count(p) > 1})
        problems.append(f"consensus.participants: duplicate participants ({', '.join(dupes)})")
        people = list(dict.fromkeys(people))
    if len(people) < MIN_PARTICIPANTS:  # counted without repeats: both problems at once
        problems.append(
            f"consensus.participants: a consensus needs at least {MIN_PARTICIPANTS} participants, "
            f"got {len(people)} ({', '.join(people) or 'none'})"
        )
    user_ids = user_role_ids(data.get("roles"))
    given: list[str] = list(opts["participants"] or [])
    preset: list[dict[str, Any]] = []
    for pid in people:
        i = given.index(pid) if pid in given else 0  # its place in the file (repeats dropped)
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
        except UsageError as exc:  # the user's role file cannot be used
            if pid not in user_ids:
                where = f"consensus.participants[{i}]" if opts["participants"] else "consensus"
                problems.append(f"{where}: {exc}")
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
                except UsageError:  # named among the problems already
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


def install(session: DriverSite) -> None:
    if session.world.flow is None:
        return
    raw = dict(session.world.block("consensus") or {})
    people = participants_of(raw)
    opts = ConsensusOptions.model_validate({**raw, "participants": people})
    attach(session, ConsensusHook(session, people, judge=opts.judge, max_rounds=opts.max_rounds))


register_mode(
    ModeSpec(
        "consensus",
        expand,
        options=ConsensusOptions,
        conditions={
            "consensus": "every participant agrees over the last full round",
            "stalemate": "max_rounds done without consensus",
        },
    ),
    install,
)
