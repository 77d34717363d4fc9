"""``rolecall study DOC``: the study preset (modes.md, Study) without writing YAML.

Builds a ``mode: study`` world around DOC (TXT, Markdown or PDF), validates it like a
world file and runs it exactly as ``rolecall run`` runs a world: same display, JSON
stream, step mode, Ctrl-C handling and exit codes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rolecall.cli.options import SessionOptions
from rolecall.cli.registry import add_command

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.world.models import World

EXAMPLES = [
    "rolecall study worlds/study/notes.md                 five roles discuss the notes, offline",
    "rolecall study paper.pdf --json > events.jsonl       the event stream as JSON lines",
    "rolecall study notes.md --delay 2 --lock 5 --max-turns 10",
    "rolecall study notes.md --model openai/gpt-4o-mini   a real model (temperature 0)",
    "rolecall study notes.md --knowledge refs/            the roles cite refs/ as [k1]",
]


def add_parser(sub: Any) -> None:
    """Add the ``study`` subcommand to the ``rolecall`` subparsers ``sub``."""
    from rolecall.cli.flags import add_common_flags

    p = add_command(
        sub,
        "study",
        description=(
            "Study a document (TXT, Markdown or PDF): it is split into units and five roles "
            "(explainer, challenger, summarizer, example_generator, misconception_spotter) "
            "discuss each unit in turn, one turn per role, until every slot has spoken."
        ),
        examples=EXAMPLES,
    )
    p.add_argument("document", metavar="DOC", help="the document: .txt, .md or .pdf")
    p.add_argument(
        "--delay",
        type=int,
        metavar="D",
        help="turns before a reallocation takes effect (2-3, default 3)",
    )
    p.add_argument(
        "--lock",
        type=int,
        metavar="H",
        help="turns a role pushed to the back stays locked (5-10, default 7)",
    )
    p.add_argument(
        "--knowledge",
        action="append",
        metavar="FILE",
        help="reference material (a file or folder of .md, .txt, .pdf, .html) the five roles "
        "answer from beside the document, citing it as [k1]; repeat for more "
        "(docs/knowledge.md)",
    )
    p.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: run to the end; step: one turn per Enter",
    )
    add_common_flags(p)


def study_world(
    document: Path,
    *,
    delay: int | None = None,
    lock: int | None = None,
    knowledge: list[str] | None = None,
) -> dict[str, Any]:
    """The world mapping for studying ``document`` (read here; errors are UsageError)."""
    from rolecall.errors import UsageError
    from rolecall.study.document import DocumentError, read_document

    try:
        doc = read_document(document, name=str(document))
    except DocumentError as exc:
        raise UsageError(str(exc)) from None
    study: dict[str, Any] = {"document": document.name, "text": doc.text}
    if delay is not None:
        study["delay"] = delay
    if lock is not None:
        study["lock"] = lock
    if knowledge:  # relative to where the command runs
        study["knowledge"] = [str(Path(p).absolute()) for p in knowledge]
    return {
        "name": "study",
        "title": f"Study: {document.name}",
        "mode": "study",
        "model": "offline",
        "study": study,
    }


STUDY_YAML = """\
# Study mode (docs/study.md): five roles discuss notes.md unit by unit, one turn each:
# explainer, challenger, summarizer, example_generator, misconception_spotter.
# Replace notes.md with your own document (TXT, Markdown or PDF, inside this folder).
name: {name}
title: Study session
mode: study
model: offline
study:
  document: notes.md   # relative to this folder
  delay: 3             # D: a reallocation takes effect 3 turns after the request (2-3)
  lock: 7              # H: roles pushed back stay at the back for 7 turns (5-10)
  # knowledge: [refs/] # reference material the roles cite as [k1] (docs/knowledge.md)
# roles:               # override any study role by id
#   - id: summarizer
#     model: openai/gpt-4o-mini
"""

STARTER_NOTES = """\
# My study notes

## 1. Introduction

Replace this file with the material you want to study. Each section becomes one or more
units, and five roles discuss every unit in turn.

## 2. Main idea

Write the main idea here, with its reasoning and an example or two. Sections longer than
five paragraphs are split into several units.

## Conclusion

Sum up what matters most; the summarizer leads the discussion of a conclusion.
"""


def new_study_files(name: str) -> dict[str, str]:
    """The files of ``rolecall worlds new NAME --from study``: world.yaml and notes.md."""
    return {"world.yaml": STUDY_YAML.replace("{name}", name), "notes.md": STARTER_NOTES}


@dataclass(frozen=True, slots=True, kw_only=True)
class StudyOptions(SessionOptions):
    """``rolecall study DOC``."""

    document: str  # DOC
    delay: int | None = None  # --delay D
    lock: int | None = None  # --lock H
    knowledge: list[str] | None = None  # --knowledge FILE, repeated


def load_study_world(opts: StudyOptions) -> World:
    """The study world for ``opts.document``, with ``--max-turns``/``--topic`` applied."""
    from rolecall.cli.running import apply_overrides
    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world

    path = Path(opts.document)
    raw = study_world(path, delay=opts.delay, lock=opts.lock, knowledge=opts.knowledge)
    from rolecall.cli.suggest import flags_named

    flags = {"study.delay": "--delay", "study.lock": "--lock", "study.knowledge": "--knowledge"}
    with flags_named(flags):
        loaded = build_world(raw, source=str(path), library=RoleLibrary())
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return apply_overrides(loaded.world, opts)


def run_study(args: argparse.Namespace) -> int:
    """``rolecall study DOC``: run like ``rolecall run`` (stored, displayed, resumable)."""
    import anyio

    from rolecall.cli.running import drive, outcome
    from rolecall.cli.wiring import live_session, open_store

    opts = StudyOptions.of(args)
    world = load_study_world(opts)
    holder: list[Session] = []

    async def main() -> None:
        async with (
            open_store(opts) as store,
            live_session(opts, world, store, world_source=str(Path(opts.document))) as session,
        ):
            holder.append(session)
            await drive(session, opts.mode or "auto")

    anyio.run(main)
    return outcome(holder[0], opts)
