"""The promises every run on the real model keeps, checked against what the server itself
saw and said (the recording proxy), never the model's words: one speaker at a time,
every request capped and every reply within its cap, no stored reply that begins with a
tag or holds another participant's turn, stop and finish reasons, the tokens of the
server's usage. The test modules beside this one use them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.faults import Cli, assert_intact, only_session, stored
from tests.realmodel import events_of, role_names
from tests.realmodel.proxy import RecordingProxy

CAP = 48  # small, to keep the tier fast; the shipped worlds' constraints ask for more
TURNS = "3"
CUTS = {"other_speaker", "repetition"}  # reply hygiene ended the reply
FINISH = {"stop", "length", *CUTS}


def tag_pattern(names: list[str], *, bracketed_only: bool = False) -> re.Pattern[str]:
    """A tag of one of ``names`` at the start of a line, in the forms the contract
    lists (``[id]``, ``[Name]``, ``id:``, ``Name:``, ``**Name:**``, ``Name (id):``,
    ``@id:``), or only the bracketed one."""
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    forms = rf"\[\s*(?:{alt})\s*\]"
    if not bracketed_only:
        forms += rf"|\*\*\s*(?:{alt})\s*:\s*\*\*|@?(?:{alt})(?:\s*\([^)\n]*\))?\s*:"
    return re.compile(rf"^\s*(?:{forms})", re.IGNORECASE | re.MULTILINE)


def check_promises(
    events: list[dict[str, Any]], record: RecordingProxy, world: Path, *, cap: int
) -> list[dict[str, Any]]:
    """The promises every run keeps; returns the agent messages published."""
    import rolecall
    from rolecall.floor.selector import DEFAULT_INSTRUCTIONS

    loaded = rolecall.load_world(world)
    scripted = {r.id for r in loaded.roles if r.model == "scripted"}
    # a selection world's selector calls (its instructions are their system message)
    selector = loaded.settings.selector.instructions.strip() or DEFAULT_INSTRUCTIONS
    # one speaker at a time: no generation starts before the last one ended, and the
    # server never had two requests at once
    open_gen: str | None = None
    for event in events:
        if event["topic"] != "sse":
            continue
        if event["type"] == "start":
            assert open_gen is None, f"{event['message_id']} began while {open_gen} ran"
            open_gen = event["message_id"]
        elif event["type"] == "end":
            assert open_gen == event["message_id"]
            open_gen = None
    assert record.record.most_in_flight == 1
    exchanges = record.record.exchanges
    assert exchanges, "the real model was never asked"
    for exchange in exchanges:
        asked = exchange.body.get("max_tokens") or exchange.body.get("max_completion_tokens")
        assert asked is not None and asked <= cap, f"a request without the cap: {asked}"
        assert exchange.status == 200
        # what the server generated stayed within the cap: its usage when it reports
        # one, else its stream (llama-cpp-python's server sends a delta per token and
        # no usage in a stream: it ignores stream_options.include_usage)
        served = exchange.usage["completion_tokens"] if exchange.usage else exchange.pieces
        assert served <= cap, (served, exchange.text)
    ends = [e for e in events if (e["topic"], e["type"]) == ("sse", "end")]
    messages = [
        e
        for e in events
        if (e["topic"], e["type"]) == ("messages", "message") and e.get("output_tokens")
    ]
    assert ends, "no reply was generated"
    for end in ends:  # every reply within its cap
        assert end["output_tokens"] <= cap
        assert end["finish_reason"] in FINISH, end
    # one request per reply (no shipped world's role calls tools on this model); each
    # reply ends for the server's reason unless the hygiene cut it (then its stream was
    # closed, or the server stopped at one of the stop sequences it was sent), and its
    # tokens are the server's usage when the server reports one
    served_ends = [e for e in ends if e["sender"] not in scripted]
    exchanges = [x for x in exchanges if x.body["messages"][0].get("content") != selector]
    assert len(exchanges) == len(served_ends), (len(exchanges), len(served_ends))
    for end, exchange in zip(served_ends, exchanges, strict=True):
        if end["finish_reason"] in CUTS:
            assert exchange.closed_by_client or exchange.finish_reason == "stop"
            continue
        assert end["finish_reason"] == exchange.finish_reason
        if exchange.usage is not None:
            assert end["output_tokens"] == exchange.usage["completion_tokens"]
            assert end["input_tokens"] == exchange.usage["prompt_tokens"]
    return messages


def check_stored(home: Path, world: Path, *, turns: int | None = None) -> Any:
    s = stored(home, only_session(home))
    assert_intact(s)
    names = role_names(world)
    everyone = [n for forms in names.values() for n in forms]
    for message in s.messages:
        if message["kind"] != "agent":
            continue
        content, sender = message["content"], message["sender"]
        own = tag_pattern(names[sender])
        anyone = tag_pattern(everyone, bracketed_only=True)
        assert not own.match(content) and not anyone.match(content), (
            f"{message['id']} begins with a tag: {content[:80]!r}"
        )
        others = tag_pattern([n for who, forms in names.items() if who != sender for n in forms])
        later = content.split("\n", 1)[1] if "\n" in content else ""
        assert not others.search(later), (
            f"{message['id']} holds another participant's turn: {content[:200]!r}"
        )
    if turns is not None:
        assert sum(1 for m in s.messages if m["kind"] == "agent") <= turns
    return s


def check_stop(events: list[dict[str, Any]], s: Any) -> None:
    """One stop, stored as published, saying which rule decided it; a turn budget
    reached means that many turns."""
    stops = [e for e in events if (e["topic"], e["type"]) == ("world", "stop")]
    assert len(stops) == 1, stops
    assert stops[0]["reason"] and stops[0]["detail"], "a stop says which rule decided it"
    assert s.state == "finished" and s.stop_reason == stops[0]["reason"]
    if s.stop_reason == "max_turns":
        assert sum(1 for m in s.messages if m["kind"] == "agent") == int(TURNS)


def run_world(cli: Cli, world: Path, *args: str, timeout: float = 500) -> list[dict[str, Any]]:
    done = cli.run("run", str(world), "--json", "-q", *args, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cli.refused_connections() == []
    return events_of(done.stdout)
