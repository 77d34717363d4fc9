"""``rolecall debate`` and ``rolecall consensus``: the presets without writing YAML.

Each builds the world mapping a ``mode:`` world.yaml would hold, loads it through the
ordinary loader (so the preset expands exactly as from a file), then runs it like
``rolecall run``: stored, displayed, interruptible, resumable. ``new_world_yaml`` gives
the ready-to-edit world.yaml of ``rolecall worlds new NAME --from debate|consensus``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rolecall.cli.flags import add_common_flags
from rolecall.cli.options import SessionOptions
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.world.models import World

_ID = re.compile(r"^[a-z][a-z0-9_-]*$")

DEBATE_EXAMPLES = [
    'rolecall debate "Cities should ban cars from their centres"',
    'rolecall debate "Adopt microservices" --profile technical --max-turns 6',
    'rolecall debate "Tax sugar" --pro "a public-health doctor" --con "a small grocer"',
    'rolecall debate "Nuclear power is green" --judge --model openai/gpt-4o-mini',
    'rolecall debate "Ban cars downtown" --context brief.md   both sides cite the brief',
]

CONSENSUS_EXAMPLES = [
    'rolecall consensus "Which database should we adopt?"',
    'rolecall consensus "Redesign the onboarding flow" --profile brainstorm --max-rounds 3',
    'rolecall consensus "Ship the v2 API?" --profile technical-review --json',
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetOptions(SessionOptions):
    """``rolecall debate`` and ``rolecall consensus``: TOPIC, ``--profile``."""

    topic_arg: str | None = None  # TOPIC (or --topic: the common flag)
    profile: str | None = None  # --profile ("" is an unknown profile, not the default)


@dataclass(frozen=True, slots=True, kw_only=True)
class DebateOptions(PresetOptions):
    """``rolecall debate``: its ``--max-turns`` (``max_turns``) counts debater turns."""

    pro: str | None = None  # --pro: PRO's persona text
    con: str | None = None  # --con
    no_dynamic: bool = False  # --no-dynamic
    judge: bool = False  # --judge
    context: list[str] | None = None  # --context FILE, repeated


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsensusOptions(PresetOptions):
    """``rolecall consensus``."""

    max_rounds: int | None = None  # --max-rounds


def _common(p: argparse.ArgumentParser, *, max_turns: bool = True) -> None:
    """The common flags (modes.md) (as in ``rolecall run``), plus ``--mode``."""
    add_common_flags(
        p,
        max_turns=max_turns,
        topic_help="the topic, instead of TOPIC (both given: they must be the same)",
    )
    p.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: run to the stop; step: one turn per Enter",
    )


def add_parsers(sub: Any) -> None:
    """Add the ``debate`` and ``consensus`` subcommands to ``rolecall``'s subparsers."""
    add_debate(sub)
    add_consensus(sub)


def add_debate(sub: Any) -> None:
    """Add ``rolecall debate``."""
    debate = add_command(
        sub,
        "debate",
        description=(
            "Debate TOPIC: PRO and CON alternate (PRO on odd turns, CON on even ones), each "
            "answering the other; the debate stops on a concession, a stalemate or after "
            "--max-turns debater turns, and a neutral moderator writes the synthesis."
        ),
        examples=DEBATE_EXAMPLES,
    )
    debate.add_argument(
        "topic_arg", metavar="TOPIC", nargs="?", help="the proposition to debate (or --topic)"
    )
    debate.add_argument(
        "--profile",
        help="persona profile: classic (default), technical, business, scientific, ethical, "
        "political",
    )
    debate.add_argument("--pro", help="PRO's persona text (wins over the profile)")
    debate.add_argument("--con", help="CON's persona text (wins over the profile)")
    debate.add_argument(
        "--max-turns", type=int, help="debater turns, 2..20 (default 10); the synthesis is extra"
    )
    debate.add_argument(
        "--no-dynamic",
        action="store_true",
        help="no early stop on concession or stalemate: always run --max-turns turns",
    )
    debate.add_argument(
        "--judge",
        action="store_true",
        help="add a judge (role library template 'judge') whose JSON verdicts decide termination",
    )
    debate.add_argument(
        "--context",
        action="append",
        metavar="FILE",
        help="a document (.md, .txt, .pdf, .html) or folder both debaters and the moderator "
        "answer from, citing passages as [k1]; repeat for more (docs/knowledge.md)",
    )
    _common(debate, max_turns=False)


def add_consensus(sub: Any) -> None:
    """Add ``rolecall consensus``."""
    consensus = add_command(
        sub,
        "consensus",
        description=(
            "Seek consensus on TOPIC: the profile's participants speak in round-robin until "
            "every one of them agrees over a full round (or --max-rounds), then the "
            "synthesizer writes the group's result."
        ),
        examples=CONSENSUS_EXAMPLES,
    )
    consensus.add_argument(
        "topic_arg", metavar="TOPIC", nargs="?", help="the question to decide (or --topic)"
    )
    consensus.add_argument(
        "--profile",
        help="participants: balanced (default), technical-review, brainstorm, five-voices",
    )
    consensus.add_argument("--max-rounds", type=int, help="full rounds at most, 1..20 (default 5)")
    _common(consensus)


# ------------------------------------------------------------------ worlds
_EXAMPLE_TOPIC = {
    "debate": "Cities should ban cars",
    "consensus": "Which database should we adopt?",
}


def _topic(opts: PresetOptions, command: str) -> str:
    """The topic of ``rolecall debate|consensus``: TOPIC or ``--topic`` (both: the same)."""
    given = opts.topic_arg
    flag = opts.topic
    example = f'rolecall {command} "{_EXAMPLE_TOPIC[command]}"'
    if flag is not None:
        if not flag.strip():
            raise UsageError(f"--topic is empty; give the topic, e.g. {example}")
        if given is not None and given != flag:
            raise UsageError(
                f"two topics given, TOPIC {given!r} and --topic {flag!r}; give one of them"
            )
        return flag
    if given is None or not given.strip():
        raise UsageError(f"a TOPIC is required, e.g. {example}")
    return given


def debate_world(opts: DebateOptions) -> dict[str, Any]:
    """The world mapping of ``rolecall debate`` (what a world.yaml would hold)."""
    options: dict[str, Any] = {}
    if opts.profile is not None:  # "" is an unknown profile, not classic
        options["profile"] = opts.profile
    if opts.pro is not None:  # "" is refused by the loader
        options["pro"] = opts.pro
    if opts.con is not None:
        options["con"] = opts.con
    if opts.max_turns is not None:
        options["max_turns"] = opts.max_turns
    if opts.no_dynamic:
        options["dynamic_termination"] = False
    if opts.judge:
        options["judge"] = "judge"
    if opts.context:  # relative to where the command runs
        from pathlib import Path

        options["context"] = [str(Path(p).absolute()) for p in opts.context]
    return {"name": "debate", "mode": "debate", "topic": _topic(opts, "debate"), "debate": options}


def consensus_world(opts: ConsensusOptions) -> dict[str, Any]:
    """The world mapping of ``rolecall consensus``."""
    options: dict[str, Any] = {}
    if opts.profile is not None:  # "" is an unknown profile
        options["profile"] = opts.profile
    if opts.max_rounds is not None:
        options["max_rounds"] = opts.max_rounds
    return {
        "name": "consensus",
        "mode": "consensus",
        "topic": _topic(opts, "consensus"),
        "consensus": options,
    }


def load_preset(raw: dict[str, Any], source: str) -> World:
    """Load a preset's world mapping through the ordinary loader (every problem at once)."""
    import sys

    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world

    loaded = build_world(raw, source=source, library=RoleLibrary())
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return loaded.world


def _run(opts: SessionOptions, world: World) -> int:
    """Run ``world`` exactly like ``rolecall run`` does (store, display, drive, exit code)."""
    import anyio

    from rolecall.cli.running import drive, outcome
    from rolecall.cli.wiring import live_session, open_store

    holder: list[Session] = []

    async def main() -> None:
        async with open_store(opts) as store, live_session(opts, world, store) as session:
            holder.append(session)
            await drive(session, opts.mode or "auto")

    anyio.run(main)
    return outcome(holder[0], opts)


_DEBATE_FLAGS = {
    "debate.max_turns": "--max-turns",
    "debate.profile": "--profile",
    "debate.pro": "--pro",
    "debate.con": "--con",
    "debate.context": "--context",
}


def run_debate(args: argparse.Namespace) -> int:
    """``rolecall debate TOPIC ...``: its ``--max-turns`` counts debater turns (the
    preset's own option); the other common flags (``--max-cost``, ``--topic``) are
    applied as ``rolecall run`` applies them."""
    from rolecall.cli.running import apply_overrides
    from rolecall.cli.suggest import flags_named

    opts = DebateOptions.of(args)
    with flags_named(_DEBATE_FLAGS):
        world = load_preset(debate_world(opts), "debate")
    return _run(opts, apply_overrides(world, opts, max_turns=False))


def run_consensus(args: argparse.Namespace) -> int:
    """``rolecall consensus TOPIC ...``: the common flags as in ``rolecall run``
    (``--max-turns`` the usual hard cap, ``--max-cost`` the budget)."""
    from rolecall.cli.running import apply_overrides
    from rolecall.cli.suggest import flags_named

    opts = ConsensusOptions.of(args)
    with flags_named({"consensus.max_rounds": "--max-rounds", "consensus.profile": "--profile"}):
        world = load_preset(consensus_world(opts), "consensus")
    return _run(opts, apply_overrides(world, opts))


# -------------------------------------------------------------- worlds new
_DEBATE_YAML = """\
# A debate (docs/modes.md): PRO and CON alternate, PRO on odd turns and CON on even ones,
# each answering the other's latest message by name. The debate stops on a concession, a
# stalemate (repetition or disengagement) or after max_turns debater turns; then a neutral
# moderator writes the synthesis, citing message ids. Runs offline as it is:
#   rolecall run worlds/{name}
name: {name}
title: A debate on remote work
topic: Remote work should be the default for office jobs
model: offline                 # e.g. openai/gpt-4o-mini for real debaters
mode: debate
debate:
  profile: classic             # classic, technical, business, scientific, ethical, political
  # pro: a founder who built a fully remote company     # persona texts win over the profile
  # con: a mayor worried about empty city centres
  max_turns: 8                 # debater turns, 2..20; the synthesis comes on top
  dynamic_termination: true    # false: always run max_turns turns
  # judge: judge               # a judge returns JSON after each turn and decides instead
  # context: [brief.md]        # documents both debaters and the moderator cite as [k1]
# roles:                       # override the preset's roles by id: pro, con, moderator
#   - id: moderator
#     model: openai/gpt-4o-mini
#   - id: judge                # needed only for a judge that is not a library template
#     template: judge
settings:
  constraints: ["Answer in English."]
"""

_CONSENSUS_YAML = """\
# A consensus discussion (docs/modes.md): three or more participants speak in round-robin;
# round 1 gathers proposals, later rounds converge. It stops when, over the last full
# round, every participant says it agrees with no objection open (or after max_rounds);
# then the synthesizer writes the group's result, citing message ids. Runs offline:
#   rolecall run worlds/{name}
name: {name}
title: Choosing a database
topic: Which database should the team adopt for the new service?
model: offline                 # e.g. openai/gpt-4o-mini for real participants
mode: consensus
consensus:
  profile: technical-review    # balanced (analyst, creative, critic), technical-review
                               # (engineer, architect, tester), brainstorm (dreamer,
                               # realist, synthesizer)
  # participants: [engineer, architect, tester, analyst]   # instead of the profile, 3 or more
  max_rounds: 4                # full rounds at most, 1..20
  # judge: judge               # a judge returns JSON after each round and decides instead
# roles:                       # override roles by id: the participants and synthesizer
#   - id: synthesizer
#     model: openai/gpt-4o-mini
settings:
  constraints: ["Answer in English."]
"""

PRESET_YAML: dict[str, str] = {"debate": _DEBATE_YAML, "consensus": _CONSENSUS_YAML}


def new_world_yaml(mode: str, name: str) -> str:
    """A ready-to-edit world.yaml for ``rolecall worlds new NAME --from MODE``."""
    template = PRESET_YAML.get(mode)
    if template is None:
        from rolecall.cli.suggest import did_you_mean

        presets = [*PRESET_YAML, "study"]
        raise UsageError(
            f"no preset '{mode}' to start from{did_you_mean(mode, presets)} "
            f"(presets: {', '.join(presets)})"
        )
    check_world_name(name)
    return template.replace("{name}", name)


def check_world_name(name: str) -> None:
    """UsageError unless ``name`` is a world name ``worlds new`` may write."""
    if not _ID.fullmatch(name):
        raise UsageError(
            f"bad world name {name!r} (use lowercase letters, digits, _ and -, starting with "
            "a letter)"
        )
