"""A small MCP server of notes, built with the official ``mcp`` SDK (tools.md).

    python -m rolecall.examples.mcp_notes                 # stdio (what a world's command runs)
    python -m rolecall.examples.mcp_notes --http 8931     # streamable HTTP on 127.0.0.1:8931/mcp

Its tools: ``search`` (notes sharing words with a query, best first),
``read`` (one note by title), ``add`` (a new note) and ``list`` (the titles). It starts
with a few notes on the research desk's topic; ``--file notes.json`` keeps them in a
JSON file instead (read at start, written at every ``add``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

SEED: dict[str, str] = {
    "honeybees": (
        "A honeybee colony keeps its brood at about 35 degrees C; workers cluster and "
        "shiver their flight muscles to make heat in winter."
    ),
    "waggle dance": (
        "Foragers tell nest mates where food is with the waggle dance: the angle of the "
        "run to vertical is the angle to the sun, its length the distance."
    ),
    "colony collapse": (
        "Colony losses are linked to varroa mites and the viruses they carry, to poor "
        "forage and to some pesticides; no single cause explains them."
    ),
}


def build(notes: dict[str, str], file: Path | None = None) -> MCPServer:
    """The server, its tools reading and writing ``notes``."""
    server = MCPServer("notes", instructions="Notes to look things up in and add to.")

    def save() -> None:
        if file is not None:
            file.write_text(json.dumps(notes, indent=2, ensure_ascii=False), encoding="utf-8")

    @server.tool()
    def search(query: str) -> str:
        """Notes sharing words (of four letters or more) with the query, best first."""
        words = {w for w in re.findall(r"[a-z]{4,}", query.lower())}
        scored = []
        for title, text in notes.items():
            have = set(re.findall(r"[a-z]{4,}", f"{title} {text}".lower()))
            if words & have:
                scored.append((-len(words & have), title, text))
        found = [f"{title}: {text}" for _, title, text in sorted(scored)]
        return "\n".join(found) if found else f"no note matches {query!r}"

    @server.tool()
    def read(title: str) -> str:
        """The text of the note with this title."""
        if title not in notes:
            raise ToolError(f"no note titled {title!r} (notes: {', '.join(sorted(notes))})")
        return notes[title]

    @server.tool()
    def add(title: str, text: str) -> str:
        """Add a note (or replace the one with this title)."""
        notes[title] = text
        save()
        return f"saved note {title!r} ({len(notes)} notes)"

    @server.tool(name="list")
    def list_titles() -> str:
        """The titles of every note, one per line."""
        return "\n".join(sorted(notes))

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rolecall.examples.mcp_notes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP here")
    parser.add_argument("--file", type=Path, help="keep the notes in this JSON file")
    args = parser.parse_args(argv)
    notes = dict(SEED)
    if args.file is not None and args.file.exists():
        notes = json.loads(args.file.read_text(encoding="utf-8"))
    server = build(notes, args.file)
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
