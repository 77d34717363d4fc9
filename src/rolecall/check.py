"""A world's worst case before it runs (worlds.md, Checking a world's worst case). Pure.

Turns come from :mod:`rolecall.flows.worstcase` (loops by ``max``, branches by the longest
path, ``until`` and ``when`` as an adversary chooses, global ``stop`` conditions never
holding except ``{max_turns: N}``). Each judged message adds two judge turns (a verdict
and its one retry); the ``final`` turn adds one. Interjections are not counted: they
come from a human.

Tokens use the estimate the budgets use for built-in models (about four characters a
token, four more per prompt message): a turn's prompt is its role's system text, the
last ``memory_window`` messages, each as long as its speaker may write, and the turn's
text with its target quoted in full. A role may write ``max_tokens`` (its own), else
its model's maximum (litellm's map), else, for scripted roles, its longest line.

Prices and maximum outputs are looked up through the two callables the caller passes
(the CLI asks the model registry), so this module never touches a provider.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from rolecall.flows.conditions import MaxTurnsCond
from rolecall.flows.worstcase import (
    Key,
    TooComplex,
    cap_only,
    exit_cycle,
    graph,
    longest,
    unreachable,
)
from rolecall.llm.types import estimate_tokens
from rolecall.prompt import system_text
from rolecall.world.judge_block import judges_by_step, parse_block
from rolecall.world.models import Role, World

JUDGE_TURNS = 2  # a verdict and one retry per judged message
JUDGE_INSTRUCTION_CHARS = 700  # the judge's own instruction, scores format included
CITE_CHARS = 8  # a preset's closing instruction lists every message id, like "[m123] "

Rates = Callable[[Role], tuple[float, float] | None]  # USD per input and output token
MaxOutput = Callable[[Role], int | None]  # the most a role may write in one reply


@dataclass
class RoleCase:
    turns: int = 0
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cost_usd: float | None = 0.0


@dataclass
class Cut:
    cap: str  # max_turns | max_tokens | max_cost
    limit: float
    turn: int  # the turn that would not start
    step: str | None  # its step, when known

    def describe(self) -> str:
        where = f" at {self.step}" if self.step else ""
        return f"{self.cap} {self.limit:g} stops turn {self.turn}{where}"


@dataclass
class Report:
    world: str
    has_flow: bool
    worst_case_turns: int | None  # what would run, caps applied; None without a flow
    flow_turns: int | None  # the flow alone, no cap; None when unbounded
    per_role: dict[str, RoleCase] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    cap_only: list[str] = field(default_factory=list)
    cycle: list[str] | None = None  # steps the flow may go round without end
    cost_usd: float | None = None
    cut: Cut | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "world": self.world,
            "worst_case_turns": self.worst_case_turns,
            "flow_turns": self.flow_turns,
            "per_role": {
                r: {
                    "turns": c.turns,
                    "input_tokens": c.input_tokens,
                    "output_tokens": c.output_tokens,
                    "cost_usd": c.cost_usd,
                }
                for r, c in self.per_role.items()
            },
            "unreachable": self.unreachable,
            "cap_only": self.cap_only,
            "unbounded_cycle": self.cycle,
            "cost_usd": self.cost_usd,
            "cut_by": self.cut.cap if self.cut else None,
            "cut_at": (
                {"turn": self.cut.turn, "step": self.cut.step, "limit": self.cut.limit}
                if self.cut
                else None
            ),
        }


@dataclass(frozen=True)
class _Turn:
    role: str
    step: str | None
    target: str | None  # the speaker whose message is quoted
    instruction_chars: int
    generic: bool = False  # anywhere in the session: a full memory window


class _Sizes:
    """Per-role token bounds: what a role writes, as a memory entry, as a quoted target."""

    def __init__(self, world: World, max_output: MaxOutput, most_turns: int) -> None:
        self.world = world
        self.window = world.settings.memory_window
        self.out: dict[str, int | None] = {}
        self.quote: dict[str, int | None] = {}
        self.system: dict[str, int] = {}
        longest_id = max((len(r) for r in [*world.role_ids, "human", "system"]), default=5)
        for role in world.roles:
            self.system[role.id] = estimate_tokens(system_text(world, role)) + 4
            lines = (
                [line for line in role.script or () if isinstance(line, str)]
                if world.model_for(role) == "scripted"
                else None
            )
            if lines:
                filled = [_worst_fill(line, world.topic, longest_id, most_turns) for line in lines]
                self.out[role.id] = max(estimate_tokens(t) for t in filled)
                self.quote[role.id] = max(estimate_tokens(_quoted(t)) for t in filled)
                continue
            out: int | None = role.reply_cap(world.settings)
            found = max_output(role)
            out = found if out is None else out if found is None else min(out, found)
            self.out[role.id] = out
            # "> " before every line: the offline model writes one line; others at most
            # a line per token
            lines_per_token = 0 if world.model_for(role) == "offline" else 1
            self.quote[role.id] = None if out is None else out + lines_per_token * out + 1

    def memory(self, role: str) -> int | None:
        out = self.out[role]
        return None if out is None else out + estimate_tokens(f"[{role}] ") + 4

    def prompt(
        self, turn: _Turn, history: list[int | None], window: int, number: int
    ) -> int | None:
        """The input tokens of ``turn``, the ``number``-th message, after ``history``."""
        if turn.generic:
            biggest = [self.memory(r) for r in self.world.role_ids]
            recent: list[int | None] = (
                [None] if None in biggest else [max(b or 0 for b in biggest)] * self.window
            )
        else:
            recent = history[-window:] if window else []
        if any(t is None for t in recent):
            return None
        role = self.world.role(turn.role)
        text = 4 + estimate_tokens(f"Reply now as {role.display_name}.") + 3
        if turn.instruction_chars:
            text += estimate_tokens("Instruction for this turn: " + "x" * turn.instruction_chars)
        if turn.target is None:
            text += estimate_tokens(
                "Nobody in particular is being answered; continue the conversation."
            )
        else:
            quote = self.quote.get(turn.target)
            if quote is None:
                return None
            who = self.world.role(turn.target).display_name + f" (@{turn.target})"
            text += quote + estimate_tokens(f"You are answering {who}, message m{number}:")
        return self.system[turn.role] + sum(t or 0 for t in recent) + text


def _worst_fill(line: str, topic: str, longest_id: int, most_turns: int) -> str:
    digits = "9" * len(str(max(most_turns, 1)))
    values = {"{turn}": digits, "{n}": digits, "{speaker}": "x" * longest_id}
    values["{target}"] = "x" * max(longest_id, 1)
    values["{topic}"] = topic
    for key, value in values.items():
        line = line.replace(key, value)
    return line


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines() or [""])


def _turns(world: World, walk: list[str], judges: dict[str, list[str]]) -> list[_Turn]:
    """The turns of a walk of steps, judges after their steps, the final turn last."""
    assert world.flow is not None
    steps = {s.id: s for s in world.flow.steps}
    out: list[_Turn] = []
    last_by_role: dict[str, str] = {}
    last_by_step: dict[str, str] = {}
    block, _ = parse_block(world.block("judge"))
    judge_chars = JUDGE_INSTRUCTION_CHARS + len((block.instruction if block else None) or "")

    def target_of(reply_to: object) -> str | None:
        if reply_to == "previous":
            return out[-1].role if out else None
        if reply_to == "none":
            return None
        role = getattr(reply_to, "role", None)
        if role is not None:
            return last_by_role.get(role)
        step = getattr(reply_to, "step", None)
        if step is not None:
            return last_by_step.get(step)
        number = int(str(getattr(reply_to, "message", "m0"))[1:])
        return out[number - 1].role if 0 < number <= len(out) else None

    for sid in walk:
        step = steps[sid]
        turn = _Turn(step.speaker, sid, target_of(step.reply_to), len(step.instruction or ""))
        out.append(turn)
        last_by_role[turn.role] = turn.role
        last_by_step[sid] = turn.role
        for judge in judges.get(sid, []):
            for _ in range(JUDGE_TURNS):
                out.append(_Turn(judge, sid, step.speaker, judge_chars))
                last_by_role[judge] = judge
    final = world.flow.final
    if final is not None:
        cites = CITE_CHARS * len(out) + 300 if world.mode is not None else 0
        chars = len(final.instruction or "") + cites
        out.append(_Turn(final.speaker, final.id, target_of(final.reply_to), chars))
    return out


def check(world: World, rates: Rates, max_output: MaxOutput) -> Report:
    """The worst case of ``world`` (see the module docstring)."""
    if world.flow is None:
        return Report(world.name, False, None, None)
    flow = world.flow
    g = graph(flow)
    judges = judges_by_step(world, parse_block(world.block("judge"))[0])
    report = Report(world.name, True, None, None, unreachable=unreachable(g), cap_only=cap_only(g))
    caps = [c.max_turns for c in flow.stop if isinstance(c, MaxTurnsCond)]
    max_turns = world.settings.max_turns
    speaker_of = {s.id: s.speaker for s in flow.steps}
    report.cycle = exit_cycle(g)
    walk: list[str] | None = None
    moves: dict[Key, list[Key | None]] = {}
    if report.cycle is None:
        try:
            _, walk = longest(g, lambda s: 1 + JUDGE_TURNS * len(judges.get(s, [])), 0, moves)
        except TooComplex:
            walk = None
    sizes = _Sizes(world, max_output, max_turns)
    reachable = g.reachable
    speakers = {s.speaker for s in flow.steps if s.id in reachable}
    speakers |= {j for s, js in judges.items() if s in reachable for j in js}
    if flow.final is not None:
        speakers.add(flow.final.speaker)
    if walk is None:  # unbounded: a cap ends it; any reachable speaker may take any turn
        turns = [_generic_turn(world, sizes, r) for r in sorted(speakers)] * (max_turns + 1)
    else:
        turns = _turns(world, walk, judges)
        report.flow_turns = len(turns)
    if caps and len(turns) > min(caps):  # {max_turns: N} stops after N, then the final turn
        final = turns[-1:] if flow.final is not None and walk is not None else []
        turns = turns[: min(caps)] + final
    taken = _walk_turns(
        world, report, turns, sizes, rates, has_final=walk is not None and flow.final is not None
    )
    report.worst_case_turns = len(taken)
    for role in world.role_ids:
        case = RoleCase()
        for turn, prompt in taken:
            if turn.role == role:
                case.turns += 1
                case.input_tokens = _add(case.input_tokens, prompt)
                case.output_tokens = _add(case.output_tokens, sizes.out[role])
        if role in speakers:
            own = len(taken)
            if walk is not None:
                with contextlib.suppress(TooComplex):
                    own, _ = longest(
                        g,
                        _role_weight(speaker_of, judges, role),
                        int(flow.final is not None and flow.final.speaker == role),
                        moves,
                    )
            extra = min(own, len(taken)) - case.turns
            if extra > 0:  # another walk gives this role more turns: full prompts for those
                full = sizes.prompt(_generic_turn(world, sizes, role), [], 0, 10**6)
                case.turns += extra
                case.input_tokens = _add(case.input_tokens, _times(extra, full))
                case.output_tokens = _add(case.output_tokens, _times(extra, sizes.out[role]))
        price = rates(world.role(role))
        if case.turns == 0 or price == (0.0, 0.0):
            case.cost_usd = 0.0
        elif price is None or case.input_tokens is None or case.output_tokens is None:
            case.cost_usd = None
        else:
            case.cost_usd = case.input_tokens * price[0] + case.output_tokens * price[1]
        report.per_role[role] = case
    return report


def _role_weight(
    speaker_of: dict[str, str], judges: dict[str, list[str]], role: str
) -> Callable[[str], int]:
    def weight(step: str) -> int:
        return int(speaker_of[step] == role) + JUDGE_TURNS * judges.get(step, []).count(role)

    return weight


def _add(total: int | None, more: int | None) -> int | None:
    return None if total is None or more is None else total + more


def _times(n: int, each: int | None) -> int | None:
    return None if each is None else n * each


def _generic_turn(world: World, sizes: _Sizes, role: str) -> _Turn:
    """A turn of ``role`` that may be anywhere: the longest instruction, the longest target."""
    assert world.flow is not None
    target = max(
        world.role_ids, key=lambda r: -1 if sizes.quote.get(r) is None else sizes.quote[r] or 0
    )
    if any(sizes.quote.get(r) is None for r in world.role_ids):
        target = next(r for r in world.role_ids if sizes.quote.get(r) is None)
    chars = max((len(s.instruction or "") for s in world.flow.steps), default=0)
    final = world.flow.final
    if final is not None:
        chars = max(
            chars, len(final.instruction or "") + CITE_CHARS * world.settings.max_turns + 300
        )
    return _Turn(role, None, target, max(chars, JUDGE_INSTRUCTION_CHARS + 200), generic=True)


def _walk_turns(
    world: World,
    report: Report,
    turns: list[_Turn],
    sizes: _Sizes,
    rates: Rates,
    *,
    has_final: bool,
) -> list[tuple[_Turn, int | None]]:
    """The turns that run, with their prompts: hard limits apply before each turn.

    Sets ``report.cut`` and ``report.cost_usd`` (the cost of these turns; per-role worst
    cases may come from other walks, so they can add up to more).

    The first turn a limit forbids ends the flow (that is ``report.cut``); the final
    turn still runs when the limits allow it.
    """
    settings = world.settings
    taken: list[tuple[_Turn, int | None]] = []
    history: list[int | None] = []
    used_tokens: int | None = 0
    used_cost: float | None = 0.0
    last = len(turns) - 1
    for number, turn in enumerate(turns, start=1):
        if report.cut is not None and not (has_final and number - 1 == last):
            continue
        window = settings.memory_window
        prompt = sizes.prompt(turn, history, window, len(taken) + 1)
        out = sizes.out[turn.role]
        price = rates(world.role(turn.role))
        cost = (
            None
            if price is None or prompt is None or out is None
            else prompt * price[0] + out * price[1]
        )
        cut: Cut | None = None
        if len(taken) >= settings.max_turns:
            cut = Cut("max_turns", settings.max_turns, len(taken) + 1, turn.step)
        elif (
            settings.max_tokens is not None
            and used_tokens is not None
            and prompt is not None
            and used_tokens + prompt > settings.max_tokens
        ):
            cut = Cut("max_tokens", settings.max_tokens, len(taken) + 1, turn.step)
        if (
            cut is None
            and settings.max_cost is not None
            and used_cost is not None
            and cost is not None
            and used_cost + cost > settings.max_cost
        ):
            cut = Cut("max_cost", settings.max_cost, len(taken) + 1, turn.step)
        if cut is not None:
            report.cut = report.cut or cut
            continue
        taken.append((turn, prompt))
        history.append(sizes.memory(turn.role))
        used_tokens = _add(_add(used_tokens, prompt), out)
        used_cost = None if used_cost is None or cost is None else used_cost + cost
    report.cost_usd = used_cost
    return taken
