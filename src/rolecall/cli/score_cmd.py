"""``rolecall score``: a judge scores stored sessions after the fact (docs/compare.md)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rolecall.cli.flags import add_replay_flags, model_name
from rolecall.cli.manage.common import (
    add_manage_flags,
    resolve_session_id,
    with_store,
)
from rolecall.cli.registry import add_command, summary

if TYPE_CHECKING:
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.scores import StoredScore


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "score",
        help=summary("score"),
        description="Ask a judge to score stored sessions on its criteria. The scores are "
        "stored beside each session (its transcript is never changed); scoring again keeps "
        "every scoring, each with its judge and time.",
        examples=[
            "rolecall score last --judge offline",
            "rolecall score 20261122-101500-a1b2c3 20261122-101731-d4e5f6 --judge courtroom",
            "rolecall score last --judge judge --model openai/gpt-4o-mini --record",
        ],
    )
    p.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids or prefixes")
    p.add_argument(
        "--judge",
        required=True,
        metavar="JUDGE",
        help="`offline` (deterministic, no key), a world with a judge role (folder, "
        "world.yaml or name), or a role of the library",
    )
    p.add_argument("--model", type=model_name, help="run the judge on this model")
    p.add_argument("--json", action="store_true", help="print each scoring as a JSON line")
    add_replay_flags(p)
    add_manage_flags(p)


def cmd_score(args: argparse.Namespace) -> int:
    from rolecall.cli.manage.common import data_dir_of
    from rolecall.cli.options import SessionOptions
    from rolecall.cli.wiring import replay_setup
    from rolecall.llm.registry import ModelRegistry
    from rolecall.scoring.judges import resolve
    from rolecall.world.library import RoleLibrary

    opts = SessionOptions.of(args)  # the common flags; its own (JUDGE, SESSION...) below
    library = RoleLibrary(data_dir_of(opts) / "roles")
    judge = resolve(args.judge, model=opts.model, library=library)
    ids = [resolve_session_id(s, opts) for s in args.sessions]
    models = ModelRegistry(replay=replay_setup(opts, judge.world))

    async def body(store: DataStore) -> list[StoredScore]:
        from datetime import UTC, datetime

        from rolecall.scoring.score import score_session
        from rolecall.storage.data_store import sqlite_only
        from rolecall.storage.scores import ScoreTable

        table = ScoreTable(sqlite_only(store, "rolecall score"))
        docs = [await store.load(sid, with_events=False) for sid in ids]  # all found first
        done: list[StoredScore] = []
        for doc in docs:
            verdict = await score_session(judge, doc, models)
            done.append(
                await table.add(
                    doc.session_id,
                    judge=judge.label,
                    model=judge.model,
                    scored_at=datetime.now(UTC).isoformat(),
                    scores=verdict.scores,
                    comment=verdict.comment,
                )
            )
        return done

    stored = with_store(opts, body, missing=f"no session '{ids[0]}'", read_only=False)
    for item in stored:
        if args.json:
            record: dict[str, Any] = {"session_id": item.session_id, **item.record()}
            print(json.dumps(record, ensure_ascii=False))
        elif args.quiet:
            print(f"{item.session_id} {json.dumps(item.scores)}")
        else:
            print(f"{item.session_id} #{item.number} {item.short()}  ({item.model})")
            if item.comment:
                print(f"  {item.comment}")
    return 0
