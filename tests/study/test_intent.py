"""Interruption classification (modes.md, Study): classes, confidence, ties."""

from __future__ import annotations

import pytest

from rolecall.study.intent import CUES, INTENTS, classify


@pytest.mark.parametrize(
    ("text", "intent", "confidence"),
    [
        # the spec's examples
        ("Give me an example", "example_request", 0.8),
        ("xyzabc123", "other", 0.0),
        # one cue: 0.8
        ("Could you clarify that?", "clarification", 0.8),
        ("I disagree.", "objection", 0.8),
        ("Can you go deeper here", "depth_request", 0.8),
        ("Quick recap please", "summary_request", 0.8),
        # two or more cues of one class: 1.0
        ("Give me an example, for instance from school", "example_request", 1.0),
        ("I'm confused, what do you mean?", "clarification", 1.0),
        ("That's wrong, I disagree", "objection", 1.0),
        ("Please elaborate and tell me more", "depth_request", 1.0),
        ("A summary of the key points, please", "summary_request", 1.0),
        # a tie between classes: minus 0.15, the first class in INTENTS order wins
        ("Can you clarify with an example?", "clarification", 0.65),
        ("Why? Give an example", "depth_request", 0.65),
        ("I disagree and I'm confused; a summary and an example would help", "clarification", 0.65),
        ("I disagree, that's wrong. An example, for instance?", "objection", 0.85),
        # more hits beat fewer
        ("Give an example, e.g. a concrete one, why not", "example_request", 1.0),
        ("", "other", 0.0),
        ("Thanks, carry on.", "other", 0.0),
    ],
)
def test_classification(text: str, intent: str, confidence: float) -> None:
    found = classify(text)
    assert (found.intent, found.confidence) == (intent, confidence)


def test_cues_are_whole_words_case_insensitive() -> None:
    assert classify("EXAMPLE").intent == "example_request"
    assert classify("counterexamples everywhere").intent == "other"  # not the word 'example'
    assert classify("objects in motion").intent == "other"  # not 'object'


def test_longer_cue_counts_once() -> None:
    found = classify("for instance")
    assert found.cues == {"example_request": ["for instance"]}
    assert found.confidence == 0.8


def test_reasons_and_record() -> None:
    found = classify("Can you clarify with an example?")
    record = found.to_dict()
    assert record["intent"] == "clarification"
    assert record["tie"] == ["clarification", "example_request"]
    assert record["cues"] == {"clarification": ["clarify"], "example_request": ["example"]}
    assert "minus 0.15 for a tie" in str(record["reasons"])
    assert classify("nothing here").reasons == "no keyword cue of any class"


def test_every_class_has_cues() -> None:
    assert set(CUES) == set(INTENTS)
    assert all(CUES[i] for i in INTENTS)
