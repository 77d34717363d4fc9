"""What a role's turn gets from its knowledge (knowledge.md): the passages for the
message it answers (else the step's instruction; the world's topic only when that finds
nothing), as a prompt block with ids ``[k1]``, ``[k2]``..., the ``system/knowledge``
event saying which, and the references the model is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rolecall.bus import KnowledgeEvent
from rolecall.knowledge.base import KnowledgeBase, Passage
from rolecall.llm.types import Reference
from rolecall.session.state import TranscriptMessage
from rolecall.world.models import Role, World

__all__ = ["Retrieved", "prompt_block", "query_for", "retrieve"]

QUERY_CHARS: Final = 2000  # a query is cut to this (a long message: its start)

INTRO: Final = (
    "Reference passages for this turn. Answer from them where they help, and cite each "
    "one you use by its id in brackets, e.g. [k1]."
)


@dataclass(frozen=True, slots=True)
class Retrieved:
    event: KnowledgeEvent
    block: str | None  # the prompt's block (None: nothing found)
    references: tuple[Reference, ...]


def query_for(world: World, target: TranscriptMessage | None, instruction: str | None) -> str:
    """What a turn searches for: the message answered (else the step's instruction), as
    ``rolecall knowledge search`` would be given it, so a turn cites what that search
    ranks first; the world's topic when there is neither. The topic is not added to a
    question: its words would outweigh the question's (a bicycle world's "winter" over
    "how often should I oil the chain?")."""
    asked = target.content if target is not None else (instruction or "")
    return (asked.strip() or world.topic.strip())[:QUERY_CHARS]


def prompt_block(passages: list[Passage]) -> str:
    lines = [INTRO]
    for i, p in enumerate(passages, start=1):
        title = f" ({p.heading})" if p.heading else ""
        lines.append(f"\n[k{i}] {p.source}{title}\n{p.text}")
    return "\n".join(lines)


def retrieve(
    kb: KnowledgeBase,
    world: World,
    role: Role,
    target: TranscriptMessage | None,
    instruction: str | None,
    message_id: str,
    collections: list[str] | None = None,
) -> Retrieved:
    """The turn's passages from ``role``'s collections (or ``collections``)."""
    query = query_for(world, target, instruction)
    searched = collections or role.knowledge
    passages = kb.search(searched, query, role.knowledge_top_k)
    topic = world.topic.strip()[:QUERY_CHARS]
    if not passages and topic and query != topic:  # nothing for the question: the topic
        query = topic
        passages = kb.search(searched, query, role.knowledge_top_k)
    event = KnowledgeEvent.trusted(
        role=role.id,
        query=query,
        passages=[
            {
                "id": f"k{i}",
                "path": p.path,
                "line_start": p.line_start,
                "line_end": p.line_end,
                "score": p.score,
                "collection": p.collection,
            }
            for i, p in enumerate(passages, start=1)
        ],
        message_id=message_id,
    )
    references = tuple(
        Reference(f"k{i}", p.text, p.source) for i, p in enumerate(passages, start=1)
    )
    return Retrieved(event, prompt_block(passages) if passages else None, references)
