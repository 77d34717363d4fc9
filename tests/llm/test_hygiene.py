"""Reply hygiene's filter (llm/hygiene.py), without a model: tags at the start, another
participant's turn, repetition; what is emitted, held back and removed always adds up to
the text received, and how the text is chunked never changes the message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolecall.llm.hygiene import (
    Participants,
    ReplyFilter,
    participants,
    scan,
    step,
)

# the classroom of the issue: the teacher must not go on as the student
TEACHER = participants(
    ("teacher", "Ms Rivera"), (("student", "Sam"), ("planner", "Planner"), ("historian", "Ada"))
)
HISTORIAN = participants(
    ("historian", "Ada"), (("teacher", "Ms Rivera"), ("student", "Sam"), ("planner", "Planner"))
)


def run(p: Participants, chunks: list[str]) -> tuple[ReplyFilter, str]:
    """Feed ``chunks`` as a stream does (stopping at a cut); the filter and what it emitted."""
    screen = ReplyFilter(p)
    emitted = ""
    for chunk in chunks:
        emitted += screen.feed(chunk).emit
        if screen.cut is not None:
            return screen, emitted
    emitted += screen.close().emit
    return screen, emitted


def one(p: Participants, text: str) -> tuple[str, list[tuple[str, str]]]:
    screen, emitted = run(p, [text])
    assert emitted == screen.message
    return screen.message, [(t.kind, t.removed) for t in screen.removed]


@pytest.mark.parametrize(
    "text",
    [
        "[teacher] Let us begin.",
        "[Ms Rivera] Let us begin.",
        "teacher: Let us begin.",
        "Ms Rivera: Let us begin.",
        "ms rivera : Let us begin.",
        "**Ms Rivera:** Let us begin.",
        "**Ms Rivera**: Let us begin.",
        "Ms Rivera (teacher): Let us begin.",
        "@teacher: Let us begin.",
        "  [TEACHER]\n\nLet us begin.",
    ],
)
def test_the_speakers_own_tag_is_removed_in_every_form(text: str) -> None:
    message, removed = one(TEACHER, text)
    assert message == "Let us begin."
    assert removed == [("tag", text[: len(text) - len(message)])]


def test_a_bracketed_tag_of_anyone_at_the_start_is_removed() -> None:
    assert one(HISTORIAN, "[planner] The rest of the human's question.") == (
        "The rest of the human's question.",
        [("tag", "[planner] ")],
    )


def test_a_first_line_addressing_someone_is_kept() -> None:
    text = "Sam: good question. Rome fell slowly.\nIt took centuries."
    assert one(TEACHER, text) == (text, [])


@pytest.mark.parametrize(
    "tag",
    [
        "Sam:",
        "student:",
        "[student]",
        "**Sam:**",
        "Sam (student):",
        "@student:",
        "human:",
        "[human]",
        "User:",
        "  sam :",
    ],
)
def test_a_later_line_in_another_participants_voice_is_cut(tag: str) -> None:
    text = f"Rome fell slowly.\n{tag} When I was a young boy of 16 I went there."
    message, removed = one(TEACHER, text)
    assert message == "Rome fell slowly."
    assert removed == [("other_speaker", text[len(message) :])]


def test_the_speakers_own_tag_on_a_later_line_is_not_another_speaker() -> None:
    text = "Rome fell slowly.\nMs Rivera: and then it rose again."
    assert one(TEACHER, text) == (text, [])


def test_a_sentence_said_a_third_time_ends_the_reply_after_the_second() -> None:
    text = "The sky is blue. Rain is wet. The sky is blue. The sky is blue. And more."
    message, removed = one(TEACHER, text)
    assert message == "The sky is blue. Rain is wet. The sky is blue."
    assert removed == [("repetition", " The sky is blue. And more.")]


def test_short_sentences_and_lines_may_recur() -> None:
    text = "Yes. No. Yes. Yes.\n---\nA table.\n---\n---\nDone."
    assert one(TEACHER, text) == (text, [])


def test_a_repeated_run_of_words_is_ended_after_its_second_occurrence() -> None:
    unit = "we should consider every option on the table before deciding anything at all today"
    words = unit.split()
    text = "Opening remark here. " + " ".join(words * 12)  # no sentence ends: only the run rule
    message, removed = one(TEACHER, text)
    assert message == "Opening remark here. " + " ".join(words * 2)
    assert removed[0][0] == "repetition"


def test_a_well_behaved_reply_passes_untouched_and_unheld() -> None:
    text = "Ms Rivera thinks Sam has a point: the empire split in 395."
    screen, emitted = run(TEACHER, text.split(" "))
    assert emitted == text.replace(" ", "")  # (the chunks lost their spaces)
    assert screen.removed == []


def test_a_tag_that_could_still_form_is_held_back_then_released() -> None:
    first = step(TEACHER, "", "Ms Ri")
    assert (first.emit, first.held, first.cut) == ("", "Ms Ri", None)
    second = step(TEACHER, "Ms Ri", "ver is wide.")
    assert (second.emit, second.held) == ("Ms River is wide.", "")
    line = step(TEACHER, "", "Rome fell.\nSa")  # a later line: another's tag could form
    assert (line.emit, line.held) == ("Rome fell.", "\nSa")
    cut = step(TEACHER, "Rome fell.\nSa", "m: I went there.")
    assert (cut.emit, cut.held, [t.kind for t in cut.trims]) == ("", "", ["other_speaker"])


def test_a_cut_after_text_was_shown_says_how_much_was_shown() -> None:
    text = "It is late. It is late. It is late. Go home."
    screen, emitted = run(TEACHER, list(text))
    (trim,) = screen.removed
    assert trim.kind == "repetition"
    assert screen.message == "It is late. It is late."
    assert emitted.startswith(screen.message)
    assert trim.shown == len(emitted) - len(screen.message) > 0


def test_a_stop_sequence_split_across_chunks_is_cut_on_the_joined_text() -> None:
    screen, emitted = run(TEACHER, ["Fine.\n", "Us", "er", ": and me?"])
    assert emitted == "Fine." == screen.message
    assert [t.kind for t in screen.removed] == ["other_speaker"]


# -- properties ----------------------------------------------------------------------------

PIECES = st.sampled_from(
    [
        "Sam:",
        "[planner]",
        "[teacher]",
        "Ms Rivera:",
        "\n",
        " ",
        "human:",
        "User:",
        "the",
        "sky",
        "is",
        "blue.",
        "Rome",
        "fell",
        ".",
        "**",
        "(student)",
        "@teacher:",
        "ok",
    ]
)
TEXTS = st.lists(PIECES, max_size=60).map("".join)


def cuts_of(text: str, sizes: list[int]) -> list[str]:
    out, at = [], 0
    for size in sizes:
        if at >= len(text):
            break
        out.append(text[at : at + size])
        at += size
    if at < len(text):
        out.append(text[at:])
    return out


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.lists(st.integers(1, 7), max_size=40))
def test_emitted_held_and_removed_add_up_and_chunking_never_changes_the_message(
    text: str, sizes: list[int]
) -> None:
    whole, _ = run(TEACHER, [text])
    chunked, emitted = run(TEACHER, cuts_of(text, sizes))
    assert chunked.message == whole.message
    assert [t.kind for t in chunked.removed] == [t.kind for t in whole.removed]
    received = chunked.text
    lead = "".join(t.removed for t in chunked.removed if t.kind == "tag")
    tail = "".join(t.removed for t in chunked.removed if t.kind != "tag")
    assert lead + chunked.message + tail == received
    # what was shown is the message, plus what a cut took back after it was shown
    shown = sum(t.shown for t in chunked.removed)
    assert emitted == chunked.message + tail[:shown]


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.integers(0, 60))
def test_the_pure_step_adds_up(text: str, split: int) -> None:
    so_far, chunk = text[:split], text[split:]
    before = scan(TEACHER, so_far)
    if before.cut is not None:
        return
    out = step(TEACHER, so_far, chunk)
    shown = so_far[before.lead : before.safe]
    kept = text[: out.cut.at] if out.cut is not None else text
    lead = scan(TEACHER, text).lead
    if out.cut is None:
        assert text[lead:] == shown + out.emit + out.held
    else:
        assert out.held == ""
        assert (shown + out.emit).startswith(kept[lead:]) or kept[lead:].startswith(
            shown + out.emit
        )
