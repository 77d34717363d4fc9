"""The built-in ``offline`` model: a deterministic simulator of a role-playing LLM.

No network, no key, no process randomness. Every choice is derived from a sha256 of the
turn's facts (persona id, turn numbers, topic, target and its text, instruction, step), so
the same world and history always produce the same words, under any ``PYTHONHASHSEED``.

The reply is assembled from short sentence templates (``offline_phrases.json``, shipped
with the package) in the voice of an *archetype*
(teacher, student, professor, official, lawyer, judge, moderator, the five study roles,
the pro/con debaters, and a generic voice built from the persona's description and
style). It names whom it answers, weaves in one to three salient words of the text it
answers and of the topic, loosely follows the step instruction, adapts to a few style
hints and respects an ``at most N words`` constraint.

Choosing the archetype: the persona id (whole, then its ``_``/``-`` separated parts), then
the persona name (whole, then its words), then the first keyword found in the description;
otherwise the generic voice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, TypeVar

import anyio

from rolecall.llm.offline_closing import closing, is_closing
from rolecall.llm.types import (
    GenerationRequest,
    StreamItem,
    TextDelta,
    ToolCall,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

__all__ = ["ARCHETYPES", "OfflineModel", "archetype_of", "compose"]

_T = TypeVar("_T")

MIN_WORDS: Final = 25
MAX_WORDS: Final = 70
MAX_SENTENCES: Final = 4
MAX_OUTPUT_TOKENS: Final = 400  # a reply never goes past this (the worst case counts on it)


@dataclass(frozen=True, slots=True)
class _Voice:
    """Sentence templates of one archetype.

    Slots: ``{who}`` (whom it answers), ``{a}``/``{b}`` (salient words of the answered
    text), ``{t}`` (a topic word), ``{me}`` (a short phrase for the persona itself),
    ``{next}`` (who gets the floor), ``{style}`` (the persona's free-text style).
    """

    open_named: tuple[str, ...]  # addresses {who}
    open_plain: tuple[str, ...]  # nobody in particular (or the human)
    bodies: tuple[str, ...]
    closers: tuple[str, ...]
    questions: tuple[str, ...]  # closers that end with "?"
    extras: tuple[str, ...]


def _phrases() -> dict[str, Any]:
    """The phrase data shipped beside this module (``offline_phrases.json``)."""
    text = resources.files("rolecall.llm").joinpath("offline_phrases.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


_DATA: Final = _phrases()
_VOICES: Final[dict[str, _Voice]] = {
    name: _Voice(**{part: tuple(texts) for part, texts in voice.items()})
    for name, voice in _DATA["voices"].items()
}

#: The archetypes the offline model knows, in no particular order.
ARCHETYPES: Final[tuple[str, ...]] = tuple(_VOICES)

# Generic voice only: a sentence built from a free-text style.
_STYLE_BODY: Final[str] = _DATA["style_body"]

# Keywords (whole ids/names or their parts, description words) naming an archetype.
_KEYWORDS: Final[dict[str, str]] = _DATA["keywords"]

# Style hints (checked in this order: "informal" contains "formal").
_STYLE_HINTS: Final[tuple[tuple[str, str], ...]] = tuple(
    (hint, kind) for hint, kind in _DATA["style_hints"]
)
_STYLE_EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    kind: tuple(texts) for kind, texts in _DATA["style_extras"].items()
}
_CONTRACTIONS: Final[tuple[tuple[str, str], ...]] = tuple(
    (long, short) for long, short in _DATA["contractions"]
)


def _word_pattern(words: str) -> re.Pattern[str]:
    first, rest = words[0], re.escape(words[1:])
    return re.compile(rf"\b[{first.lower()}{first.upper()}]{rest}\b")


_EXPAND: Final = tuple((_word_pattern(short), long) for long, short in _CONTRACTIONS)
_CONTRACT: Final = tuple((_word_pattern(long), short) for long, short in _CONTRACTIONS)

_STOPWORDS: Final = frozenset(_DATA["stopwords"])

_WORD: Final = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")
_LIMIT: Final = re.compile(
    r"\b(at most|no more than|not more than|max(?:imum)?(?: of)?|up to|under|fewer than|"
    r"less than)\s+(\d{1,5})\s+words?\b",
    re.IGNORECASE,
)
_ARTICLES: Final = ("a ", "an ", "the ", "someone ", "one ")
# "as an ecologist", "perspective of the analyst": how speakers describe themselves; not
# what they talk about, so not salient in the text answered.
_SELF_DESCRIPTION: Final = re.compile(
    r"\b(?:as|of|I'm|I am)\s+(?:a|an|the)\s+[^,.;:!?]*", re.IGNORECASE
)
_UNSAFE: Final = re.compile(r"[<>@\s]+")

# Every word the templates use: boilerplate of other offline speakers, never "salient".
_TEMPLATE_WORDS: Final = (
    frozenset(
        w.lower()
        for voice in _VOICES.values()
        for group in (
            voice.open_named,
            voice.open_plain,
            voice.bodies,
            voice.closers,
            voice.questions,
            voice.extras,
        )
        for template in group
        for w in _WORD.findall(template)
    )
    | frozenset(
        w.lower() for group in _STYLE_EXTRAS.values() for t in group for w in _WORD.findall(t)
    )
    | frozenset(("according", "see", "also"))
)  # the citation's own words (cite)


class _Picker:
    """Deterministic choices from a sha256 digest (re-hashed when used up)."""

    __slots__ = ("_digest", "_pos")

    def __init__(self, digest: bytes) -> None:
        self._digest = digest
        self._pos = 0

    def _next(self) -> int:
        if self._pos + 2 > len(self._digest):
            self._digest = hashlib.sha256(self._digest).digest()
            self._pos = 0
        value = int.from_bytes(self._digest[self._pos : self._pos + 2], "big")
        self._pos += 2
        return value

    def index(self, size: int) -> int:
        return self._next() % size

    def pick(self, options: Sequence[_T]) -> _T:
        return options[self.index(len(options))]

    def chance(self, percent: int) -> bool:
        return self._next() % 100 < percent


def _seed(request: GenerationRequest) -> bytes:
    info = request.info
    facts = [
        request.persona.id,
        info.turn,
        info.n,
        info.topic,
        info.target,
        info.target_text,
        info.instruction,
        info.step_id,
    ]
    return hashlib.sha256(json.dumps(facts, ensure_ascii=False).encode("utf-8")).digest()


def _tokens(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]


def archetype_of(persona_id: str, name: str = "", description: str = "") -> str:
    """The archetype voicing a persona: by id, then name, then description; else generic."""
    for label in (persona_id, name):
        whole = label.strip().lower()
        if whole in _KEYWORDS:
            return _KEYWORDS[whole]
        for token in _tokens(whole):
            if token in _KEYWORDS:
                return _KEYWORDS[token]
    for token in _tokens(description):
        if token in _KEYWORDS:
            return _KEYWORDS[token]
    return "generic"


def _display(role_id: str) -> str:
    """A readable form of a role id, like ``Role.display_name`` without a name."""
    return _clean(role_id.replace("_", " ").replace("-", " ")).title()


def _clean(text: str) -> str:
    """Free text made safe to interpolate: no ``<``, ``>`` or ``@``, single spaces."""
    return _UNSAFE.sub(" ", text).strip()


def _salient(text: str | None, exclude: frozenset[str]) -> list[str]:
    """Longer content words of ``text``, longest first (ties keep their order)."""
    if not text:
        return []
    seen: list[str] = []
    for word in _WORD.findall(text):
        low = word.lower().strip("'-")
        low = low.removesuffix("'s")
        if len(low) < 5 or low in _STOPWORDS or low in exclude or low in seen:
            continue
        seen.append(low)
    return sorted(seen, key=len, reverse=True)


def _self_phrase(request: GenerationRequest) -> str:
    """A short phrase for the persona itself: "an ecologist", "the analyst"."""
    persona = request.persona
    desc = _clean(persona.description)
    desc = re.split(r"[.;:!?,(]| who | that | which | with ", desc, maxsplit=1)[0].strip()
    if desc and desc.lower().startswith(_ARTICLES):
        words = desc.split()
        return " ".join([words[0].lower(), *words[1:8]])
    name = _clean(persona.name) or _display(persona.id)
    if not name:
        return "a participant"
    return f"the {name.lower()}" if len(name.split()) == 1 else name


def _style_of(style: str) -> str | None:
    low = style.lower()
    for hint, kind in _STYLE_HINTS:
        if hint in low:
            return kind
    return None


def _swap(text: str, pairs: Sequence[tuple[re.Pattern[str], str]]) -> str:
    """Replace whole words, keeping a capital first letter."""
    for pattern, replacement in pairs:
        lower, upper = replacement, _capitalise(replacement)
        text = pattern.sub(lambda m: upper if m.group(0)[0].isupper() else lower, text)  # noqa: B023
    return text


def _apply_style(text: str, kind: str | None) -> str:
    if kind == "formal":
        text = _swap(text, _EXPAND)
        text = text.replace("Okay ", "Very well, ").replace("Thanks,", "Thank you,")
        text = text.replace("Hmm, ", "")
    elif kind == "casual":
        text = _swap(text, _CONTRACT)
        text = text.replace("Thank you,", "Thanks,")
    elif kind == "strict":
        for soft in (" a little", " just", " actually", " really"):
            text = text.replace(soft, "")
    return text


def _word_limit(request: GenerationRequest) -> int | None:
    """The tightest ``at most N words`` of the constraints and the instruction."""
    texts = list(request.persona.constraints)
    if request.info.instruction:
        texts.append(request.info.instruction)
    limit: int | None = None
    for text in texts:
        for match in _LIMIT.finditer(text):
            n = int(match.group(2))
            if match.group(1).lower() in ("under", "fewer than", "less than"):
                n -= 1
            n = max(1, n)
            limit = n if limit is None else min(limit, n)
    return limit


def _count(sentences: Sequence[str]) -> int:
    return sum(len(s.split()) for s in sentences)


def _fit(sentences: list[str], limit: int, question: bool) -> str:
    """At most ``limit`` words: drop middle sentences, then keep the one sentence that
    matters (the question if one is wanted, else the opener), then cut words."""
    while _count(sentences) > limit and len(sentences) > 2:
        del sentences[-2]
    if _count(sentences) > limit and len(sentences) == 2:
        sentences = [sentences[-1] if question else sentences[0]]
    words = " ".join(sentences).split()
    if len(words) <= limit:
        return " ".join(words)
    words = words[:limit]
    last = words[-1].rstrip(",;:-—")
    if not last:
        last = "..."
    if question:
        last = last.rstrip(".!?") + "?"
    elif not last.endswith((".", "!", "?")):
        last += "."
    words[-1] = last
    return " ".join(words)


def _next_speaker(request: GenerationRequest, target: str | None) -> str:
    """Whom a moderator hands the floor to: another participant, else the target."""
    me = request.persona.id
    others = [p for p in request.participants if p not in (me, target, "human", "system")]
    if others:
        start = request.info.n % len(others)
        return _display(others[start])
    if target is not None:
        return _display(target)
    return "the next speaker"


def _capitalise(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:] if sentence else sentence


def respond_answer(request: GenerationRequest) -> str:
    """Whether to answer ``info.target_text`` (``purpose: respond``): ``YES`` when the
    message names the persona or shares a word (its first 5 letters) with the persona's
    name, description or system prompt; else ``NO``. Pure and deterministic."""
    persona = request.persona
    name = _clean(persona.name) or _display(persona.id)
    text = request.info.target_text or ""
    words = _tokens(text)
    own = {t for t in (*_tokens(persona.id), *_tokens(persona.name)) if len(t) >= 3}
    named = [t for t in words if t in own]
    if named:
        return f"YES. It names me ({named[0]}), so I should answer as {name}."
    profile = f"{persona.name} {persona.description} {persona.system_prompt}"
    mine = {w[:5]: w for w in _salient(profile, frozenset())}
    shared = [w for w in _salient(text, frozenset()) if w[:5] in mine]
    if shared:
        return f"YES. It is about {shared[0]}, which is part of my role as {name}."
    return f"NO. Nothing in it concerns my role as {name}; others are better placed."


_SPOKE = re.compile(r"^\[m\d+\] ([a-z][a-z0-9_-]*)\b", re.MULTILINE)
_CANDIDATE = re.compile(r"^- ([a-z][a-z0-9_-]*) \((.*?)\)(?:: (.*))?$", re.MULTILINE)


def select_answer(request: GenerationRequest) -> str:
    """The next speaker (``purpose: select``, selection.md), as a fair moderator: of the
    candidates the question lists (``- id (Name): description``), those who spoke least
    in the conversation it shows, and of them the one whose name and description share
    the most words (their first 5 letters) with the latest message; ties go round the
    list with the turn number. Pure and deterministic."""
    asked = request.messages[-1].content
    listed = {m.group(1): f"{m.group(2)} {m.group(3) or ''}" for m in _CANDIDATE.finditer(asked)}
    options = [rid for rid in request.participants if rid in listed] or list(listed)
    if not options:
        return "nobody"
    said = {w[:5] for w in _salient(request.info.target_text, frozenset())}
    spoke = [m.group(1) for m in _SPOKE.finditer(asked)]
    scores = [
        (
            -spoke.count(rid),
            len(said & {w[:5] for w in _salient(f"{rid} {listed[rid]}", frozenset())}),
            -((i - request.info.turn) % len(options)),
            rid,
        )
        for i, rid in enumerate(options)
    ]
    _, best, _, chosen = max(scores)
    if best:
        return f"{chosen}: the latest message concerns their field."
    return f"{chosen}: nobody is clearly closer, so the first candidate."


_FOLDED = re.compile(r"^\[(m\d+)\] ([^:]+): (.*)$")
_BEGAN = re.compile(r"^It began with: (.*?)$", re.MULTILINE)
_RANGE = re.compile(r"^Messages (m\d+) to (m\d+) ")


def summary_answer(request: GenerationRequest) -> str:
    """A running summary (``purpose: summary``, rolecall.knowledge.summary): what the
    conversation began with (kept from the summary so far), the range it covers, the
    salient words of each speaker's folded messages, and the latest folded message.
    Pure, deterministic and bounded (about 120 words whatever it folds)."""
    asked = request.messages[-1].content
    folded = [m for line in asked.splitlines() if (m := _FOLDED.match(line))]
    began = _BEGAN.search(asked.split("Messages to fold into it:")[0])
    first = began.group(1) if began else (_words(folded[0].group(3), 20) if folded else "")
    span = _RANGE.match(asked)
    lines = [f"It began with: {first}"]
    if span:
        lines.append(f"Covered: {span.group(1)} to {span.group(2)}.")
    by_sender: dict[str, list[str]] = {}
    for found in folded:
        by_sender.setdefault(found.group(2), []).append(found.group(3))
    for sender, texts in list(by_sender.items())[:6]:
        words = _salient(" ".join(texts), frozenset(_tokens(sender)))[:5]
        said = f"{len(texts)} message{'' if len(texts) == 1 else 's'}"
        lines.append(f"{sender} ({said}) spoke of {', '.join(words) or 'little'}.")
    if folded:
        last = folded[-1]
        lines.append(
            f"Latest folded: [{last.group(1)}] {last.group(2)}: {_words(last.group(3), 15)}"
        )
    return "\n".join(lines)


def _words(text: str, most: int) -> str:
    words = text.split()
    return " ".join(words[:most]) + (" ..." if len(words) > most else "")


def compose(request: GenerationRequest) -> str:
    """The full reply of the offline model to ``request`` (pure and deterministic)."""
    return composed(request)[0]


def composed(request: GenerationRequest) -> tuple[str, str]:
    """:func:`compose`'s reply and its finish reason: ``length`` when the role's
    ``max_tokens`` cut it (as a provider's reply is cut), else ``stop``."""
    persona = request.persona
    info = request.info
    if info.purpose == "respond":
        return respond_answer(request), "stop"
    if info.purpose == "summary":
        return summary_answer(request), "stop"
    if info.purpose == "score":
        return score_answer(request), "stop"
    if info.purpose == "select":
        return select_answer(request), "stop"
    if request.output_schema is not None:  # a role's `output:`: data of its schema
        from rolecall.llm.shape import example

        said = _salient(f"{info.target_text or ''} {info.topic}", frozenset())
        data = example(request.output_schema, said or [persona.id])
        return json.dumps(data, ensure_ascii=False), "stop"
    pick = _Picker(_seed(request))
    archetype = archetype_of(persona.id, persona.name, persona.description)
    voice = _VOICES[archetype]

    target = info.target.lstrip("@") if info.target is not None else None
    if target is not None and target.lower() in (persona.id.lower(), "system", ""):
        target = None
    named = target is not None and target.lower() != "human"
    if named and info.target_name and target == info.target:
        who = info.target_name
    else:
        who = _display(target) if named and target is not None else ""

    exclude_parts = {persona.id, persona.name, info.speaker, target or "", *request.participants}
    exclude = frozenset(t for part in exclude_parts for t in _tokens(part))
    answered = _SELF_DESCRIPTION.sub(" ", info.target_text or "")
    from_target = _salient(answered, exclude | _TEMPLATE_WORDS)
    from_topic = _salient(info.topic, exclude)
    pool = from_target or from_topic
    a = pick.pick(pool[:2]) if pool else "this point"
    rest = [w for w in (*from_target, *from_topic) if w != a]
    b = rest[0] if rest else "the evidence"
    topic_left = [w for w in from_topic if w not in (a, b)]
    t = topic_left[0] if topic_left else (from_topic[0] if from_topic else "the topic")

    style = _clean(persona.style)
    kind = _style_of(style)
    slots = {
        "who": who,
        "a": a,
        "b": b,
        "t": t,
        "me": _self_phrase(request),
        "next": _next_speaker(request, target),
        "style": style.lower(),
        "name": _clean(persona.name) or _display(persona.id),
    }

    if info.instruction and is_closing(info.instruction):
        closed = closing(info.instruction, a, b, t)
        return (f"{closed} {cite(request)}" if request.references else closed), "stop"
    instruction = (info.instruction or "").lower()
    wants_question = bool(
        re.search(r"\b(ask|asks|asking|pose|quiz)\b", instruction)
        or (
            "question" in instruction
            and not re.search(r"\b(answer|respond|reply|address)\w*\b[^.]*\bquestion", instruction)
        )
    )
    wants_brief = bool(re.search(r"\b(brief|briefly|short|concise|one sentence)\b", instruction))
    wants_intro = bool(re.search(r"\b(introduce|greet|welcome)\b", instruction))
    wants_summary = "summar" in instruction
    wants_example = "example" in instruction
    wants_agree = bool(re.search(r"(?<!dis)\bagree", instruction))

    if wants_intro:
        own_phrase = persona.description.strip().lower().startswith(_ARTICLES)
        opener = (
            "Hello everyone, I'm {name}, {me}, and I'm here to talk about {t}."
            if own_phrase
            else "Hello everyone, I'm {name}, and I'm here to talk about {t}."
        )
    elif wants_agree:
        opener = "I agree with {who} on {a}." if who else "I agree on {a}."
    else:
        opener = pick.pick(voice.open_named if who else voice.open_plain)
    body = pick.pick(voice.bodies)
    free_style = archetype == "generic" and kind is None and 0 < len(style.split()) <= 4
    if free_style and pick.chance(50):
        body = _STYLE_BODY
    closer = pick.pick(voice.questions if wants_question else voice.closers)

    middle = [body]
    if wants_summary:
        middle.append("In short, {a} and {b} are the points to keep.")
    if wants_example:
        middle.append("For example, think of {b} in an everyday setting.")
    if kind in _STYLE_EXTRAS and pick.chance(60):
        middle.append(pick.pick(_STYLE_EXTRAS[kind]))
    elif pick.chance(40):
        middle.append(pick.pick(voice.extras))
    if wants_brief:
        middle = []

    sentences = [opener, *middle[: MAX_SENTENCES - 2]]
    if wants_question or not wants_intro:
        sentences.append(closer)
    filled = [_capitalise(_apply_style(s.format(**slots), kind)) for s in sentences]

    # Pad short replies (short keywords, short templates) up to the usual length.
    spare = [e for e in (*voice.extras, *voice.bodies) if e not in sentences]
    while spare and not wants_brief and _count(filled) < MIN_WORDS and len(filled) < MAX_SENTENCES:
        extra = spare.pop(pick.index(len(spare)))
        filled.insert(-1, _capitalise(_apply_style(extra.format(**slots), kind)))
    while _count(filled) > MAX_WORDS and len(filled) > 2:
        del filled[-2]

    if request.references:  # answer from the first passage, and say so (knowledge.md)
        filled.insert(1, cite(request))

    limit = _word_limit(request)
    text = _fit(filled, limit if limit is not None else MAX_WORDS * 2, wants_question)
    # A real model stops at max_tokens: cut words until the estimate fits (never past
    # MAX_OUTPUT_TOKENS, a bound `worlds check` relies on).
    most = min(request.max_tokens or MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS)
    words = len(text.split())
    finish = "stop"
    while words > 1 and estimate_tokens(text) > most:
        words -= 1
        text = _fit([text], words, wants_question)
        finish = "length"
    if len(text) > most * 4:
        text, finish = text[: most * 4], "length"

    text = re.sub(r"<\s*world\s*>\s*pass\s*<\s*/\s*world\s*>", "", text, flags=re.IGNORECASE)
    return " ".join(text.lstrip("@ ").split()), finish


def tool_arguments(schema: dict[str, Any], request: GenerationRequest) -> dict[str, Any]:
    """Arguments for a tool from its JSON schema, deterministically (docs/tools.md): each
    required property its default, else its enum's first value, else by type: a string
    the topic (``UTC`` for a ``*timezone`` one), a number the role's turn, true, [], {}."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name in schema.get("required") or ():
        prop = props.get(name) or {}
        if "default" in prop:
            out[name] = prop["default"]
        elif prop.get("enum"):
            out[name] = prop["enum"][0]
        else:
            kind = prop.get("type", "string")
            kind = kind[0] if isinstance(kind, list) and kind else kind
            out[name] = {
                "integer": request.info.n,
                "number": request.info.n,
                "boolean": True,
                "array": [],
                "object": {},
            }.get(
                kind,
                "UTC" if name.lower().endswith("timezone") else request.info.topic or "notes",
            )
    return out


def offline_call(request: GenerationRequest) -> ToolCall | None:
    """The tool call the offline model makes now: on a turn offered tools, before any
    result, the one at the role's turn number among them (turn 1 the first listed)."""
    if not request.tools or (request.messages and request.messages[-1].role == "tool"):
        return None
    tool = request.tools[(request.info.n - 1) % len(request.tools)]
    arguments = tool_arguments(tool.parameters, request)
    return ToolCall(f"call_{request.info.turn}", tool.name, json.dumps(arguments))


def with_result(text: str, request: GenerationRequest) -> str:
    """``text`` and, after a tool result, one sentence quoting its first line."""
    messages = request.messages
    if not messages or messages[-1].role != "tool":
        return text
    call_id = messages[-1].tool_call_id
    name = next(
        (c.name for m in messages for c in m.tool_calls if c.call_id == call_id), "the tool"
    )
    full = next((t.full_name for t in request.tools if t.name == name), name)
    first = next((ln.strip() for ln in messages[-1].content.splitlines() if ln.strip()), "")
    first = first if len(first) <= 100 else first[:99] + "…"
    return f"{text} I checked {full or name}: {first}".strip()


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
CITED_WORDS: Final = 30  # a cited sentence is cut to this many words


def cite(request: GenerationRequest) -> str:
    """A sentence from the best passage (``[k1]``) answering the text being answered:
    the passage's sentence sharing most words with it (the first on a tie), with its
    id; ``[k2]`` named too when there is one."""
    first = request.references[0]
    asked = f"{request.info.target_text or ''} {request.info.topic}"
    wanted = {t for t in _tokens(asked) if len(t) > 3}
    best, best_score = "", -1
    blocks: list[list[str]] = [[]]  # paragraphs; a heading line is one of its own
    for line in first.text.splitlines():
        heading = line.lstrip().startswith("#")
        if heading or not line.strip():
            blocks.append([])
        blocks[-1].append(line)
        if heading:
            blocks.append([])
    sentences = [s for b in blocks for s in _SENTENCE.split(" ".join(" ".join(b).split()))]
    for raw in sentences:
        if raw.lstrip().startswith("#"):  # a heading names the passage; it says nothing
            continue
        sentence = raw.strip().lstrip("*->| ").strip()
        if len(sentence.split()) < 4:
            continue
        score = len(wanted & set(_tokens(sentence)))
        if score > best_score:
            best, best_score = sentence, score
    if not best:
        best = " ".join(first.text.split())
    words = best.split()
    if len(words) > CITED_WORDS:
        words = [*words[:CITED_WORDS], "..."]
    text = " ".join(words).rstrip(".!?;:,")
    also = f" (see also [{request.references[1].id}])" if len(request.references) > 1 else ""
    return f"According to [{first.id}]: {text}{also}."


_SCORED_HEADER: Final = re.compile(r"^\[[^\]\s]+\] [^:\n]+: ", re.MULTILINE)
_SCORE_FIELD: Final = re.compile(
    r'"([A-Za-z][A-Za-z0-9_-]*)": <number (-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)>'
)


def score_answer(request: GenerationRequest) -> str:
    """A judge's verdict on a stored session (``purpose: score``, ``rolecall score``):
    the JSON object the instruction asks for (``"name": <number LO-HI>`` fields).

    A stand-in for reading, not a reading: each score is half the variety of the words
    of the scored transcript (distinct words over words) and half a sha256 of the
    transcript and the score's name, placed in the scale and rounded to one decimal. The
    same transcript and criteria always give the same verdict. The transcript is read as
    ``rolecall.scoring`` writes it: ``[m3] sender: text`` blocks."""
    text = request.info.target_text or ""
    said = _SCORED_HEADER.sub("", text)  # the messages' words, not their ids and senders
    words = [w.lower() for w in _WORD.findall(said)]
    variety = len(set(words)) / len(words) if words else 0.0
    scores: dict[str, float] = {}
    for name, low, high in _SCORE_FIELD.findall(request.info.instruction or ""):
        lo, hi = float(low), float(high)
        digest = hashlib.sha256(f"{name}\n{text}".encode()).digest()
        jitter = int.from_bytes(digest[:2], "big") / 65535
        fraction = min(1.0, max(0.0, 0.5 * variety + 0.5 * jitter))
        scores[name] = round(lo + (hi - lo) * fraction, 1)
    salient = set(_salient(said, _TEMPLATE_WORDS))
    tally = Counter(w for w in words if w in salient)
    counted = sorted((-n, w) for w, n in tally.items())  # the most said, then a-z
    about = f", most often on {counted[0][1]}" if counted else ""
    comment = f"{len(words)} words from the session{about}; scored offline, not read."
    return json.dumps({"scores": scores, "comment": comment}, ensure_ascii=False)


class OfflineModel:
    """The ``offline`` ChatModel: streams :func:`compose` word by word, then ``Usage``."""

    name = "offline"
    repeatable = True  # the same reply again, at no cost (see ChatModel)

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def max_output_tokens(self, model: str) -> int:
        """The most tokens a reply may have (by the estimate), for ``worlds check``."""
        return MAX_OUTPUT_TOKENS

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        call = offline_call(request)
        if call is not None:  # tools.md: a turn offered tools calls one first
            yield call
            yield Usage(
                prompt_tokens(request.messages),
                estimate_tokens(call.arguments),
                0.0,
                finish_reason="tool_calls",
            )
            return
        text, finish = composed(request)
        text = with_result(text, request)
        words = text.split(" ")
        last = len(words) - 1
        for i, word in enumerate(words):
            if i > 0 and self.delay > 0:
                await anyio.sleep(self.delay)
            yield TextDelta(word if i == last else word + " ")
        yield Usage(
            input_tokens=prompt_tokens(request.messages),
            output_tokens=estimate_tokens(text),
            cost_usd=0.0,  # runs locally: free
            finish_reason=finish,
        )
