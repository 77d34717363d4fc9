"""Event timestamps: the ``ts`` of a JSON line is what pydantic writes for that time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from rolecall.bus import Envelope, StreamChunk

PYDANTIC = TypeAdapter(datetime)
ZONES = st.sampled_from(
    [UTC, timezone(timedelta(0), "Z"), timezone(timedelta(hours=2)), timezone(-timedelta(hours=5))]
)


def line_ts(ts: datetime) -> str:
    event = StreamChunk(message_id="m1", sender="a", delta="x", output_tokens=1)
    return str(Envelope(1, "s", ts, event).to_record()["ts"])


@given(st.lists(st.datetimes(timezones=ZONES), min_size=1, max_size=8))
def test_every_timestamp_reads_as_pydantic_writes_it(times: list[datetime]) -> None:
    # several in a row: the text of a second is reused while it lasts, never after
    for ts in times:
        assert line_ts(ts) == PYDANTIC.dump_python(ts, mode="json")


def test_times_within_one_second_and_across_seconds() -> None:
    base = datetime(2026, 11, 22, 4, 59, 59, 999_999, tzinfo=UTC)
    assert line_ts(base) == "2026-11-22T04:59:59.999999Z"
    assert line_ts(base.replace(microsecond=5)) == "2026-11-22T04:59:59.000005Z"
    assert line_ts(base + timedelta(microseconds=1)) == "2026-11-22T05:00:00Z"
    assert line_ts(base.replace(year=2027)) == "2027-11-22T04:59:59.999999Z"
