"""The @mention grammar, self-mention stripping, auto-mention and pass extraction."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolecall.routing import (
    RESERVED,
    auto_mention,
    extract_pass,
    find_mentions,
    first_mention,
    strip_self_mentions,
)

# ---------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # plain
        ("@alice", ["alice"]),
        ("hi @alice how are you", ["alice"]),
        ("@alice @bob", ["alice", "bob"]),
        ("@alice and @alice", ["alice", "alice"]),
        ("\t@alice", ["alice"]),
        ("line one\n@alice", ["alice"]),
        # case
        ("@ALICE", ["alice"]),
        ("@AlIcE", ["alice"]),
        ("@Carol-2", ["carol-2"]),
        # digits
        ("@3po", ["3po"]),
        ("@r2d2", ["r2d2"]),
        ("@42", ["42"]),
        # inner and trailing _ / -
        ("@carol-2", ["carol-2"]),
        ("@dan_the_man", ["dan_the_man"]),
        ("@a--b__c", ["a--b__c"]),
        ("@alice-", ["alice"]),
        ("@alice_", ["alice"]),
        ("@alice-_-", ["alice"]),
        ("@alice- hi", ["alice"]),
        # trailing punctuation
        ("@alice,", ["alice"]),
        ("@alice:", ["alice"]),
        ("@alice.", ["alice"]),
        ("@alice!", ["alice"]),
        ("@alice?", ["alice"]),
        ("@alice;", ["alice"]),
        ("@alice)", ["alice"]),
        ("@alice]", ["alice"]),
        ("@alice's idea", ["alice"]),
        ('"@alice"', ["alice"]),
        ("@alice...", ["alice"]),
        ("@alice.bob", ["alice"]),
        # brackets
        ("(@alice)", ["alice"]),
        ("[@alice]", ["alice"]),
        ("{@alice}", ["alice"]),
        ("<@alice>", ["alice"]),
        # markdown
        ("**@alice**", ["alice"]),
        ("*@alice*", ["alice"]),
        ("> @alice", ["alice"]),
        (">@alice", ["alice"]),
        ("~~@alice~~", ["alice"]),
        ("`@alice`", ["alice"]),
        ("- @alice", ["alice"]),
        ("# @alice", ["alice"]),
        ("_@alice_", []),  # `_` before `@` blocks, literally
        ("__@alice__", []),
        # blocked by the preceding character
        ("bob@alice.com", []),
        ("mail bob@alice.com now", []),
        ("x.@alice", []),
        ("x-@alice", []),
        ("x_@alice", []),
        ("9@alice", []),
        ("a@alice", []),
        ("@@alice", []),
        ("@@@alice", []),
        ("@@", []),
        # malformed
        ("@", []),
        ("@ alice", []),
        ("@-x", []),
        ("@_x", []),
        ("@.alice", []),
        ("@!", []),
        ("", []),
        ("no mentions at all", []),
        # allowed neighbours
        ("/@alice", ["alice"]),
        ("https://example.com/@alice", ["alice"]),
        (",@alice", ["alice"]),
        ("#@alice", ["alice"]),
        ("+@alice", ["alice"]),
        # chained: the second @ is preceded by a letter
        ("@alice@bob", ["alice"]),
        # unicode neighbours
        ("é@alice", []),  # a letter precedes
        ("日本@alice", []),
        ("٣@alice", []),  # Arabic-Indic digit
        ("—@alice", ["alice"]),  # em dash is punctuation
        ("«@alice»", ["alice"]),
        ("\u00a0@alice", ["alice"]),  # no-break space
        ("@aliceé", ["aliceé"]),  # the name goes on: never plain alice
        ("@élise", ["élise"]),
        ("@ÉLISE", ["élise"]),
        ("＠alice", []),  # fullwidth at sign is not @
        ("@alice\u0301", ["alice"]),  # a combining mark ends the name
        ("😀@alice", ["alice"]),
    ],
)
def test_find_mentions(text: str, expected: list[str]) -> None:
    assert find_mentions(text) == expected
    assert first_mention(text) == (expected[0] if expected else None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@bob then @alice", "bob"),
        ("bob@x.com @@carol @- @alice then @bob", "alice"),
        ("_@bob_ **@alice**", "alice"),
        ("@ALL hands", "all"),
        ("@Human over to you", "human"),
        ("see @alice, and later @bob", "alice"),
    ],
)
def test_first_mention_is_the_first_valid_one(text: str, expected: str) -> None:
    assert first_mention(text) == expected


def test_reserved_words() -> None:
    assert frozenset({"human", "all"}) == RESERVED


def test_first_mention_stops_early_on_a_huge_message() -> None:
    text = "@alice " + "x" * 100_000 + " @bob"
    assert first_mention(text) == "alice"
    assert find_mentions(text) == ["alice", "bob"]


@pytest.mark.parametrize(
    "text",
    [
        "@a" + "_" * 100_000,
        "@" * 100_000,
        "a@" * 50_000,
        "@" + "a-" * 50_000,
        "<world>" + " " * 100_000,
    ],
)
def test_adversarial_inputs_are_handled(text: str) -> None:
    first_mention(text)
    find_mentions(text)
    extract_pass(text)
    strip_self_mentions(text, "a")


# ---------------------------------------------------------------- self-mention stripping


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@alice hi", "hi"),
        ("@alice @alice hi", "hi"),
        ("@ALICE hi", "hi"),
        ("@alice, hi", "hi"),
        ("@alice: hi", "hi"),
        ("@alice; hi", "hi"),
        ("@alice! hi", "hi"),
        ("@alice - hi", "hi"),
        ("@alice — hi", "hi"),
        ("@alice,hi", "hi"),
        ("@alice, @alice: hi", "hi"),
        ("  @alice hi", "hi"),
        ("@alice\n\nhi", "hi"),
        ("@alice_ hi", "hi"),
        ("@alice- hi", "hi"),
        ("@alice", ""),
        ("@alice @alice", ""),
        ("@alice.@alice x", "x"),
        ("@alice -1 is wrong", "-1 is wrong"),
        ("@alice @bob hi", "@bob hi"),
        # nothing to strip: unchanged
        ("hi", "hi"),
        ("  hi  ", "  hi  "),
        ("", ""),
        ("hi @alice", "hi @alice"),
        ("@bob @alice hi", "@bob @alice hi"),
        ("@alicex hi", "@alicex hi"),
        ("@alice-x hi", "@alice-x hi"),
        ("**@alice** hi", "**@alice** hi"),
        ("@@alice hi", "@@alice hi"),
        ("@all hi", "@all hi"),
    ],
)
def test_strip_self_mentions(text: str, expected: str) -> None:
    assert strip_self_mentions(text, "alice") == expected


def test_strip_self_mentions_agent_id_is_case_insensitive() -> None:
    assert strip_self_mentions("@alice hi", "Alice") == "hi"


def test_strip_self_mentions_many_is_fast_and_complete() -> None:
    assert strip_self_mentions("@alice " * 20_000 + "hi", "alice") == "hi"


# ------------------------------------------------------------------------ auto-mention


@pytest.mark.parametrize(
    ("reply", "answering", "replier", "expected"),
    [
        # A answers agent B and mentions nobody: @B is added
        ("I agree", "bob", "alice", "@bob I agree"),
        ("  I agree", "bob", "alice", "@bob I agree"),
        ("bob@alice.com is mine", "bob", "alice", "@bob bob@alice.com is mine"),
        ("@@bob hi", "bob", "alice", "@bob @@bob hi"),
        # a self-mention is not a redirect
        ("as @alice I agree", "bob", "alice", "@bob as @alice I agree"),
        ("as @ALICE I agree", "bob", "alice", "@bob as @ALICE I agree"),
        # an unknown first mention is kept: nobody answers it, with a warning (chat.md)
        ("ask @zed", "bob", "alice", "ask @zed"),
        ("@zed help", "bob", "alice", "@zed help"),
        ("@3po and @bob", "bob", "alice", "@3po and @bob"),
        # redirects are kept
        ("@carol-2 what do you think?", "bob", "alice", "@carol-2 what do you think?"),
        ("I agree, @CAROL-2?", "bob", "alice", "I agree, @CAROL-2?"),
        ("@bob yes", "bob", "alice", "@bob yes"),
        ("@human over to you", "bob", "alice", "@human over to you"),
        ("@all thoughts?", "bob", "alice", "@all thoughts?"),
        ("ask @dan_the_man then @zed", "bob", "alice", "ask @dan_the_man then @zed"),
        # no auto-mention to the human, the system, or nobody
        ("I agree", "human", "alice", "I agree"),
        ("I agree", "system", "alice", "I agree"),
        ("I agree", None, "alice", "I agree"),
        # an agent answering itself (never happens) or an empty reply: unchanged
        ("I agree", "alice", "alice", "I agree"),
        ("", "bob", "alice", ""),
        ("   ", "bob", "alice", "   "),
    ],
)
def test_auto_mention(reply: str, answering: str | None, replier: str, expected: str) -> None:
    assert auto_mention(reply, answering, replier) == expected


def test_auto_mention_result_addresses_the_one_answered() -> None:
    published = auto_mention("fine", "bob", "alice")
    assert first_mention(published) == "bob"


# -------------------------------------------------------------------------------- pass


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<world>pass</world>", ("", True)),
        ("  <world>pass</world>\n", ("", True)),
        ("<WORLD>PASS</WORLD>", ("", True)),
        ("<World>Pass</World>", ("", True)),
        ("<world> pass </world>", ("", True)),
        ("< world >\npass\n</ world >", ("", True)),
        ("That is all. <world>pass</world>", ("That is all.", True)),
        ("<world>pass</world> Over to you.", ("Over to you.", True)),
        ("ok <world>pass</world> thanks", ("ok thanks", True)),
        ("ok<world>pass</world>thanks", ("ok thanks", True)),
        ("done.\n<world>pass</world>\nbye", ("done.\n\nbye", True)),
        ("a <world>pass</world><world>PASS</world> b", ("a b", True)),
        ("<world>pass</world><world>pass</world>", ("", True)),
        # not a pass: unchanged
        ("I pass", ("I pass", False)),
        ("<world>fail</world>", ("<world>fail</world>", False)),
        ("<world>passed</world>", ("<world>passed</world>", False)),
        ("<world>pass", ("<world>pass", False)),
        ("  keep my spaces  ", ("  keep my spaces  ", False)),
        ("", ("", False)),
    ],
)
def test_extract_pass(text: str, expected: tuple[str, bool]) -> None:
    assert extract_pass(text) == expected


# -------------------------------------------------------------------------- properties

_MENTIONY = st.text(
    alphabet=st.sampled_from(
        [*"@@@@aAbBz09_-.,:;!?()[]*>` \n\t", "é", "日", "—", "٣", "\u0301", "＠", "İ"]
    ),
    max_size=60,
)
TEXTS = st.one_of(st.text(max_size=80), _MENTIONY)


def reference_mentions(text: str) -> list[str]:
    """The grammar of chat.md written the slow, obvious way."""
    found = []
    for index, char in enumerate(text):
        if char != "@":
            continue
        before = text[index - 1] if index else " "
        if before.isalnum() or before in "._-@":
            continue
        end = index + 1
        while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
            end += 1
        name = text[index + 1 : end].rstrip("_-")
        if name and name[0].isalnum():
            found.append(name.lower())
    return found


@settings(max_examples=200)
@given(TEXTS)
def test_first_mention_agrees_with_find_mentions(text: str) -> None:
    mentions = find_mentions(text)
    assert first_mention(text) == (mentions[0] if mentions else None)


@settings(max_examples=200)
@given(TEXTS)
def test_find_mentions_matches_the_reference_grammar(text: str) -> None:
    assert find_mentions(text) == reference_mentions(text)


@settings(max_examples=200)
@given(TEXTS, st.sampled_from(["a", "b", "alice"]))
def test_strip_self_mentions_is_an_idempotent_suffix(text: str, agent: str) -> None:
    stripped = strip_self_mentions(text, agent)
    assert text.endswith(stripped)
    assert strip_self_mentions(stripped, agent) == stripped


@settings(max_examples=200)
@given(TEXTS.filter(lambda t: "<" not in t and ">" not in t), TEXTS)
def test_extract_pass_removes_every_tag(text: str, other: str) -> None:
    remaining, passed = extract_pass(f"{text}<World> pass </world>{text}")
    assert passed
    assert extract_pass(remaining) == (remaining, False)
    extract_pass(other)  # arbitrary text never raises


@settings(max_examples=200)
@given(TEXTS, st.sampled_from(["human", "system", None, "bob", "alice"]))
def test_auto_mention_only_prefixes(reply: str, answering: str | None) -> None:
    published = auto_mention(reply, answering, "alice")
    assert published in (reply, f"@{answering} {reply.lstrip()}")
