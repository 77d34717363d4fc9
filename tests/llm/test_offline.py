"""The built-in offline model: deterministic, in the role's voice, streamed word by word."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rolecall.llm.offline as offline_module
from rolecall.llm.offline import ARCHETYPES, OfflineModel, archetype_of, compose
from rolecall.llm.protocol import ChatModel
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    Persona,
    StreamItem,
    TextDelta,
    TurnInfo,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

TOPIC = "How do plants turn light into sugar?"
QUESTION = "Why do leaves need sunlight for photosynthesis, and where does the sugar go?"

# One persona per archetype, identified by id alone.
ARCHETYPE_PERSONAS = {
    "teacher": Persona("teacher", "Teacher"),
    "student": Persona("student", "Student"),
    "professor": Persona("professor", "Professor"),
    "official": Persona("official", "Official"),
    "lawyer": Persona("lawyer", "Lawyer"),
    "judge": Persona("judge", "Judge"),
    "moderator": Persona("moderator", "Moderator"),
    "explainer": Persona("explainer", "Explainer"),
    "challenger": Persona("challenger", "Challenger"),
    "summarizer": Persona("summarizer", "Summarizer"),
    "example_generator": Persona("example_generator", "Example Generator"),
    "misconception_spotter": Persona("misconception_spotter", "Misconception Spotter"),
    "pro": Persona("classic_pro", "Optimistic Advocate", "An optimistic advocate."),
    "con": Persona("classic_con", "Skeptical Critic", "A skeptical critic."),
    "generic": Persona("ecologist", "Dr. Reed", "an ecologist who studies wetlands"),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_request(
    persona: Persona | None = None,
    *,
    target: str | None = "student",
    target_text: str | None = QUESTION,
    topic: str = TOPIC,
    instruction: str | None = None,
    turn: int = 2,
    n: int = 1,
    max_tokens: int | None = None,
    participants: tuple[str, ...] = ("teacher", "student"),
) -> GenerationRequest:
    persona = persona or Persona("teacher", "Teacher", "a patient biology teacher")
    messages = (
        ChatMessage("system", "You are a patient teacher."),
        ChatMessage("user", target_text or "", name=target),
    )
    return GenerationRequest(
        model="offline",
        messages=messages,
        persona=persona,
        info=TurnInfo(
            turn=turn,
            n=n,
            speaker=persona.id,
            target=target,
            target_text=target_text,
            topic=topic,
            instruction=instruction,
        ),
        max_tokens=max_tokens,
        participants=participants,
    )


async def collect(model: ChatModel, request: GenerationRequest) -> list[StreamItem]:
    return [item async for item in model.stream(request)]


def deltas_of(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


# --- streaming ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_same_request_same_text_and_deltas() -> None:
    model = OfflineModel()
    first = await collect(model, make_request())
    second = await collect(OfflineModel(), make_request())
    assert first == second
    assert "".join(deltas_of(first)) == compose(make_request())


@pytest.mark.anyio
async def test_deltas_are_words_and_join_to_the_full_text() -> None:
    request = make_request()
    items = await collect(OfflineModel(), request)
    deltas = deltas_of(items)
    text = compose(request)
    assert "".join(deltas) == text
    assert len(deltas) == len(text.split())
    assert all(d.endswith(" ") and " " not in d[:-1] for d in deltas[:-1])
    assert " " not in deltas[-1]


@pytest.mark.anyio
async def test_usage_comes_last_with_the_documented_counts() -> None:
    request = make_request()
    items = await collect(OfflineModel(), request)
    assert isinstance(items[-1], Usage)
    assert not any(isinstance(item, Usage) for item in items[:-1])
    text = "".join(deltas_of(items))
    assert items[-1] == Usage(
        input_tokens=prompt_tokens(request.messages),
        output_tokens=estimate_tokens(text),
        cost_usd=0.0,  # runs locally: free
    )


@pytest.mark.anyio
async def test_delay_streams_the_same_items() -> None:
    request = make_request()
    slow = await collect(OfflineModel(delay=0.0005), request)
    assert slow == await collect(OfflineModel(), request)


def test_model_name_and_protocol() -> None:
    model: ChatModel = OfflineModel()
    assert model.name == "offline"


# --- determinism --------------------------------------------------------------------------


def test_different_persona_or_target_gives_different_text() -> None:
    base = compose(make_request())
    assert compose(make_request(Persona("student", "Student"), target="teacher")) != base
    assert compose(make_request(target="professor_okafor")) != base
    assert compose(make_request(turn=5, n=2)) != compose(make_request(turn=3, n=1))


def test_no_process_randomness_across_hash_seeds() -> None:
    script = (
        "from rolecall.llm.offline import compose\n"
        "from rolecall.llm.types import GenerationRequest, Persona, TurnInfo\n"
        "for pid in ('teacher', 'student', 'judge', 'ecologist', 'classic_con'):\n"
        "    info = TurnInfo(turn=4, n=2, speaker=pid, target='professor_okafor',\n"
        f"        target_text={QUESTION!r}, topic={TOPIC!r})\n"
        "    persona = Persona(pid, pid.title(), 'an ecologist', style='humorous')\n"
        "    print(compose(GenerationRequest('offline', (), persona, info)))\n"
    )
    outputs = []
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=30,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].count("\n") == 5


def test_source_uses_no_process_randomness() -> None:
    source = Path(offline_module.__file__).read_text("utf-8")
    assert "hash(" not in source
    assert not re.search(r"^\s*(import|from)\s+random\b", source, re.MULTILINE)
    assert "litellm" not in source


# --- voice and content --------------------------------------------------------------------


def test_reply_names_the_target() -> None:
    assert "Student" in compose(make_request(target="student"))
    text = compose(make_request(target="professor_okafor"))
    assert "Professor Okafor" in text
    assert "professor_okafor" not in text


@pytest.mark.parametrize("archetype", sorted(ARCHETYPE_PERSONAS))
def test_every_archetype_names_its_target(archetype: str) -> None:
    persona = ARCHETYPE_PERSONAS[archetype]
    for turn in range(1, 6):
        assert "Kai Lee" in compose(make_request(persona, target="kai_lee", turn=turn))


@pytest.mark.parametrize("target", [None, "human", "system"])
def test_no_named_target(target: str | None) -> None:
    text = compose(make_request(target=target))
    assert "Human" not in text
    assert "System" not in text
    assert 25 <= len(text.split()) <= 70


def test_never_names_itself_as_target() -> None:
    text = compose(make_request(target="teacher"))
    assert not text.startswith(("Teacher", "@"))


def test_reacts_to_the_target_text_and_topic() -> None:
    text = compose(make_request()).lower()
    assert "photosynthesis" in text or "sunlight" in text
    other = compose(
        make_request(target_text="What about chlorophyll and carbon dioxide?", topic="")
    ).lower()
    assert "chlorophyll" in other or "dioxide" in other


def test_teacher_and_student_voices_differ() -> None:
    teacher = compose(make_request(Persona("teacher", "Teacher"), target="student"))
    student = compose(make_request(Persona("student", "Student"), target="student"))
    assert teacher != student
    assert "?" in compose(make_request(Persona("student", "Student"), target="teacher"))
    for turn in range(1, 10):
        reply = compose(make_request(Persona("student", "Student"), target="teacher", turn=turn))
        assert "?" in reply


def test_every_archetype_has_its_own_voice() -> None:
    replies = {a: compose(make_request(p)) for a, p in ARCHETYPE_PERSONAS.items()}
    assert len(set(replies.values())) == len(replies)
    # Different voices, not merely different random picks: openers differ too.
    openers = {sentences(text)[0] for text in replies.values()}
    assert len(openers) == len(replies)
    assert set(ARCHETYPE_PERSONAS) == set(ARCHETYPES)


def test_archetype_markers() -> None:
    def all_turns(persona: Persona) -> str:
        return " ".join(compose(make_request(persona, turn=t)) for t in range(1, 13)).lower()

    assert "rule" in all_turns(ARCHETYPE_PERSONAS["judge"])
    official = all_turns(ARCHETYPE_PERSONAS["official"])
    assert "approval" in official or "next step" in official
    lawyer = all_turns(ARCHETYPE_PERSONAS["lawyer"])
    assert "precedent" in lawyer or "liability" in lawyer
    assert "principle" in all_turns(ARCHETYPE_PERSONAS["professor"])
    assert "floor" in all_turns(ARCHETYPE_PERSONAS["moderator"])
    assert "ecologist" in all_turns(ARCHETYPE_PERSONAS["generic"])


@pytest.mark.parametrize(
    ("persona_id", "name", "description", "expected"),
    [
        ("teacher", "", "", "teacher"),
        ("professor_okafor", "", "", "professor"),
        ("technical_pro", "Solution Architect", "", "pro"),
        ("scientific_con", "Peer Reviewer", "", "con"),
        ("okafor", "Professor Okafor", "", "professor"),
        ("rivera", "Ms. Rivera", "a patient biology teacher", "teacher"),
        ("kim", "Kim", "a curious first-year student", "student"),
        ("example_generator", "", "", "example_generator"),
        ("misconception_spotter", "", "", "misconception_spotter"),
        ("synthesizer", "", "", "summarizer"),
        ("ecologist", "Dr. Reed", "an ecologist who studies wetlands", "generic"),
    ],
)
def test_archetype_choice(persona_id: str, name: str, description: str, expected: str) -> None:
    assert archetype_of(persona_id, name, description) == expected


def test_generic_voice_uses_description() -> None:
    persona = Persona("ecologist", "Dr. Reed", "an ecologist who studies wetlands")
    texts = [compose(make_request(persona, turn=t)) for t in range(1, 6)]
    assert all("an ecologist" in text for text in texts)


def test_style_hints_change_the_phrasing() -> None:
    plain = Persona("teacher", "Teacher")
    texts = {
        style: [
            compose(
                make_request(
                    Persona(plain.id, plain.name, style=style), turn=t, target_text="Hi there."
                )
            )
            for t in range(1, 8)
        ]
        for style in ("", "formal", "casual", "humorous", "strict")
    }
    assert texts["formal"] != texts[""]
    assert texts["casual"] != texts[""]
    assert texts["humorous"] != texts[""]
    assert not any("let's" in t.lower() for t in texts["formal"])
    assert not any("let us" in t.lower() for t in texts["casual"])


@pytest.mark.parametrize("archetype", sorted(ARCHETYPE_PERSONAS))
def test_question_instruction_ends_with_a_question(archetype: str) -> None:
    persona = ARCHETYPE_PERSONAS[archetype]
    for instruction in ("Open with one question.", "Ask the student a follow-up."):
        for turn in range(1, 5):
            text = compose(make_request(persona, instruction=instruction, turn=turn))
            assert text.endswith("?"), text


@pytest.mark.parametrize("limit", [5, 12, 20, 30, 60])
@pytest.mark.parametrize("archetype", sorted(ARCHETYPE_PERSONAS))
def test_at_most_n_words(archetype: str, limit: int) -> None:
    base = ARCHETYPE_PERSONAS[archetype]
    persona = Persona(
        base.id, base.name, base.description, constraints=("Be kind.", f"at most {limit} words")
    )
    for turn in range(1, 4):
        text = compose(make_request(persona, turn=turn))
        assert 1 <= len(text.split()) <= limit
        assert text[-1] in ".?!"
        asked = compose(make_request(persona, turn=turn, instruction="End with a question."))
        assert len(asked.split()) <= limit
        assert asked.endswith("?")


def test_max_tokens_caps_the_reply() -> None:
    text = compose(make_request(max_tokens=10))
    assert estimate_tokens(text) <= 10


@pytest.mark.parametrize("archetype", sorted(ARCHETYPE_PERSONAS))
def test_length_and_sentences(archetype: str) -> None:
    persona = ARCHETYPE_PERSONAS[archetype]
    for turn in range(1, 9):
        for target_text in (QUESTION, None, "ok", "<world>pass</world>"):
            text = compose(make_request(persona, turn=turn, target_text=target_text))
            assert 25 <= len(text.split()) <= 70, text
            assert 2 <= len(sentences(text)) <= 4, text
            assert "<world>" not in text.lower()
            assert not text.startswith("@")
            assert "{" not in text


def test_odd_inputs_do_not_break_it() -> None:
    persona = Persona("x", "{name} <b>", "{who} @x <world>pass</world>", style="{style}")
    text = compose(make_request(persona, target="@x", target_text="{a} {b}", topic=""))
    assert "<" not in text
    assert not text.startswith("@")
    assert compose(make_request(target_text="", topic=""))


def test_compose_is_fast() -> None:
    request = make_request()
    start = time.perf_counter()
    for _ in range(500):
        compose(request)
    assert (time.perf_counter() - start) / 500 < 0.001
