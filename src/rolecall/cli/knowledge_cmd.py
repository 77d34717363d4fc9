"""``rolecall knowledge index|search|list WORLD``: a world's knowledge collections
(knowledge.md), indexed in the data directory's ``knowledge.db``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rolecall.cli.flags import add_common_flags, at_least_one
from rolecall.cli.options import Options
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.knowledge.base import KnowledgeBase
    from rolecall.world.models import World

_WORLD_HELP = "a folder, a world.yaml path, or a name under ./worlds/"


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeOptions(Options):
    """``rolecall knowledge ACTION WORLD``."""

    knowledge_command: str  # index, search, list
    world: str  # WORLD
    query: str = ""  # search QUERY
    role: str | None = None  # search --role
    top_k: int | None = None  # search --top-k


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    knowledge = add_command(
        sub,
        "knowledge",
        description=(
            "A world's knowledge collections (its knowledge: block): index them, search them "
            "as a role's turn would, list what is indexed. Indexing reads again only the "
            "files whose content changed."
        ),
        examples=[
            "rolecall knowledge index library",
            "rolecall knowledge search library 'why are leaves green' --role botanist",
            "rolecall knowledge list library",
        ],
    )
    ksub = knowledge.add_subparsers(dest="knowledge_command", metavar="ACTION", required=True)
    index = add_command(
        ksub,
        "index",
        help="index the world's collections (only files whose content changed)",
        examples=[
            "rolecall knowledge index library",
        ],
    )
    index.add_argument("world", metavar="WORLD", help=_WORLD_HELP)
    add_common_flags(index, run_flags=False, data_dir_help="the data directory (its index)")
    search = add_command(
        ksub,
        "search",
        help="the passages a query finds, best first (BM25)",
        examples=[
            "rolecall knowledge search library chlorophyll",
            "rolecall knowledge search library 'root hairs' --role botanist --json",
        ],
    )
    search.add_argument("world", metavar="WORLD", help=_WORLD_HELP)
    search.add_argument("query", metavar="QUERY", help="free text, as a message would say it")
    search.add_argument(
        "--role", metavar="R", help="search R's collections, its knowledge_top_k passages"
    )
    search.add_argument(
        "--top-k",
        type=lambda v: at_least_one(int(v), "--top-k"),
        metavar="N",
        help="passages to show (default: the role's knowledge_top_k, else 4)",
    )
    search.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_common_flags(search, run_flags=False, data_dir_help="the data directory (its index)")
    listing = add_command(
        ksub,
        "list",
        help="each collection's files: passages, size, when indexed; the roles using it",
        examples=[
            "rolecall knowledge list library",
        ],
    )
    listing.add_argument("world", metavar="WORLD", help=_WORLD_HELP)
    add_common_flags(listing, run_flags=False, data_dir_help="the data directory (its index)")


def open_base(opts: Options, world: World) -> KnowledgeBase:
    from rolecall.knowledge.base import KnowledgeBase
    from rolecall.paths import data_dir, knowledge_path
    from rolecall.world.folders import world_folder

    if not world.knowledge:
        raise UsageError(
            f"world {world.name} has no knowledge collections (add a knowledge: block; "
            "see docs/knowledge.md)"
        )
    db = knowledge_path(data_dir(opts.data_dir))
    return KnowledgeBase.open(world, db, world_folder(world))


def cmd_knowledge(args: argparse.Namespace) -> int:
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    opts = KnowledgeOptions.of(args)
    world = load_world(opts.world, role_library(opts)).world
    started = time.perf_counter()
    with open_base(opts, world) as kb:
        if opts.knowledge_command == "index":
            return _index(kb, time.perf_counter() - started)
        if opts.knowledge_command == "search":
            return _search(opts, world, kb)
        return _list(world, kb)


def _index(kb: KnowledgeBase, seconds: float) -> int:
    report = kb.report
    for name, files in kb.files.items():
        passages = sum(d.passages for d in kb.index.docs(str(p) for p in files).values())
        print(f"{name}: {_n(len(files), 'file')}, {_n(passages, 'passage')}")
    print(
        f"indexed {_n(len(report.indexed), 'file')} ({report.bytes_read:,} bytes, "
        f"{_n(report.passages, 'passage')}), {len(report.unchanged)} unchanged, "
        f"in {seconds:.2f} s → {kb.index.path}"
    )
    return 0


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _search(opts: KnowledgeOptions, world: World, kb: KnowledgeBase) -> int:
    from rolecall.errors import UnknownRoleError

    collections = kb.collections
    top_k = 4
    if opts.role is not None:
        try:
            role = world.role(opts.role)
        except KeyError:
            raise UnknownRoleError(
                f"no role '{opts.role}' in world {world.name} (roles: "
                + ", ".join(world.role_ids)
                + ")"
            ) from None
        if not role.knowledge:
            raise UsageError(f"role '{role.id}' has no knowledge: collections to search")
        collections, top_k = role.knowledge, role.knowledge_top_k
    found = kb.search(collections, opts.query, opts.top_k or top_k)
    if opts.json:
        out = {
            "query": opts.query,
            "collections": collections,
            "passages": [
                {
                    "id": f"k{i}",
                    "path": p.path,
                    "line_start": p.line_start,
                    "line_end": p.line_end,
                    "score": p.score,
                    "collection": p.collection,
                    "heading": p.heading,
                    "text": p.text,
                }
                for i, p in enumerate(found, start=1)
            ],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    if not found:
        from rolecall.cli.exits import EXIT_FAILURE

        print(f"no passage of {', '.join(collections)} matches {opts.query!r}", file=sys.stderr)
        return EXIT_FAILURE
    for i, p in enumerate(found, start=1):
        title = f" ({p.heading})" if p.heading else ""
        print(f"[k{i}] {p.source}{title} · score {p.score:.3f}")
        text = " ".join(p.text.split())
        print(f"     {text[:240]}{'…' if len(text) > 240 else ''}")
    return 0


def _list(world: World, kb: KnowledgeBase) -> int:
    for name, files in kb.files.items():
        users = [r.id for r in world.roles if name in r.knowledge] or ["no role"]
        print(f"{name} (used by {', '.join(users)})")
        docs = kb.index.docs(str(p) for p in files)
        for path in files:
            doc = docs.get(str(path))
            if doc is None:
                continue
            print(
                f"  {kb.shown(doc.path):40} {doc.passages:>5} "
                f"{'passage ' if doc.passages == 1 else 'passages'} {doc.size:>10,} bytes  "
                f"indexed {doc.indexed_at}  sha256 {doc.sha256[:12]}"
            )
    return 0
