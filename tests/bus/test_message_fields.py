"""A message's fields are defined once (``rolecall.message_fields.MessageFields``): the
transcript keeps them and the ``messages/message`` event publishes them, its JSON line
byte for byte what events.md and the stored sessions had before."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rolecall.bus import Envelope, MessageEvent
from rolecall.message_fields import MESSAGE_FIELDS, MessageFields
from rolecall.session.state import TranscriptMessage

TS = datetime(2026, 12, 7, 18, 0, 1, 123456, tzinfo=UTC)

FULL: dict[str, Any] = {
    "id": "m2",
    "sender": "ann",
    "kind": "agent",
    "content": 'x "q" é',
    "reply_to": "m1",
    "target": "human",
    "step_id": "s1",
    "loop_iteration": 2,
    "turn": 1,
    "input_tokens": 10,
    "output_tokens": 5,
    "cost_usd": 0.25,
    "ts": TS,
    "seconds": 1.5,
    "tool_calls": ["c1", "c2"],
    "audience": ["bob"],
    "finish_reason": "length",
}
# the line of FULL's event as --json printed it before the fields were shared
FULL_LINE = (
    '{"topic":"messages","type":"message","seq":7,"session_id":"sess",'
    '"ts":"2026-12-07T18:00:01.123456Z","message_id":"m2","sender":"ann",'
    '"content":"x \\"q\\" é","reply_to":"m1","target":"human","mentions":[],'
    '"step_id":"s1","loop_iteration":2,"turn":1,"input_tokens":10,"output_tokens":5,'
    '"cost_usd":0.25,"tool_calls":["c1","c2"],"audience":["bob"],"finish_reason":"length"}'
)
# a reply with structured data (pydantic writes that line, not the fast path)
DATA_LINE = (
    '{"topic":"messages","type":"message","seq":7,"session_id":"sess",'
    '"ts":"2026-12-07T18:00:01.123456Z","message_id":"m3","sender":"bob","content":"{}",'
    '"reply_to":null,"target":null,"mentions":[],"step_id":null,"loop_iteration":null,'
    '"turn":2,"input_tokens":0,"output_tokens":0,"cost_usd":1e-7,"data":{"a":[1,2],"b":null}}'
)


def line(message: TranscriptMessage) -> str:
    return Envelope(7, "sess", TS, MessageEvent.of(message.id, message)).to_json()


def test_the_message_and_its_event_share_one_set_of_fields() -> None:
    own_to_message = {"id", "kind", "ts", "seconds"}
    own_to_event = {"topic", "type", "message_id"}
    assert set(TranscriptMessage.model_fields) - own_to_message == set(MESSAGE_FIELDS)
    assert set(MessageEvent.model_fields) - own_to_event == set(MESSAGE_FIELDS)
    assert issubclass(TranscriptMessage, MessageFields) and issubclass(MessageEvent, MessageFields)
    message = TranscriptMessage(**FULL, mentions=["bob"], data={"k": 1}, data_error="late")
    event = MessageEvent.of(message.id, message)
    assert event.message_id == "m2"
    assert {n: getattr(event, n) for n in MESSAGE_FIELDS} == {
        n: getattr(message, n) for n in MESSAGE_FIELDS
    }
    assert event == MessageEvent(message_id="m2", **message.model_dump(include=set(MESSAGE_FIELDS)))


def test_the_event_line_is_the_one_published_before() -> None:
    full = TranscriptMessage(**FULL)
    assert line(full) == FULL_LINE
    with_data = TranscriptMessage(
        id="m3", sender="bob", kind="agent", content="{}", turn=2, cost_usd=1e-7, ts=TS,
        data={"a": [1, 2], "b": None},
    )  # fmt: skip
    assert line(with_data) == DATA_LINE
    # read back from its record (a stored event), it is the same event
    envelope = Envelope(7, "sess", TS, MessageEvent.of(full.id, full))
    assert Envelope.from_record(envelope.to_record()).event == envelope.event


def test_a_stored_message_reads_back_as_it_was() -> None:
    message = TranscriptMessage(**FULL)
    text = message.model_dump_json()
    assert text.startswith('{"id":"m2","kind":"agent","sender":"ann",')
    assert TranscriptMessage.model_validate_json(text) == message
    older = (  # the key order messages were stored in before: read the same
        '{"id":"m2","sender":"ann","kind":"agent","content":"x","reply_to":null,'
        '"target":null,"mentions":[],"step_id":null,"loop_iteration":null,"turn":1,'
        '"input_tokens":0,"output_tokens":0,"cost_usd":null,'
        '"ts":"2026-12-07T18:00:01.123456Z","seconds":0.0}'
    )
    assert TranscriptMessage.model_validate_json(older) == TranscriptMessage(
        id="m2", sender="ann", kind="agent", content="x", turn=1, ts=TS
    )
