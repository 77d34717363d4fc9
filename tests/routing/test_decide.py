"""Who answers: every row of chat.md's table, unknown names, and routing properties."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rolecall.routing import Route, route, unknown_mention_notice

ROLES = ("alice", "bob", "carol", "dan-2")
EVERYONE = ROLES


@pytest.mark.parametrize(
    ("sender", "text", "answerers", "mention", "reason"),
    [
        # human, no mention or only malformed ones: every agent, in role order
        ("human", "hello everyone", EVERYONE, None, "broadcast"),
        ("human", "", EVERYONE, None, "broadcast"),
        ("human", "@@ what", EVERYONE, None, "broadcast"),
        ("human", "@@alice what", EVERYONE, None, "broadcast"),
        ("human", "a lone @ here", EVERYONE, None, "broadcast"),
        ("human", "@-x and @_y", EVERYONE, None, "broadcast"),
        ("human", "write to bob@alice.com", EVERYONE, None, "broadcast"),
        ("human", "_@alice_ hi", EVERYONE, None, "broadcast"),
        # human, first mention names an agent: that agent only
        ("human", "@bob what do you think?", ("bob",), "bob", "direct"),
        ("human", "what do you think, @bob?", ("bob",), "bob", "direct"),
        ("human", "@BOB hi", ("bob",), "bob", "direct"),
        ("human", "**@carol** hi", ("carol",), "carol", "direct"),
        ("human", "> @dan-2 quote", ("dan-2",), "dan-2", "direct"),
        ("human", "@dan-2- hi", ("dan-2",), "dan-2", "direct"),
        ("human", "(@alice) hi", ("alice",), "alice", "direct"),
        # first mention only: later mentions are ordinary text
        ("human", "@bob then @alice", ("bob",), "bob", "direct"),
        ("human", "@bob tell @all", ("bob",), "bob", "direct"),
        ("human", "x@y.z @@q @carol, ask @bob", ("carol",), "carol", "direct"),
        # human, first mention is @all: every agent
        ("human", "@all ready?", EVERYONE, "all", "all"),
        ("human", "@ALL ready?", EVERYONE, "all", "all"),
        ("human", "@all then @bob", EVERYONE, "all", "all"),
        # human, first mention is @human: nobody (decision)
        ("human", "@human note to self", (), "human", "human_mention"),
        # human, first mention names no agent: nobody (+ notice)
        ("human", "@alcie hi", (), "alcie", "unknown_mention"),
        ("human", "@zed then @bob", (), "zed", "unknown_mention"),
        ("human", "@3po hi", (), "3po", "unknown_mention"),
        ("human", "@system hi", (), "system", "unknown_mention"),
        ("human", "@alicé hi", (), "alicé", "unknown_mention"),
        # agent A, first mention names another agent B: B
        ("alice", "@bob your turn", ("bob",), "bob", "agent_direct"),
        ("alice", "I think @Carol knows", ("carol",), "carol", "agent_direct"),
        ("alice", "@bob and @carol", ("bob",), "bob", "agent_direct"),
        # agent A, no mention: nobody, the floor returns to the human
        ("alice", "I agree", (), None, "floor_to_human"),
        ("alice", "mail me at x@alice.com", (), None, "floor_to_human"),
        ("alice", "@@bob no", (), None, "floor_to_human"),
        # agent A, @human: nobody
        ("alice", "@human over to you", (), "human", "floor_to_human"),
        ("alice", "@HUMAN then @bob", (), "human", "floor_to_human"),
        # agent A, a mention of itself: nobody (an agent never answers its own message)
        ("alice", "as @alice I say", (), "alice", "self"),
        ("alice", "@ALICE then @bob", (), "alice", "self"),
        # agent A, @all: every other agent in role order (decision)
        ("bob", "@all what do you think?", ("alice", "carol", "dan-2"), "all", "agent_all"),
        ("alice", "@all?", ("bob", "carol", "dan-2"), "all", "agent_all"),
        # agent A, unknown name: nobody (+ notice)
        ("alice", "@bobb your turn", (), "bobb", "unknown_mention"),
        # system: nobody, whatever it says
        ("system", "turn limit reached", (), None, "system"),
        ("system", "@human turn limit reached", (), "human", "system"),
        ("system", "@alice wake up", (), "alice", "system"),
        ("system", "@all wake up", (), "all", "system"),
        ("system", "@nobody", (), "nobody", "system"),
    ],
)
def test_who_answers(
    sender: str, text: str, answerers: tuple[str, ...], mention: str | None, reason: str
) -> None:
    decision = route(sender, text, ROLES)
    assert decision.answerers == answerers
    assert decision.mention == mention
    assert decision.reason == reason
    if reason != "unknown_mention":
        assert decision.unknown is None
        assert decision.suggestions == ()
        assert decision.known == ()


@pytest.mark.parametrize(
    ("sender", "text", "unknown", "suggestions"),
    [
        ("human", "@alcie hi", "alcie", ("alice",)),
        ("human", "@Bobb hi", "bobb", ("bob",)),
        ("human", "@carl hi", "carl", ("carol",)),
        ("human", "@dan hi", "dan", ("dan-2",)),
        ("human", "@zed hi", "zed", ()),
        ("bob", "@alicia over to you", "alicia", ("alice",)),
        ("bob", "@xyzzy over to you", "xyzzy", ()),
    ],
)
def test_unknown_names_get_suggestions(
    sender: str, text: str, unknown: str, suggestions: tuple[str, ...]
) -> None:
    decision = route(sender, text, ROLES)
    assert decision == Route(
        answerers=(),
        mention=unknown,
        unknown=unknown,
        suggestions=suggestions,
        reason="unknown_mention",
        known=ROLES,
    )


def test_suggestions_are_at_most_three_best_first() -> None:
    roles = ["anna", "ann", "anne", "annie", "zed"]
    decision = route("human", "@annx hi", roles)
    assert len(decision.suggestions) == 3
    assert set(decision.suggestions) <= {"anna", "ann", "anne", "annie"}


@pytest.mark.parametrize(
    ("text", "roles", "notice"),
    [
        (
            "@alcie hi",
            ("alice", "bob"),
            "nobody answered: no agent 'alcie' (closest: alice; agents: alice, bob)",
        ),
        ("@zed hi", ("alice", "bob"), "nobody answered: no agent 'zed' (agents: alice, bob)"),
        ("@zed hi", (), "nobody answered: no agent 'zed' (no agents)"),
        (
            "@" + "z" * 100,
            ("alice",),
            "nobody answered: no agent '" + "z" * 39 + "…' (agents: alice)",
        ),
    ],
)
def test_unknown_mention_notice(text: str, roles: tuple[str, ...], notice: str) -> None:
    result = unknown_mention_notice(route("human", text, roles))
    assert result == notice
    assert "\n" not in result


def test_unknown_mention_notice_needs_an_unknown_name() -> None:
    with pytest.raises(ValueError, match="no unknown mention"):
        unknown_mention_notice(route("human", "@bob hi", ROLES))


def test_no_roles_broadcast_reaches_nobody() -> None:
    assert route("human", "hello", []).answerers == ()


def test_role_ids_may_be_any_sequence() -> None:
    assert route("human", "hi", ["bob", "alice"]).answerers == ("bob", "alice")


@pytest.mark.parametrize("sender", ["zed", "Human", "", "ALICE"])
def test_unknown_sender_is_refused(sender: str) -> None:
    with pytest.raises(ValueError, match="unknown sender"):
        route(sender, "hi", ROLES)


def test_a_single_string_is_not_a_role_list() -> None:
    with pytest.raises(TypeError):
        route("human", "hi", "alice")


def test_route_is_frozen() -> None:
    decision = route("human", "hi", ROLES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.reason = "direct"  # type: ignore[misc]


def test_routing_a_huge_message_with_many_mentions() -> None:
    filler = "lorem ipsum dolor sit amet " * 3
    text = "".join(f"{filler}@{name} " for name in ["bob", "zed"] * 500)
    assert route("human", text, ROLES).answerers == ("bob",)
    assert route("bob", text, ROLES).reason == "self"


# -------------------------------------------------------------------------- properties

_IDS = st.from_regex(r"[a-z][a-z0-9_-]{0,6}", fullmatch=True).filter(
    lambda role: role not in ("human", "all", "system")
)
_ROLE_LISTS = st.lists(_IDS, max_size=6, unique=True)


@st.composite
def _messages(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """A role list, a sender (human, system or one of the roles) and a text."""
    roles = draw(_ROLE_LISTS)
    sender = draw(st.sampled_from(["human", "system", *roles]))
    names = [*roles, "all", "human", "zed", "@", "@@"]
    pieces = st.one_of(
        st.text(max_size=10),
        st.sampled_from(names).map(lambda name: f" @{name.upper()}, "),
        st.sampled_from(names).map(lambda name: f"x@{name}"),
    )
    text = "".join(draw(st.lists(pieces, max_size=8)))
    return sender, text, roles


@settings(max_examples=200)
@given(_messages())
def test_answerers_are_roles_in_order_never_the_sender(
    message: tuple[str, str, list[str]],
) -> None:
    sender, text, roles = message
    decision = route(sender, text, roles)
    assert sender not in decision.answerers
    positions = [roles.index(answerer) for answerer in decision.answerers]
    assert positions == sorted(set(positions))
    if decision.unknown is not None:
        assert decision.answerers == ()
        assert set(decision.suggestions) <= set(roles)
        assert unknown_mention_notice(decision).startswith("nobody answered: no agent ")
    if sender != "human":
        assert len(decision.answerers) <= max(len(roles) - 1, 0)
