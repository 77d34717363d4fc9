"""A program answers the tool calls a role must ask for (tools.md, Approval) through the
public ``Session.approver``, as the REPL and the web view ask a person."""

from __future__ import annotations

import pytest

import rolecall
from tests.tools.helpers import one_step_world

pytestmark = pytest.mark.anyio


def desk() -> dict[str, object]:
    return one_step_world(
        [{"call": "compute", "arguments": {"expression": "6*7"}}, "Here it is: {result}"],
        tools={"python": {"compute": "rolecall.examples.desk_tools:compute"}},
        role_tools=["compute"],
        approve="ask",
    )


async def test_an_approver_set_on_the_session_answers_each_call_it_must_ask_for() -> None:
    asked: list[rolecall.PendingCall] = []

    async def allow(call: rolecall.PendingCall) -> rolecall.Decision:
        asked.append(call)
        return rolecall.Decision("allow", "my program")

    async with rolecall.open_session(desk()) as session:
        assert session.approver is None
        session.approver = allow
        result = await session.run()
    assert [(c.sender, c.tool, c.arguments) for c in asked] == [
        ("clerk", "compute", {"expression": "6*7"})
    ]
    assert result.stop_reason == "flow_end"
    assert [m.content for m in session.transcript] == ["Here it is: 6*7 = 42"]


async def test_without_an_approver_such_a_call_is_refused_and_said_why() -> None:
    async with rolecall.open_session(desk()) as session:
        await session.run()
    (message,) = session.transcript
    assert message.content.startswith("Here it is: refused: compute needs approval")
