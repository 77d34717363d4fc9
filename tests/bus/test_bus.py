from __future__ import annotations

import json

import pytest

from rolecall.bus import (
    Envelope,
    ErrorEvent,
    EventBus,
    MessageEvent,
    StepEvent,
    StopEvent,
    StreamChunk,
    StreamEnd,
    StreamStart,
    WarningEvent,
)


def msg(n: int) -> MessageEvent:
    return MessageEvent(message_id=f"m{n}", sender="human", content=f"hello {n}")


def test_seq_is_gap_free_and_history_is_bounded() -> None:
    bus = EventBus("s", history_size=3)
    for i in range(1, 6):
        bus.publish(msg(i))
    assert [e.seq for e in bus.history] == [3, 4, 5]
    assert bus.last_seq == 5


def test_subscribers_choose_topic_and_filter() -> None:
    bus = EventBus("s")
    messages: list[int] = []
    stops: list[int] = []
    only_m2: list[int] = []
    bus.subscribe(lambda e: messages.append(e.seq), "messages")
    bus.subscribe(lambda e: stops.append(e.seq), "world")
    bus.subscribe(
        lambda e: only_m2.append(e.seq),
        "messages",
        filter=lambda e: isinstance(e.event, MessageEvent) and e.event.message_id == "m2",
    )
    bus.publish(msg(1))
    bus.publish(StopEvent(reason="flow_end"))
    bus.publish(msg(2))
    assert messages == [1, 3]
    assert stops == [2]
    assert only_m2 == [3]


def test_a_subscriber_may_choose_event_types_of_a_topic() -> None:
    bus = EventBus("s")
    starts_and_ends: list[str] = []
    everything: list[str] = []
    sub = bus.subscribe(
        lambda e: starts_and_ends.append(e.event.type), "sse", types=("start", "end")
    )
    bus.subscribe(lambda e: everything.append(e.event.type), "sse")
    bus.publish(StreamStart(message_id="m1", sender="a"))
    for word in ("one", "two"):
        bus.publish(StreamChunk(message_id="m1", sender="a", delta=word, output_tokens=1))
    bus.publish(StreamEnd(message_id="m1", sender="a", input_tokens=1, output_tokens=2))
    bus.publish(msg(2))
    assert starts_and_ends == ["start", "end"]
    assert everything == ["start", "chunk", "chunk", "end"]
    sub.close()
    bus.publish(StreamStart(message_id="m3", sender="a"))
    assert starts_and_ends == ["start", "end"]
    with pytest.raises(ValueError, match="no event type 'begin' in topic sse"):
        bus.subscribe(lambda e: None, "sse", types=("begin",))


def test_failing_subscriber_becomes_system_error_and_breaks_nothing() -> None:
    bus = EventBus("s")
    seen_after: list[int] = []
    errors: list[ErrorEvent] = []

    def boom(_: Envelope) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe(boom, "messages", name="boom")
    bus.subscribe(lambda e: seen_after.append(e.seq), name="after")
    bus.subscribe(
        lambda e: errors.append(e.event) if isinstance(e.event, ErrorEvent) else None, "system"
    )
    bus.publish(msg(1))
    bus.publish(msg(2))
    # the later subscriber got every event, in order, errors included after their cause
    assert seen_after == [1, 2, 3, 4]
    assert len(errors) == 2
    assert "boom" in errors[0].error and "subscriber bug" in errors[0].error


def test_events_published_by_a_handler_arrive_after_the_current_event_everywhere() -> None:
    bus = EventBus("s")
    order_a: list[int] = []
    order_b: list[int] = []

    def a(e: Envelope) -> None:
        order_a.append(e.seq)
        if e.seq == 1:
            bus.publish(WarningEvent(message="from a handler"))

    bus.subscribe(a)
    bus.subscribe(lambda e: order_b.append(e.seq))
    bus.publish(msg(1))
    assert order_a == [1, 2]
    assert order_b == [1, 2]


def test_an_error_handler_that_fails_does_not_loop() -> None:
    bus = EventBus("s")

    def always_fails(_: Envelope) -> None:
        raise ValueError("always")

    bus.subscribe(always_fails)
    bus.publish(msg(1))
    kinds = [(e.event.topic, e.event.type) for e in bus.history]
    assert kinds == [("messages", "message"), ("system", "error")]


def test_unknown_topic_is_refused() -> None:
    bus = EventBus("s")
    with pytest.raises(ValueError, match="unknown topic 'chat'"):
        bus.subscribe(lambda e: None, "chat")  # type: ignore[arg-type]


def test_json_records_are_flat_and_round_trip() -> None:
    bus = EventBus("sess-1")
    env = bus.publish(
        StepEvent(
            step_id="ask", speaker="student", execution_order=1, loop_iteration=0, result="success"
        )
    )
    record = json.loads(env.to_json())
    assert list(record)[:5] == ["topic", "type", "seq", "session_id", "ts"]
    assert record["topic"] == "system" and record["type"] == "step" and record["step_id"] == "ask"
    assert Envelope.from_record(record) == env
    chunk = bus.publish(StreamChunk(message_id="m1", sender="a", delta="hi ", output_tokens=1))
    assert Envelope.from_record(json.loads(chunk.to_json())).event == chunk.event


@pytest.mark.anyio
async def test_stream_delivers_in_order_to_async_consumers() -> None:
    bus = EventBus("s")
    with bus.open_stream("messages") as stream:
        for i in range(1, 4):
            bus.publish(msg(i))
        bus.publish(StopEvent(reason="manual"))
        got = [(await stream.receive()).seq for _ in range(3)]
    assert got == [1, 2, 3]


@pytest.mark.anyio
async def test_a_stream_ended_at_the_sessions_end_still_yields_what_it_buffered() -> None:
    bus = EventBus("s")
    with (
        bus.open_stream("messages") as everything,
        bus.open_stream(until=lambda e: isinstance(e.event, StopEvent)) as until_stop,
    ):
        for i in range(1, 4):
            bus.publish(msg(i))
        bus.publish(StopEvent(reason="manual"))
        bus.publish(msg(5))  # after the stop: not for the stream that ended there
        bus.end_streams()
        bus.publish(msg(6))  # after the end: for no stream
        got = [e.seq async for e in everything]
        stopped = [e.seq async for e in until_stop]
    assert got == [1, 2, 3, 5]
    assert stopped == [1, 2, 3, 4]
