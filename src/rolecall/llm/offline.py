"""The built-in ``offline`` model: a deterministic simulator of a role-playing LLM.

No network, no key, no process randomness. Every choice is derived from a sha256 of the
turn's facts (persona id, turn numbers, topic, target and its text, instruction, step), so
the same world and history always produce the same words, under any ``PYTHONHASHSEED``.

The reply is assembled from short sentence templates in the voice of an *archetype*
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
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

import anyio

from rolecall.llm.types import (
    GenerationRequest,
    StreamItem,
    TextDelta,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

__all__ = ["ARCHETYPES", "OfflineModel", "archetype_of", "compose"]

_T = TypeVar("_T")

MIN_WORDS: Final = 25
MAX_WORDS: Final = 70
MAX_SENTENCES: Final = 4


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


_VOICES: Final[dict[str, _Voice]] = {
    "teacher": _Voice(
        open_named=(
            "Good question, {who}: {a} is exactly where to start.",
            "{who}, let's slow down and look at {a} together.",
            "Thank you, {who}, that gets right to the heart of {a}.",
        ),
        open_plain=(
            "Let's start with {a}, because everything else builds on it.",
            "Good question; {a} is the right place to begin.",
        ),
        bodies=(
            "Think of {a} like a kitchen: ingredients come in, energy does the work, "
            "and something new comes out.",
            "Picture {a} as a factory line where each station hands its work to the next, "
            "and {b} is one of those stations.",
            "An analogy helps here: {a} works like a savings account, storing up now what "
            "gets spent later on {b}.",
            "Imagine {t} as a recipe; {a} is a step you can't skip, and {b} is what it produces.",
        ),
        closers=(
            "Can you tell me in your own words how {b} fits in?",
            "Does that picture make sense before we go on?",
            "Try explaining {b} to a friend in one sentence; that is the best test of "
            "understanding.",
            "So, which part of that still feels fuzzy to you?",
        ),
        questions=(
            "Can you tell me in your own words how {b} fits in?",
            "What would you predict happens to {b} if we took {a} away?",
        ),
        extras=(
            "The key idea is that {a} and {b} are connected, not separate facts to memorise.",
            "We will come back to {t} once this part feels solid.",
        ),
    ),
    "student": _Voice(
        open_named=(
            "{who}, wait, I think I follow the part about {a}.",
            "Okay {who}, that helps, especially the bit about {a}.",
            "Thanks, {who}, but {a} still puzzles me a little.",
        ),
        open_plain=(
            "Hmm, I keep thinking about {a}.",
            "So {a} is the key here, if I got that right.",
        ),
        bodies=(
            "If {a} depends on {b}, then it seems like everything hinges on that one step.",
            "I tried to picture {a} on my own, and I got stuck on where {b} comes from.",
            "It makes sense for {t} in general, but I'm not sure it holds in every case.",
        ),
        closers=(
            "But what happens to {b} when there isn't enough {a}?",
            "So why doesn't {a} just happen all the time, then?",
            "Is {b} the cause of {a}, or only a side effect?",
            "How would we actually test that if we had a lab?",
        ),
        questions=(
            "But what happens to {b} when there isn't enough {a}?",
            "Is {b} the cause of {a}, or only a side effect?",
        ),
        extras=(
            "I wrote {a} down, but I want to understand it, not just remember it.",
            "My notes on {t} only say it happens, not why.",
        ),
    ),
    "professor": _Voice(
        open_named=(
            "Thank you, {who}; let me be precise about {a}.",
            "{who}, that is a reasonable first approximation of {a}, but it needs refining.",
            "Let me build on that, {who}, with some care about {a}.",
        ),
        open_plain=(
            "Precision matters with {a}.",
            "Let us be careful with {a}.",
        ),
        bodies=(
            "The governing principle is conservation: whatever {a} produces must be paid "
            "for in energy or matter elsewhere.",
            "The literature is consistent that {a} is constrained by {b}, not the reverse.",
            "A useful principle is to separate mechanism from outcome: {a} is the mechanism, "
            "{b} the outcome we measure.",
        ),
        closers=(
            "The nuance is that under other conditions {b} can dominate, so the simple "
            "story holds only approximately.",
            "I would add one caveat: the textbook account of {t} is a model, and models "
            "leave things out.",
            "So the claim is true in the typical case, with exceptions at the margins worth "
            "studying.",
        ),
        questions=(
            "Which assumption about {b} would you test first?",
            "What evidence would change your mind about {a}?",
        ),
        extras=(
            "Note the difference between correlation and mechanism here.",
            "Careful measurement of {b} is what settled the question historically.",
        ),
    ),
    "official": _Voice(
        open_named=(
            "Thank you, {who}; your request regarding {a} has been noted.",
            "{who}, I can confirm that we have received your submission on {a}.",
            "Understood, {who}; let me explain how {a} is handled under current rules.",
        ),
        open_plain=(
            "For the record, the matter of {a} is now under review.",
            "Regarding {a}, the procedure is clear.",
        ),
        bodies=(
            "Under the applicable rules, any change touching {a} requires written approval "
            "before it proceeds.",
            "The regulations require that {b} be documented and reviewed by the responsible "
            "office.",
            "Section 4 of the guidelines sets out who may authorise {a} and within what time "
            "frame.",
        ),
        closers=(
            "As a next step, please submit the completed form; a decision follows within ten "
            "working days.",
            "The next step is a formal review of {b}, and I will notify you once approval is "
            "granted or refused.",
            "Until approval is issued, no action on {a} may be taken.",
        ),
        questions=(
            "Could you confirm which office first received your application on {a}?",
            "Do you have the supporting documents for {b} on file?",
        ),
        extras=(
            "All correspondence on {t} is kept on file for audit purposes.",
            "Exceptions to this procedure require sign-off from the department head.",
        ),
    ),
    "lawyer": _Voice(
        open_named=(
            "With respect, {who}, the position on {a} does not hold up.",
            "{who}, let me put the argument on {a} plainly.",
            "I have to press you on {a}, {who}.",
        ),
        open_plain=(
            "The argument on {a} turns on a single question of responsibility.",
            "Consider the legal exposure around {a}.",
        ),
        bodies=(
            "Precedent is clear that whoever controls {a} bears the liability when {b} goes wrong.",
            "Courts have repeatedly held that a duty of care attaches to {a}, and {b} does "
            "not excuse a breach.",
            "The risk is concrete: if {b} fails, the record will show that {a} was foreseeable.",
        ),
        closers=(
            "My client's position is that {b} was never adequately disclosed, and that is "
            "decisive.",
            "At minimum, the risk around {a} must be documented before anyone signs.",
            "On these facts liability follows, and I am prepared to argue it.",
        ),
        questions=(
            "Can you point to any precedent that says otherwise?",
            "Who, then, bears the risk if {b} fails?",
        ),
        extras=(
            "The burden of proof on {t} has not shifted.",
            "Any settlement would have to account for that exposure.",
        ),
    ),
    "judge": _Voice(
        open_named=(
            "I have heard you, {who}, on {a}.",
            "Thank you, {who}; the court has considered the submissions on {a}.",
        ),
        open_plain=(
            "Both sides have been heard on {a}.",
            "The question before me concerns {a}.",
        ),
        bodies=(
            "On one hand, the case for {a} is supported by the record; on the other, the "
            "concerns about {b} are not trivial.",
            "Weighing the arguments, the points on {b} carry more weight than the objections "
            "raised against them.",
            "Each side has overstated its case, but the evidence on {a} is stronger than the "
            "evidence against it.",
        ),
        closers=(
            "I therefore rule that the claim regarding {a} succeeds in part, and the "
            "remainder is dismissed.",
            "My ruling is that {b} must be addressed before {a} can proceed.",
            "The objection is overruled, and we proceed on {t}.",
        ),
        questions=(
            "Can either side show me where the record addresses {b}?",
            "Is there anything further on {a} before I rule?",
        ),
        extras=(
            "Neither side has addressed the strongest objection to its own view.",
            "The standard to apply here is the balance of probabilities.",
        ),
    ),
    "moderator": _Voice(
        open_named=(
            "Thank you, {who}, for raising {a}.",
            "Let me pause there, {who}, because {a} is worth holding onto.",
        ),
        open_plain=(
            "Let's take stock of where we are on {t}.",
            "A quick summary before we continue.",
        ),
        bodies=(
            "So far we have heard an emphasis on {a}, with open questions about {b}.",
            "To summarise, the discussion has centred on {a}, and there is some common "
            "ground on {b}.",
            "The main thread so far is {a}, while {b} remains contested.",
        ),
        closers=(
            "{next}, the floor is yours: how do you respond on {b}?",
            "I'd like to hand the floor to {next} now.",
            "{next}, please go ahead.",
        ),
        questions=(
            "{next}, what is your view on {b}?",
            "{next}, where do you stand on {a}?",
        ),
        extras=(
            "Let's keep contributions short so everyone gets a turn.",
            "We still have time for one more round on {t}.",
        ),
    ),
    "explainer": _Voice(
        open_named=(
            "{who}, here is the core idea behind {a}.",
            "Building on what {who} said, let me explain {a} step by step.",
        ),
        open_plain=(
            "Here is the core idea of this part: {a}.",
            "Let me explain {a} step by step.",
        ),
        bodies=(
            "In short, {a} describes how {b} comes about, and the rest of the section adds detail.",
            "First comes {a}; then {b} follows from it; together they explain {t}.",
            "The text introduces {a} as the central concept and uses {b} to support it.",
        ),
        closers=(
            "If you remember one thing, remember how {a} leads to {b}.",
            "That is the backbone; the examples hang off it.",
        ),
        questions=(
            "Which step of that chain would you like unpacked further?",
            "Does the link between {a} and {b} feel clear now?",
        ),
        extras=(
            "The definitions matter less than the chain of cause and effect.",
            "Each later section refines this picture of {t} rather than replacing it.",
        ),
    ),
    "challenger": _Voice(
        open_named=(
            "{who}, I'm not convinced the account of {a} is complete.",
            "Let me push back on that, {who}: is {a} really the whole story?",
        ),
        open_plain=(
            "Let me challenge the claim about {a}.",
            "I want to test the claim about {a} before we accept it.",
        ),
        bodies=(
            "The section assumes {b} is stable, but nothing in it shows that.",
            "A counterexample comes to mind: cases where {a} happens without {b} at all.",
            "If {a} were true in general, we should see its effects on {t} everywhere, and we "
            "do not.",
        ),
        closers=(
            "Until the evidence is clearer, I'd treat the claim as a hypothesis, not a fact.",
            "The argument needs a stronger link between {a} and {b}.",
        ),
        questions=(
            "What evidence would actually distinguish these explanations?",
            "What would it take to show {a} is wrong?",
        ),
        extras=(
            "Strong claims need strong support, and this one leans on a single source.",
            "The edge cases are where a theory of {t} earns its keep.",
        ),
    ),
    "summarizer": _Voice(
        open_named=(
            "Thanks, {who}; let me pull this together.",
            "Let me pull together what {who} said about {a}.",
        ),
        open_plain=(
            "Here is a short summary of the part on {a}.",
            "Let me pull the main points together.",
        ),
        bodies=(
            "The key points are these: {a} is the central idea, {b} is how it shows up, and "
            "{t} is why it matters.",
            "In brief, the discussion moves from {a} to {b} and ends with what that means for {t}.",
        ),
        closers=(
            "Everything else is detail that supports these points.",
            "That is the takeaway worth keeping.",
        ),
        questions=(
            "Did I leave out anything essential?",
            "Is there a point about {b} this summary should add?",
        ),
        extras=(
            "One open question remains about {b}.",
            "The examples so far all support the same conclusion.",
        ),
    ),
    "example_generator": _Voice(
        open_named=(
            "{who}, a concrete example might help with {a}.",
            "Here is an example for what {who} described about {a}.",
        ),
        open_plain=(
            "A concrete example makes {a} easier to see.",
            "Let me ground {a} in an example.",
        ),
        bodies=(
            "Imagine a garden on a bright morning: {a} is happening in every leaf, and {b} "
            "is the visible result.",
            "Take a simple case: someone tracking {b} over a week would see {a} change with "
            "the conditions.",
            "Consider a bakery, where {a} is the oven and {b} is the bread that comes out.",
        ),
        closers=(
            "Notice how the example keeps the mechanism and drops everything else.",
            "You can build a similar example around {t} from your own experience.",
        ),
        questions=(
            "Can you think of a counterexample?",
            "Would a second example that works differently help?",
        ),
        extras=(
            "A second case would be a cloudy day, where the same process slows down.",
            "Examples like this make the abstract version of {t} easier to recall.",
        ),
    ),
    "misconception_spotter": _Voice(
        open_named=(
            "{who}, there is a common misconception hiding in {a}.",
            "Careful, {who}: people often get {a} backwards.",
        ),
        open_plain=(
            "A common misconception about {a} is worth flagging.",
            "People often get {a} backwards.",
        ),
        bodies=(
            "Many people assume {a} simply causes {b}, but the relationship runs both ways.",
            "The mistake is to treat {a} as a single event, when it is really a process with "
            "several stages.",
            "It is tempting to think {b} comes from nowhere; in fact it is built from what "
            "{a} provides.",
        ),
        closers=(
            "The correct picture is subtler, and the material supports it.",
            "Keeping that distinction clear avoids most errors on {t}.",
        ),
        questions=(
            "Did you hold that misconception before reading this?",
            "Which version did your textbook teach?",
        ),
        extras=(
            "The error is common because the everyday meaning of the words misleads.",
            "Even good summaries of {t} sometimes repeat it.",
        ),
    ),
    "pro": _Voice(
        open_named=(
            "{who}, I see it differently: {a} is an opportunity, not a threat.",
            "Let me answer that directly, {who}: the case for {a} is stronger than it looks.",
            "{who}, the worries about {a} are solvable, and they should not stop us.",
        ),
        open_plain=(
            "The case for {a} is strong.",
            "Let me make the positive case for {a}.",
        ),
        bodies=(
            "Speaking as {me}, I have seen {a} deliver real gains, and {b} is where the "
            "benefits show first.",
            "The evidence points one way: where {a} has been tried, outcomes for {b} improved.",
            "Every major advance in {t} met the same objections, and the benefits outweighed "
            "the costs.",
        ),
        closers=(
            "We should move forward on {a}, with safeguards where {b} needs them.",
            "The cost of doing nothing is higher than the risk of acting.",
            "That is why I support this, and I stand by it.",
        ),
        questions=(
            "What would you accept as evidence that {a} works?",
            "Isn't the bigger risk standing still on {t}?",
        ),
        extras=(
            "Progress on {t} has always required someone willing to go first.",
            "The upside compounds over time, while the risks can be managed.",
        ),
    ),
    "con": _Voice(
        open_named=(
            "{who}, I'm not persuaded; the case for {a} skips the hard part.",
            "With respect, {who}, {a} sounds better in theory than in practice.",
            "{who}, optimism about {a} is not a plan.",
        ),
        open_plain=(
            "I remain skeptical about {a}.",
            "Let me raise the problems with {a}.",
        ),
        bodies=(
            "Speaking as {me}, I have seen {a} fail when {b} was underestimated.",
            "The costs of {b} are rarely counted up front, and they tend to arrive later and "
            "larger.",
            "Before we commit to {a}, we need evidence that holds outside the best cases.",
        ),
        closers=(
            "Until those risks are addressed, the burden of proof stays with you.",
            "I would rather be careful now than sorry later about {b}.",
            "So my answer is no, not yet.",
        ),
        questions=(
            "Who pays when {b} goes wrong?",
            "What happens to {b} if your assumptions fail?",
        ),
        extras=(
            "Unintended consequences for {t} are the rule, not the exception.",
            "A pilot with clear exit criteria would be the least we should ask for.",
        ),
    ),
    "generic": _Voice(
        open_named=(
            "{who}, speaking as {me}, I want to respond on {a}.",
            "Thanks, {who}; as {me}, I would focus on {a}.",
            "{who}, from the perspective of {me}, {a} deserves a closer look.",
        ),
        open_plain=(
            "Speaking as {me}, I would focus on {a}.",
            "From the perspective of {me}, {a} deserves a closer look.",
        ),
        bodies=(
            "In my work, {a} is rarely isolated; it usually connects to {b} in ways that matter.",
            "My instinct is to look at how {a} and {b} interact before drawing conclusions "
            "about {t}.",
            "What I'd add is the practical side: {b} shapes how {a} plays out.",
        ),
        closers=(
            "That is the angle I can contribute here.",
            "I'd want to test that against real cases before settling on it.",
        ),
        questions=(
            "How does {b} look from where you stand?",
            "What have you seen of {a} in practice?",
        ),
        extras=(
            "My field has learned this the hard way more than once.",
            "The details of {t} matter more than the headline.",
        ),
    ),
}

#: The archetypes the offline model knows, in no particular order.
ARCHETYPES: Final[tuple[str, ...]] = tuple(_VOICES)

# Generic voice only: a sentence built from a free-text style.
_STYLE_BODY: Final = "My approach here is {style}, so I will keep the focus on {b}."

# Keywords (whole ids/names or their parts, description words) naming an archetype.
_KEYWORDS: Final[dict[str, str]] = {
    "teacher": "teacher",
    "tutor": "teacher",
    "instructor": "teacher",
    "educator": "teacher",
    "mentor": "teacher",
    "coach": "teacher",
    "student": "student",
    "pupil": "student",
    "learner": "student",
    "freshman": "student",
    "professor": "professor",
    "prof": "professor",
    "lecturer": "professor",
    "scholar": "professor",
    "academic": "professor",
    "official": "official",
    "clerk": "official",
    "officer": "official",
    "bureaucrat": "official",
    "administrator": "official",
    "registrar": "official",
    "lawyer": "lawyer",
    "attorney": "lawyer",
    "counsel": "lawyer",
    "solicitor": "lawyer",
    "barrister": "lawyer",
    "prosecutor": "lawyer",
    "judge": "judge",
    "magistrate": "judge",
    "arbiter": "judge",
    "adjudicator": "judge",
    "referee": "judge",
    "moderator": "moderator",
    "facilitator": "moderator",
    "host": "moderator",
    "chair": "moderator",
    "chairperson": "moderator",
    "mediator": "moderator",
    "explainer": "explainer",
    "challenger": "challenger",
    "tester": "challenger",
    "summarizer": "summarizer",
    "summariser": "summarizer",
    "synthesizer": "summarizer",
    "synthesiser": "summarizer",
    "example_generator": "example_generator",
    "example-generator": "example_generator",
    "misconception_spotter": "misconception_spotter",
    "misconception-spotter": "misconception_spotter",
    "misconception": "misconception_spotter",
    "misconceptions": "misconception_spotter",
    "pro": "pro",
    "advocate": "pro",
    "proponent": "pro",
    "optimist": "pro",
    "supporter": "pro",
    "con": "con",
    "critic": "con",
    "skeptic": "con",
    "sceptic": "con",
    "opponent": "con",
    "pessimist": "con",
}

# Style hints (checked in this order: "informal" contains "formal").
_STYLE_HINTS: Final[tuple[tuple[str, str], ...]] = (
    ("informal", "casual"),
    ("casual", "casual"),
    ("relaxed", "casual"),
    ("humor", "humorous"),
    ("humour", "humorous"),
    ("funny", "humorous"),
    ("playful", "humorous"),
    ("witty", "humorous"),
    ("strict", "strict"),
    ("stern", "strict"),
    ("rigorous", "strict"),
    ("formal", "formal"),
)

_STYLE_EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "humorous": (
        "And yes, {a} is more exciting than it sounds, I promise.",
        "If {a} had a fan club, I would be its treasurer.",
    ),
    "strict": (
        "Details matter here, and vague answers will not do.",
        "I expect precision on this point.",
    ),
    "casual": (
        "No pressure, though.",
        "Honestly, it's simpler than it looks.",
    ),
}

_CONTRACTIONS: Final[tuple[tuple[str, str], ...]] = (
    ("I am", "I'm"),
    ("I would", "I'd"),
    ("I will", "I'll"),
    ("do not", "don't"),
    ("does not", "doesn't"),
    ("is not", "isn't"),
    ("cannot", "can't"),
    ("can not", "can't"),
    ("will not", "won't"),
    ("it is", "it's"),
    ("that is", "that's"),
    ("there is", "there's"),
    ("let us", "let's"),
    ("you are", "you're"),
    ("we are", "we're"),
    ("we will", "we'll"),
)


def _word_pattern(words: str) -> re.Pattern[str]:
    first, rest = words[0], re.escape(words[1:])
    return re.compile(rf"\b[{first.lower()}{first.upper()}]{rest}\b")


_EXPAND: Final = tuple((_word_pattern(short), long) for long, short in _CONTRACTIONS)
_CONTRACT: Final = tuple((_word_pattern(long), short) for long, short in _CONTRACTIONS)

_STOPWORD_TEXT: Final = """
    about above across after again against almost along already also although always
    among another anyone anything anyway around because become becomes been before being
    below beside besides between beyond both cannot could couldn't didn't doesn't doing
    don't down during each either else enough especially even ever every everyone
    everything exactly except first from further given going gonna great hasn't have
    haven't having hello here however isn't itself just know known later least less
    let's like little made make makes many maybe might mine more most much must myself
    need never next nothing often okay once only other others otherwise ought ourselves
    over perhaps please pretty quite rather really right said same says seem seems
    should shouldn't since some someone something sometimes still such sure than thank
    thanks that that's their theirs them themselves then there there's therefore these
    they they're thing things think this those though through thus together too toward
    towards under unless until upon very wants wasn't well were weren't what what's
    whatever when whenever where whereas whether which while whom whose will with within
    without won't would wouldn't yeah years you're your yours yourself yourselves
    answer answers question questions point points agree agreed example indeed
    actually basically certainly clearly simply truly
"""
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())

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
_TEMPLATE_WORDS: Final = frozenset(
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
) | frozenset(
    w.lower() for group in _STYLE_EXTRAS.values() for t in group for w in _WORD.findall(t)
)


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


def compose(request: GenerationRequest) -> str:
    """The full reply of the offline model to ``request`` (pure and deterministic)."""
    persona = request.persona
    info = request.info
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

    limit = _word_limit(request)
    text = _fit(filled, limit if limit is not None else MAX_WORDS * 2, wants_question)
    if request.max_tokens is not None:
        # A real model stops at max_tokens: cut words until the estimate fits.
        words = len(text.split())
        while words > 1 and estimate_tokens(text) > request.max_tokens:
            words -= 1
            text = _fit([text], words, wants_question)

    text = re.sub(r"<\s*world\s*>\s*pass\s*<\s*/\s*world\s*>", "", text, flags=re.IGNORECASE)
    return " ".join(text.lstrip("@ ").split())


class OfflineModel:
    """The ``offline`` ChatModel: streams :func:`compose` word by word, then ``Usage``."""

    name = "offline"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        text = compose(request)
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
        )
