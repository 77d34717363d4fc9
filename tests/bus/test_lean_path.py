"""The lean event path (issue 18): events built without validation, JSON lines written
without pydantic, one clock read per burst of chunks, the JSON sink flushed per burst.
Each must be invisible in what a user reads: the same lines, byte for byte."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from itertools import count

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from rolecall.bus import (
    ConditionEvent,
    Envelope,
    EventBus,
    MessageEvent,
    SessionEvent,
    StepEvent,
    StreamChunk,
    StreamEnd,
    StreamStart,
    Subscription,
)
from rolecall.cli.display import JsonSink

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))  # any valid text
WHEN = st.datetimes(timezones=st.just(UTC))
PYDANTIC_TIME = TypeAdapter(datetime)


def pydantic_line(envelope: Envelope) -> str:
    """The line as pydantic itself writes the event (what --json printed before)."""
    event = envelope.event
    payload = event.__pydantic_serializer__.to_json(event, exclude={"topic", "type"}).decode()
    head = (
        f'{{"topic":"{event.topic}","type":"{event.type}","seq":{envelope.seq},'
        f'"session_id":{json.dumps(envelope.session_id)},'
        f'"ts":{PYDANTIC_TIME.dump_json(envelope.ts).decode()}'
    )
    return head + ("}" if payload == "{}" else "," + payload[1:])


@settings(max_examples=300, deadline=None)
@given(
    TEXT,
    TEXT,
    st.integers(-(10**18), 10**18),
    st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    st.lists(TEXT, max_size=3),
    WHEN,
    WHEN,
)
def test_every_line_is_byte_for_byte_what_pydantic_writes(
    text: str,
    name: str,
    number: int,
    cost: float | None,
    mentions: list[str],
    started: datetime,
    ts: datetime,
) -> None:
    events = [
        StreamChunk.of(name, name, text, number),
        StreamStart.trusted(message_id=name, sender=name, reply_to=None, loop_iteration=number),
        StreamEnd.trusted(message_id=name, sender=name, input_tokens=number, output_tokens=1),
        MessageEvent.trusted(
            message_id=name, sender=name, content=text, mentions=mentions, cost_usd=cost
        ),
        StepEvent.trusted(
            step_id=name,
            speaker=name,
            execution_order=number,
            loop_iteration=0,
            result="success",
            started_at=started,
            ended_at=ts,
        ),
        ConditionEvent.trusted(condition=text, result=number > 0, detail=name),
    ]
    for event in events:
        envelope = Envelope(7, "s-1", ts, event)
        assert envelope.to_json() == pydantic_line(envelope)


def test_trusted_events_equal_validated_ones_and_names_are_checked() -> None:
    made = MessageEvent.trusted(message_id="m1", sender="alice", content="hi")
    assert made == MessageEvent(message_id="m1", sender="alice", content="hi")
    assert (
        made.mentions == []
        and made.mentions
        is not MessageEvent.trusted(message_id="m2", sender="a", content="x").mentions
    )  # a default factory gives each event its own list
    assert StreamChunk.of("m1", "a", "x ", 1) == StreamChunk(
        message_id="m1", sender="a", delta="x ", output_tokens=1
    )
    with pytest.raises(TypeError, match="missing field 'content'"):
        MessageEvent.trusted(message_id="m1", sender="alice")
    with pytest.raises(TypeError, match="unknown field 'text'"):
        MessageEvent.trusted(message_id="m1", sender="alice", content="hi", text="x")


def ticking_clock() -> tuple[list[datetime], object]:
    start = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    ticks = count()
    reads: list[datetime] = []

    def clock() -> datetime:
        reads.append(start + timedelta(microseconds=next(ticks)))
        return reads[-1]

    return reads, clock


def publish_turn(bus: EventBus, message_id: str, words: int) -> None:
    bus.publish(StreamStart.trusted(message_id=message_id, sender="a"))
    for i in range(words):
        bus.publish(StreamChunk.of(message_id, "a", f"w{i} ", i + 1))
    bus.publish(
        StreamEnd.trusted(message_id=message_id, sender="a", input_tokens=1, output_tokens=1)
    )


@pytest.mark.anyio
async def test_a_burst_of_chunks_reads_the_clock_once_and_times_never_go_back() -> None:
    reads, clock = ticking_clock()
    bus = EventBus("s", clock=clock)  # type: ignore[arg-type]
    publish_turn(bus, "m1", 5)
    publish_turn(bus, "m2", 5)  # no await between: still a new burst after m1's end
    await anyio.lowlevel.checkpoint()
    publish_turn(bus, "m3", 3)
    stamps = [e.ts for e in bus.history]
    assert stamps == sorted(stamps)
    chunk_times = {
        mid: {e.ts for e in bus.history if e.type == "chunk" and e.event.message_id == mid}  # type: ignore[union-attr]
        for mid in ("m1", "m2", "m3")
    }
    assert all(len(times) == 1 for times in chunk_times.values())
    assert len(set().union(*chunk_times.values())) == 3
    assert len(reads) == 3 * 3  # start, one for the chunks, end: per turn


def test_without_an_event_loop_every_chunk_reads_the_clock() -> None:
    reads, clock = ticking_clock()
    bus = EventBus("s", clock=clock)  # type: ignore[arg-type]
    publish_turn(bus, "m1", 4)
    assert len(reads) == 6
    assert len({e.ts for e in bus.history}) == 6


def test_one_handler_subscribed_twice_is_called_twice_and_closes_apart() -> None:
    bus = EventBus("s")
    seen: list[int] = []
    handler = seen.append  # one bound method object for both subscriptions
    one = bus.subscribe(lambda e: handler(e.seq), "messages")
    two = bus.subscribe(handler, "messages")  # type: ignore[arg-type]
    three = bus.subscribe(handler, "messages")  # type: ignore[arg-type]
    bus.publish(MessageEvent(message_id="m1", sender="h", content="x"))
    assert len(seen) == 3
    two.close()
    bus.publish(MessageEvent(message_id="m2", sender="h", content="x"))
    assert len(seen) == 5
    one.close()
    three.close()
    bus.publish(MessageEvent(message_id="m3", sender="h", content="x"))
    assert len(seen) == 5


def test_subscriptions_changed_during_a_delivery_count_from_the_next_event() -> None:
    """The bus calls each topic's handlers from a kept list: a subscription opened or
    closed by a handler takes effect from the next event on, as with pyee's emit."""
    bus = EventBus("s")
    late: list[str] = []
    early: list[str] = []
    subs: dict[str, Subscription] = {}

    def opener(e: Envelope) -> None:
        if e.seq == 1:
            subs["late"] = bus.subscribe(lambda x: late.append(x.event.message_id), "messages")
        if e.seq == 2:
            subs["early"].close()

    bus.subscribe(opener, "messages")
    subs["early"] = bus.subscribe(lambda x: early.append(x.event.message_id), "messages")
    for mid in ("m1", "m2", "m3"):
        bus.publish(MessageEvent(message_id=mid, sender="h", content="x"))
    assert early == ["m1", "m2"]  # closed while m2 was delivered: m2 still reached it
    assert late == ["m2", "m3"]  # opened while m1 was delivered: from m2 on
    subs["late"].close()
    bus.publish(MessageEvent(message_id="m4", sender="h", content="x"))
    assert late == ["m2", "m3"]


def test_a_handler_on_two_topics_fails_under_each_subscriptions_own_name() -> None:
    bus = EventBus("s")
    errors: list[str] = []

    def boom(_: Envelope) -> None:
        raise RuntimeError("bug")

    bus.subscribe(boom, "messages", name="on-messages")
    on_world = bus.subscribe(boom, "world", name="on-world")
    bus.subscribe(lambda e: errors.append(e.event.source), "system")  # type: ignore[union-attr]
    bus.publish(MessageEvent(message_id="m1", sender="h", content="x"))
    bus.publish(SessionEvent(state="running"))
    on_world.close()
    bus.publish(MessageEvent(message_id="m2", sender="h", content="x"))
    assert errors == ["subscriber:on-messages", "subscriber:on-world", "subscriber:on-messages"]


class CountingOut(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[int] = []  # lines written at each flush

    def flush(self) -> None:
        self.flushes.append(self.getvalue().count("\n"))
        super().flush()


@pytest.mark.anyio
async def test_the_json_sink_flushes_each_burst_once_and_a_sessions_state_at_once() -> None:
    out = CountingOut()
    bus = EventBus("s")
    JsonSink(out).attach(bus)
    publish_turn(bus, "m1", 10)  # 12 lines, no flush yet: the loop has not idled
    assert out.flushes == []
    await anyio.sleep(0.01)  # the loop idles (trio runs its soon-callbacks on a later pass)
    assert out.flushes == [12]
    publish_turn(bus, "m2", 2)
    bus.publish(SessionEvent(state="finished"))  # the end is written out at once
    assert out.flushes == [12, 17]
    await anyio.sleep(0.01)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, 18))


def test_the_json_sink_without_an_event_loop_flushes_every_line() -> None:
    out = CountingOut()
    bus = EventBus("s")
    JsonSink(out).attach(bus)
    publish_turn(bus, "m1", 2)
    assert out.flushes == [1, 2, 3, 4]
