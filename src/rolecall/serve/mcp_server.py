"""``rolecall serve --mcp``: rolecall as an MCP server (docs/compare.md), built on the
official ``mcp`` SDK's server (``MCPServer``), over stdio or streamable HTTP.

Its tools: ``list_worlds``, ``start_session(world, topic?, max_turns?)`` (runs the
session to its stop), ``say(session_id, text)`` (a human message to a chat session; the
replies), ``read_session(session_id, after?)``, and one per preset: ``debate(topic,
max_turns?)``, ``consensus(topic, max_rounds?, profile?)``. Every session is opened with
the public opener (``rolecall.api.entry.open_served``) and stored in the data directory
like any other, so ``rolecall sessions list`` shows it and ``resume`` continues it.

Nothing waits for a person: a tool call of a served world that needs approval
(``approve: ask``) is refused with a reason naming ``--approve auto``, unless the server
was started with it. A bad argument (an unknown world, a session that does not exist) is
the tool's error, naming the problem; the server goes on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from rolecall.api.entry import load_world, open_served
from rolecall.api.session import Session
from rolecall.errors import RolecallError, UsageError
from rolecall.log import get_logger
from rolecall.session.state import TranscriptMessage
from rolecall.storage.data_store import has_store, open_data_store
from rolecall.tools.approval import Approver, Decision, PendingCall, flag_approver
from rolecall.world.catalog import available
from rolecall.world.models import World

log = get_logger(__name__)

T = TypeVar("T")

INSTRUCTIONS = (
    "rolecall runs multi-role LLM dialogues. list_worlds names the worlds; start_session "
    "runs one to its stop and returns its transcript; debate and consensus run a preset on "
    "a topic; say talks to a chat session; read_session reads any stored session."
)


def refuse_asks() -> Approver:
    """The approver of a server started without ``--approve auto``: every ``ask`` call is
    refused at once, saying how to allow it (nothing waits for an answer)."""

    async def answer(call: PendingCall) -> Decision:
        return Decision(
            "deny",
            "rolecall serve",
            f"{call.tool} needs approval (approve: ask) and a served session has no person "
            "to ask; start the server with `rolecall serve --mcp --approve auto` to allow it",
        )

    return answer


def _message(m: TranscriptMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"id": m.id, "sender": m.sender, "kind": m.kind, "content": m.content}
    if m.reply_to is not None:
        out["reply_to"] = m.reply_to
    return out


def _summary_line(data: dict[str, Any]) -> str:
    state = data.get("state")
    stop = data.get("stop_reason")
    shown = f"{state} ({stop})" if stop else str(state)
    return f"session {data['session_id']}: {shown}, {len(data['transcript'])} messages"


def _result(data: dict[str, Any]) -> CallToolResult:
    """A tool's answer: a readable first line, the data as JSON text and as structured
    content."""
    text = _summary_line(data) + "\n" + json.dumps(data, ensure_ascii=False, indent=2)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


@dataclass
class Served:
    """What the tools do, on one data directory (one store per call)."""

    data_dir: Path
    approve: Literal["auto"] | None = None
    local: Path | None = None  # the folder of local worlds (default ./worlds)

    @property
    def approver(self) -> Approver:
        return flag_approver("auto") if self.approve == "auto" else refuse_asks()

    def worlds(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for entry in available(self.local):
            try:
                world = load_world(entry.path, data_dir=self.data_dir)
            except RolecallError as exc:  # listed, with why it cannot run
                out.append({"name": entry.name, "source": entry.source, "error": str(exc)})
                continue
            out.append(
                {
                    "name": entry.name,
                    "title": world.title,
                    "description": world.description,
                    "topic": world.topic,
                    "chat": world.flow is None,
                    "roles": list(world.role_ids),
                    "source": entry.source,
                }
            )
        return out

    def world(self, spec: str | dict[str, Any], topic: str | None, max_turns: int | None) -> World:
        if isinstance(spec, str) and not spec.strip():
            raise UsageError("world is empty: give a world's name (list_worlds) or path")
        world = load_world(spec, data_dir=self.data_dir)
        update: dict[str, Any] = {}
        if topic is not None:
            if not topic.strip():
                raise UsageError("topic is empty: give the topic's text (or leave it out)")
            update["topic"] = topic
        if max_turns is not None:
            if max_turns < 1:
                raise UsageError(f"max_turns must be at least 1, got {max_turns}")
            update["settings"] = world.settings.model_copy(update={"max_turns": max_turns})
        return world.model_copy(update=update) if update else world

    async def start(self, world: World) -> dict[str, Any]:
        """Run a new session of ``world`` to its stop (a chat world: what is due)."""
        async with open_served(world, data_dir=self.data_dir, approver=self.approver) as session:
            await session.run()
            return self._state(session, session.transcript)

    async def say(self, session_id: str, text: str) -> dict[str, Any]:
        """A human message to a stored chat session; the transcript from it on."""
        if not text.strip():
            raise UsageError("text is empty: say something")
        sid = await self._resolve(session_id)
        async with open_served(
            None, session=sid, data_dir=self.data_dir, approver=self.approver
        ) as session:
            if not session.chat:
                raise UsageError(
                    f"session {sid} is a flow ({session.world.name}), not a chat: say talks "
                    "to chat worlds; read_session reads this one"
                )
            said = await session.say(text)
            await session.run()
            transcript = session.transcript
            start = next(i for i, m in enumerate(transcript) if m.id == said.id)
            return self._state(session, transcript[start:])

    async def read(self, session_id: str, after: str | None) -> dict[str, Any]:
        sid = await self._resolve(session_id)
        async with open_data_store(self.data_dir, read_only=True) as store:
            doc = await store.load(sid, with_events=False)
        messages = doc.messages
        if after is not None:
            ids = [m.id for m in messages]
            if after not in ids:
                raise UsageError(
                    f"session {sid} has no message '{after}' (its messages: "
                    f"{ids[0] if ids else 'none'}..{ids[-1] if ids else ''})"
                )
            messages = messages[ids.index(after) + 1 :]
        return {
            "session_id": sid,
            "world": doc.world.get("name", ""),
            "state": doc.state.state,
            "stop_reason": doc.state.stop_reason,
            "transcript": [_message(m) for m in messages],
        }

    async def _resolve(self, session_id: str) -> str:
        if not has_store(self.data_dir):
            raise UsageError(f"no session '{session_id}': nothing is stored in {self.data_dir} yet")
        async with open_data_store(self.data_dir, read_only=True) as store:
            sid = await store.resolve_id(session_id)
            if not await store.has(sid):
                await store.load(sid, with_events=False)  # the error naming it
        return sid

    def _state(self, session: Session, messages: list[TranscriptMessage]) -> dict[str, Any]:
        result = session.result
        return {
            "session_id": session.session_id,
            "world": session.world.name,
            "state": result.state,
            "stop_reason": result.stop_reason,
            "stop_detail": result.stop_detail,
            "transcript": [_message(m) for m in messages],
        }


async def _tool(body: Callable[[], Awaitable[T]]) -> T:
    """A tool's body: rolecall's errors become the tool's error (the server goes on)."""
    try:
        return await body()
    except RolecallError as exc:
        raise ToolError(str(exc)) from None


def build(served: Served) -> MCPServer:
    """The MCP server and its tools."""
    server: MCPServer = MCPServer("rolecall", instructions=INSTRUCTIONS)

    @server.tool()
    async def list_worlds() -> CallToolResult:
        """The worlds that can be run: name, title, topic, roles, and whether it is a chat."""
        worlds = served.worlds()
        data = {"worlds": worlds}
        line = f"{len(worlds)} worlds: {', '.join(w['name'] for w in worlds)}"
        text = line + "\n" + json.dumps(data, ensure_ascii=False, indent=2)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data
        )

    @server.tool()
    async def start_session(
        world: str, topic: str | None = None, max_turns: int | None = None
    ) -> CallToolResult:
        """Run a new session of a world (a name from list_worlds, or a path) to its stop;
        its id, stop reason and transcript. A chat world waits for `say`."""

        async def body() -> dict[str, Any]:
            return await served.start(served.world(world, topic, max_turns))

        return _result(await _tool(body))

    @server.tool()
    async def say(session_id: str, text: str) -> CallToolResult:
        """Say something to a chat session as the human; the message and the replies."""
        return _result(await _tool(lambda: served.say(session_id, text)))

    @server.tool()
    async def read_session(session_id: str, after: str | None = None) -> CallToolResult:
        """A stored session's state and transcript (only the messages after message id
        `after`, e.g. m4, when given)."""
        return _result(await _tool(lambda: served.read(session_id, after)))

    @server.tool()
    async def debate(topic: str, max_turns: int | None = None) -> CallToolResult:
        """A PRO/CON debate on the topic (max_turns debater turns), then a moderator's
        synthesis; the session's id, stop reason and transcript."""
        options: dict[str, Any] = {} if max_turns is None else {"max_turns": max_turns}
        raw = {"name": "debate", "mode": "debate", "topic": topic, "debate": options}

        async def body() -> dict[str, Any]:
            if not topic.strip():
                raise UsageError("topic is empty: give the debate's motion")
            return await served.start(served.world(raw, None, None))

        return _result(await _tool(body))

    @server.tool()
    async def consensus(
        topic: str, max_rounds: int | None = None, profile: str | None = None
    ) -> CallToolResult:
        """Three or more roles seek consensus on the topic (at most max_rounds rounds;
        profile: balanced, technical-review or brainstorm), then a synthesizer sums up."""
        options: dict[str, Any] = {}
        if max_rounds is not None:
            options["max_rounds"] = max_rounds
        if profile is not None:
            options["profile"] = profile
        raw = {"name": "consensus", "mode": "consensus", "topic": topic, "consensus": options}

        async def body() -> dict[str, Any]:
            if not topic.strip():
                raise UsageError("topic is empty: give the question to agree on")
            return await served.start(served.world(raw, None, None))

        return _result(await _tool(body))

    return server


async def serve(served: Served, *, port: int | None = None) -> None:
    """Serve over stdio, or streamable HTTP on 127.0.0.1:``port`` (path ``/mcp``)."""
    server = build(served)
    log.info("mcp_serving", transport="stdio" if port is None else "http", port=port)
    if port is None:
        await server.run_stdio_async()
    else:
        await server.run_streamable_http_async(host="127.0.0.1", port=port)
