"""The one read of what a role sees (rolecall.session.audience, docs/audiences.md): pure."""

from __future__ import annotations

from datetime import UTC, datetime

from rolecall.session.audience import audience_label, can_see, latest_seen, seen
from rolecall.session.state import TranscriptMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def msg(
    n: int,
    sender: str,
    *,
    audience: list[str] | None = None,
    mentions: tuple[str, ...] = (),
    target: str | None = None,
) -> TranscriptMessage:
    kind = "human" if sender == "human" else "system" if sender == "system" else "agent"
    return TranscriptMessage(
        id=f"m{n}",
        sender=sender,
        kind=kind,
        content=f"text {n}",
        audience=audience,
        mentions=list(mentions),
        target=target,
        ts=NOW,
    )


def test_an_audience_is_seen_by_its_members_its_sender_and_the_human_only() -> None:
    private = msg(1, "ann", audience=["bob"])
    assert [r for r in ("ann", "bob", "cid", "human") if can_see(r, private)] == [
        "ann",
        "bob",
        "human",
    ]
    assert can_see("cid", msg(2, "ann"))  # no audience: everyone


def test_a_sees_list_keeps_messages_from_or_to_those_roles_and_the_humans() -> None:
    limit = ["ann"]
    assert can_see("cid", msg(1, "ann"), limit)  # from ann
    assert can_see("cid", msg(2, "human"), limit)  # the human's
    assert can_see("cid", msg(3, "system"), limit)  # a notice
    assert can_see("cid", msg(4, "bob", target="ann"), limit)  # to ann
    assert can_see("cid", msg(5, "bob", mentions=("cid",)), limit)  # to cid itself
    assert can_see("cid", msg(6, "cid"), limit)  # its own
    assert not can_see("cid", msg(7, "bob", target="human", mentions=("human",)), limit)
    assert not can_see("cid", msg(8, "ann", audience=["bob"]), limit)  # audiences still hold


def test_seen_and_latest_seen_read_in_order_from_a_start_without_an_excluded_one() -> None:
    messages = [
        msg(1, "human"),
        msg(2, "ann", audience=["bob"]),
        msg(3, "bob", audience=["ann"]),
        msg(4, "cid"),
        msg(5, "human"),
    ]
    assert [m.id for m in seen(messages, "cid")] == ["m1", "m4", "m5"]
    assert [m.id for m in seen(messages, "cid", start=1)] == ["m4", "m5"]
    assert [m.id for m in seen(messages, "human")] == ["m1", "m2", "m3", "m4", "m5"]
    assert [m.id for m in latest_seen(messages, "cid", 2)] == ["m4", "m5"]
    assert [m.id for m in latest_seen(messages, "cid", 2, exclude="m5")] == ["m1", "m4"]
    assert [m.id for m in latest_seen(messages, "bob", 9, end=3)] == ["m1", "m2", "m3"]
    assert latest_seen(messages, "cid", 0) == []


def test_the_mark_names_the_audience() -> None:
    assert audience_label(["ann", "bob"]) == "to ann, bob only"
    assert audience_label(None) == ""
