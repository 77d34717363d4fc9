"""One judge's scores of a stored session (``rolecall score``, docs/compare.md).

The judge reads the session's transcript (every message, in order, with its id and
sender) and answers with the JSON verdict of a judge role (modes.md): scores on its
criteria within its scale, and a comment. The call goes through the model registry like
a turn's, so ``--record`` keeps it and ``--replay`` serves it. A reply that is not a
valid verdict is asked for once more, then the scoring fails (nothing stored).
"""

from __future__ import annotations

from dataclasses import dataclass

from rolecall.errors import RuntimeFailure
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import ChatMessage, GenerationRequest, TextDelta, TurnInfo, Usage
from rolecall.modes.judgments import Invalid, score_format, score_parser
from rolecall.prompt import persona, system_text
from rolecall.scoring.judges import Judge
from rolecall.storage.document import SessionDocument


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the judge answered: its scores and comment, and the call's usage."""

    scores: dict[str, float]
    comment: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def transcript_text(doc: SessionDocument) -> str:
    """The session as the judge reads it: one block per message, ``[m3] sender: text``."""
    return "\n\n".join(f"[{m.id}] {m.sender}: {m.content}" for m in doc.messages)


def instruction_for(judge: Judge, doc: SessionDocument) -> tuple[str, str]:
    lo, hi = judge.scale
    fmt = score_format(list(judge.names), judge.scale)
    title = doc.world.get("title") or doc.world.get("name", "")
    text = (
        f"As the judge, score the whole session '{title}' above ({len(doc.messages)} "
        f"messages) on {', '.join(judge.names)} ({lo:g} worst, {hi:g} best). "
        f"Reply with only a JSON object in this format and nothing else: {fmt}"
    )
    if judge.instruction:
        text = f"{judge.instruction} {text}"
    retry = f"Reply again with ONLY the JSON object, exactly in this format: {fmt}"
    return text, retry


def _request(judge: Judge, doc: SessionDocument, instruction: str) -> GenerationRequest:
    world, role = judge.world, judge.role
    transcript = transcript_text(doc)
    topic = str(doc.world.get("topic") or world.topic)
    settings = world.settings
    return GenerationRequest(
        model=judge.model,
        messages=(
            ChatMessage("system", system_text(world, role)),
            ChatMessage("user", f"The session {doc.session_id}:\n\n{transcript}\n\n{instruction}"),
        ),
        persona=persona(role),
        info=TurnInfo(
            turn=len(doc.messages) + 1,
            n=1,
            speaker=role.id,
            target=None,
            target_text=transcript,
            topic=topic,
            instruction=instruction,
            step_id="score",
            purpose="score",
        ),
        temperature=role.temperature,
        max_tokens=role.max_tokens,
        api_base=role.api_base or settings.api_base,
        api_key_env=role.api_key_env or settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        script=role.script_entries(),
        world_title=world.title or world.name,
        participants=tuple(world.role_ids),
        client=settings.client,
    )


async def score_session(judge: Judge, doc: SessionDocument, models: ModelRegistry) -> Verdict:
    """Ask ``judge`` for its verdict on ``doc``; RuntimeFailure when it gives none."""
    model = models.for_role(judge.role.id, judge.model)
    parse = score_parser(list(judge.names), judge.scale)
    instruction, retry = instruction_for(judge, doc)
    used = [0, 0]
    cost: float | None = 0.0
    problem = ""
    for attempt in (1, 2):
        prompt = instruction if attempt == 1 else f"{retry} (Your previous reply: {problem}.)"
        parts: list[str] = []
        async for item in model.stream(_request(judge, doc, prompt)):
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, Usage):
                used[0] += item.input_tokens
                used[1] += item.output_tokens
                cost = None if cost is None or item.cost_usd is None else cost + item.cost_usd
        try:
            parsed = parse("".join(parts))
        except (Invalid, ValueError, RecursionError) as exc:
            problem = str(exc)
            continue
        comment = parsed.verdict.get("comment")
        return Verdict(
            parsed.scores,
            comment if isinstance(comment, str) else "",
            used[0],
            used[1],
            cost,
        )
    raise RuntimeFailure(
        f"judge {judge.label} ({judge.model}) gave no valid verdict on session "
        f"{doc.session_id} after one retry ({problem}); nothing was stored"
    )
