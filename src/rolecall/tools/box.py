"""The tools of one session (tools.md): started once, listed, called, closed.

:func:`open_toolbox` starts every MCP server of a world in its own task group (the
session's: the composition root enters it around the session) through the official
``mcp`` SDK, imports the Python tools, takes the built-in ones, and checks every role's
``tools:`` patterns against what was listed. Every problem is named at once
(:class:`~rolecall.errors.WorldError`, exit 2). Leaving the block closes every server,
whatever ended it (a failure, Ctrl-C, a cancelled task).

:meth:`ToolBox.call` runs one call: arguments checked against the tool's schema first,
a per-call timeout, the result cut to ``max_tool_result_chars``; whatever goes wrong
(a server that died, a timeout, an exception) is an error result with a one-line
reason, never an exception for the turn.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, get_type_hints

import anyio
from anyio.abc import TaskGroup, TaskStatus

from rolecall.errors import UsageError, WorldError
from rolecall.log import get_logger
from rolecall.redaction import redact, secret_values
from rolecall.tools.builtin import BuiltinTool, ToolFailed, builtins
from rolecall.tools.names import matches
from rolecall.tools.specs import CallOutcome, ToolSpec
from rolecall.world.models import McpServer, Role, World

if TYPE_CHECKING:
    from rolecall.llm.replay import ReplaySetup
    from rolecall.tools.tape import ToolTape

log = get_logger(__name__)

START_TIMEOUT = 30.0  # seconds an MCP server has to start and list its tools


def uses_tools(world: World) -> bool:
    return world.tools is not None or any(r.tools for r in world.roles)


def role_tools(role: Role, specs: dict[str, ToolSpec]) -> list[ToolSpec]:
    """The tools ``role`` may call, in the order its patterns list them."""
    out: dict[str, ToolSpec] = {}
    for pattern in role.tools or ():
        for name, spec in specs.items():
            if matches(pattern, name):
                out.setdefault(name, spec)
    return list(out.values())


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a note saying so."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[cut: the result had {len(text)} characters; {limit} are kept]"


def check_arguments(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit ``schema`` (one line), None when they do."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        validator = jsonschema.Draft202012Validator(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except jsonschema.exceptions.SchemaError as exc:
        return f"the tool's own schema is invalid ({exc.message})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return (
        f"arguments do not match the tool's schema: {where + ': ' if where else ''}{error.message}"
    )


# ------------------------------------------------------------------------ python
def _python_spec(name: str, target: str) -> tuple[ToolSpec, Callable[..., Any]]:
    """Import ``module:function``; its schema from the type hints, its docstring."""
    import importlib
    import inspect

    from pydantic import create_model

    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    if not callable(fn):
        raise TypeError(f"{target} is not callable")
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, default)
    model = create_model(f"{name}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    doc = inspect.getdoc(fn) or ""
    return ToolSpec(name, doc, schema, f"python {target}"), fn


# --------------------------------------------------------------------------- mcp
@dataclass
class _Server:
    """One MCP server's connection, held open by its task until the box closes."""

    name: str
    config: McpServer
    session: Any = None  # mcp.ClientSession once started
    closed: anyio.Event = field(default_factory=anyio.Event)
    dead: str | None = None  # why it stopped, once it did
    errlog: TextIO | None = None
    not_json: int = 0  # lines of its stdout that were not JSON-RPC messages (ignored)

    @property
    def where(self) -> str:
        config = self.config
        if config.url is not None:
            return f"mcp {self.name} ({config.url})"
        return f"mcp {self.name} ({' '.join(config.command or ())})"

    def stderr_tail(self) -> str:
        """The last line the server wrote on its stderr (the capture is closed after:
        the starter reads it once, when the server did not start)."""
        errlog, self.errlog = self.errlog, None
        if errlog is None:
            return ""
        try:
            errlog.seek(0)
            lines = [ln.strip() for ln in errlog.read().splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        finally:
            errlog.close()
        return lines[-1][:300] if lines else ""

    async def on_message(self, message: Any) -> None:
        """The SDK's hand-off of what the server sent that is not an answer: a line of
        its stdout that is not a JSON-RPC message comes as the exception, and is
        ignored, with one warning naming the server (the SDK's own tracebacks of it
        are filtered out, see :class:`_NotJsonFilter`)."""
        if not isinstance(message, Exception):
            return
        self.not_json += 1
        if self.not_json == 1:
            log.warning(
                "mcp_server_stdout_not_json",
                server=self.name,
                detail=(
                    f"MCP server {self.name} wrote a line on its stdout that is not a "
                    "JSON-RPC message (ignored, as any more of them; a server's logs "
                    "belong on its stderr)"
                ),
                line=_bad_line(message),
            )

    def transport(self) -> Any:
        config = self.config
        if config.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(config.url)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command = list(config.command or ())
        if command[0] in ("python", "python3"):  # the Python rolecall runs in (its venv)
            command[0] = sys.executable
        # the server gets the variables the world lists, plus PATH and HOME (and the
        # SDK's own harmless defaults: LOGNAME, SHELL, TERM, USER): never a key
        # and ROLECALL_HOME: a rolecall served as a tool (`rolecall serve --mcp`, the
        # consult world) stores its sessions where its caller's are
        passed = ("PATH", "HOME", "ROLECALL_HOME")
        env = {k: os.environ[k] for k in passed if k in os.environ}
        env.update(config.env)
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        import tempfile  # (imported here: a world without servers never needs it)

        # its stderr, kept to say why it did not start (closed when its task ends)
        self.errlog = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", errors="replace"
        )
        return stdio_client(params, errlog=self.errlog)

    async def run(self, *, task_status: TaskStatus[Any]) -> None:
        """Connect, list the tools (handed to the starter), then hold on until closed.

        Never raises (but cancellation): a failure before the listing is handed over
        as the exception, one after it marks the server dead.
        """
        from mcp import ClientSession

        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + START_TIMEOUT) as scope:
                async with AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self.transport())
                    session = await stack.enter_async_context(
                        ClientSession(read, write, message_handler=self.on_message)
                    )
                    await session.initialize()
                    listed = await session.list_tools()
                    scope.deadline = math.inf
                    self.session = session
                    started = True
                    task_status.started(listed.tools)
                    await self.closed.wait()
            if not started:
                task_status.started(TimeoutError(f"did not answer within {START_TIMEOUT:g} s"))
        except Exception as exc:
            reason = _reason(exc)
            if not started:
                task_status.started(exc)
            else:
                self.dead = reason
                log.info("mcp_server_stopped", server=self.name, error=reason)
        finally:
            self.session = None
            if self.dead is None and not self.closed.is_set():
                self.dead = "it stopped"
            if started and self.errlog is not None:  # else the starter reads it first
                self.errlog.close()
                self.errlog = None


def _bad_line(exc: Exception) -> str:
    """The start of the line of an MCP server's stdout that ``exc`` refused."""
    errors = getattr(exc, "errors", None)
    try:
        found = errors()[0].get("input") if callable(errors) else None
    except (IndexError, TypeError, AttributeError):
        found = None
    text = found if isinstance(found, str) else str(exc).splitlines()[0] if str(exc) else ""
    return text[:200]


class _NotJsonFilter(logging.Filter):
    """Drops the MCP SDK's traceback of a server's stdout line that is not JSON-RPC (tens
    of lines each): :meth:`_Server.on_message` says it once, naming the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "Failed to parse JSONRPC message from server"


logging.getLogger("mcp.client.stdio").addFilter(_NotJsonFilter())


def _reason(exc: BaseException) -> str:
    """One line for an exception (the lone leaf of a group)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _connection_closed(exc: Exception) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.error.code == CONNECTION_CLOSED


def _mcp_text(result: Any) -> str:
    """The text of a CallToolResult: its text blocks, a word for the others."""
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


# ------------------------------------------------------------------------ box
class ToolBox:
    """Every tool of a session, and the means to call them."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.specs: dict[str, ToolSpec] = {}
        self._python: dict[str, Callable[..., Any]] = {}
        self._builtin: dict[str, BuiltinTool] = {}
        self._servers: dict[str, _Server] = {}
        self._tool_server: dict[str, tuple[_Server, str]] = {}  # full name -> (server, tool)
        self.warn: Callable[[str], None] = lambda text: None  # the session publishes them
        self._warned: set[str] = set()
        self.limit = world.settings.max_tool_result_chars
        self.tape: ToolTape | None = None  # --record / --replay (tools/tape.py)
        # what a role is offered, worked out once (tools/turn.py): by role id and patterns
        self.offers: dict[tuple[str, tuple[str, ...]], Any] = {}
        # whether each model may be offered tools, asked once a session (tools/turn.py)
        self.capable: dict[str, bool] = {}
        self._secrets = secret_values(
            *(os.environ.get(n or "") for n in _key_names(world)),
        )

    def for_role(self, role: Role) -> list[ToolSpec]:
        return role_tools(role, self.specs)

    async def _start(self, tg: TaskGroup, problems: list[str]) -> None:
        tools = self.world.tools
        if tools is not None:
            for name, target in tools.python.items():
                try:
                    spec, fn = _python_spec(name, target)
                except Exception as exc:
                    problems.append(
                        f"tools.python.{name}: {target} does not import ({_reason(exc)})"
                    )
                    continue
                self.specs[name] = spec
                self._python[name] = fn
            servers = [_Server(n, c) for n, c in tools.mcp.items()]
            listings: dict[str, Any] = {}

            async def start(server: _Server) -> None:
                listings[server.name] = await tg.start(server.run)

            async with anyio.create_task_group() as starting:
                for server in servers:
                    starting.start_soon(start, server)
            for server in servers:
                listed = listings[server.name]
                if isinstance(listed, BaseException):
                    tail = server.stderr_tail()
                    problems.append(
                        f"tools.mcp.{server.name}: the server did not start ({_reason(listed)})"
                        + (f"; it said: {tail}" if tail else "")
                    )
                    continue
                self._servers[server.name] = server
                for tool in listed:
                    full = f"{server.name}.{tool.name}"
                    self.specs[full] = ToolSpec(
                        full,
                        tool.description or "",
                        dict(tool.input_schema or {"type": "object"}),
                        server.where,
                        server.config.timeout,
                    )
                    self._tool_server[full] = (server, tool.name)
        for name, tool in builtins().items():
            if tool.available(self.world):
                self.specs[name] = ToolSpec(name, tool.description, tool.parameters, "built-in")
                self._builtin[name] = tool
        failed = {n for n in (tools.python if tools else {}) if n not in self.specs}
        failed |= {n for n in (tools.mcp if tools else {}) if n not in self._servers}
        self._check_patterns(problems, failed)

    def _check_patterns(self, problems: list[str], failed: set[str]) -> None:
        """Each role's patterns against the tools listed (those of a tool that did not
        start are left to its own problem)."""
        for i, role in enumerate(self.world.roles):
            for pattern in role.tools or ():
                if any(matches(pattern, name) for name in self.specs):
                    continue
                if any(matches(pattern, n) or matches(pattern, f"{n}.x") for n in failed):
                    continue  # said by the tool that did not start
                problems.append(
                    f"roles[{i}] ({role.id}).tools: {pattern!r} matches no tool "
                    f"(tools: {', '.join(sorted(self.specs)) or 'none'})"
                )
            approve = role.approve
            if isinstance(approve, dict):
                for pattern in approve:
                    if not any(matches(pattern, t) for t in role.tools or ()) and not any(
                        matches(pattern, s.name) for s in self.for_role(role)
                    ):
                        problems.append(
                            f"roles[{i}] ({role.id}).approve: {pattern!r} matches none of "
                            "the role's tools"
                        )

    def _replayed(self, tape: ToolTape, problems: list[str]) -> None:
        """The tools as recorded (no server started, nothing imported)."""
        listed = tape.listing()
        if listed is None:
            raise UsageError(
                f"replay: no recorded tool listing of world {self.world.name} in "
                f"{tape.store.path} (record first with --record or --replay-or-call)"
            )
        self.specs = {s.name: s for s in listed}
        self._check_patterns(problems, set())

    def close(self) -> None:
        for server in self._servers.values():
            server.closed.set()

    def warn_once(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warn(text)

    async def call(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        """Run one call; every failure is an error outcome with a one-line reason.

        Recording, the outcome is kept; replaying, it comes from the recording (a call
        not in it is an error outcome naming it, and a warning)."""
        tape = self.tape
        handle = None
        if tape is not None and tape.mode != "record":
            recorded, handle = tape.find(name, arguments)
            if recorded is not None:
                return recorded
            if tape.replaying:
                miss = tape.miss(name, arguments)
                self.warn(miss)
                return CallOutcome(miss, True)
        started = time.perf_counter()
        outcome = await self._call(name, arguments)
        took = int((time.perf_counter() - started) * 1000)
        content = redact(cut(outcome.content, self.limit), self._secrets)
        done = CallOutcome(content, outcome.is_error, took)
        if tape is not None:
            if handle is None:
                _, handle = tape.find(name, arguments)
            tape.keep(handle, done)
        return done

    async def _call(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        spec = self.specs.get(name)
        if spec is None:
            return CallOutcome(f"no tool {name}", True)
        problem = check_arguments(spec.parameters, arguments)
        if problem is not None:
            return CallOutcome(f"refused: {problem}", True)
        try:
            with anyio.fail_after(spec.timeout):
                if name in self._python:
                    return await self._call_python(self._python[name], arguments)
                if name in self._builtin:
                    return CallOutcome(await self._builtin[name].call(self.world, arguments))
                server, tool = self._tool_server[name]
                return await self._call_mcp(server, tool, arguments, limit=spec.timeout)
        except TimeoutError:
            return CallOutcome(f"timed out after {spec.timeout:g} s", True)
        except ToolFailed as exc:
            return CallOutcome(str(exc) or "failed", True)
        except Exception as exc:
            return CallOutcome(f"failed: {_reason(exc)}", True)

    async def _call_python(self, fn: Callable[..., Any], arguments: dict[str, Any]) -> CallOutcome:
        import inspect

        if inspect.iscoroutinefunction(fn):
            value = await fn(**arguments)
        else:
            value = await anyio.to_thread.run_sync(lambda: fn(**arguments), abandon_on_cancel=True)
        if isinstance(value, str):
            return CallOutcome(value)
        return CallOutcome(json.dumps(value, ensure_ascii=False, default=str))

    async def _call_mcp(
        self, server: _Server, tool: str, arguments: dict[str, Any], *, limit: float
    ) -> CallOutcome:
        session = server.session
        if session is None or server.dead is not None:
            return self._server_gone(server)
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=limit)
        except Exception as exc:
            if _connection_closed(exc):  # its process ended (or the HTTP session did)
                server.dead = server.dead or "its connection closed"
            if server.dead is not None or server.session is None:
                return self._server_gone(server)
            return CallOutcome(f"failed: {_reason(exc)}", True)
        return CallOutcome(_mcp_text(result), bool(getattr(result, "is_error", False)))

    def _server_gone(self, server: _Server) -> CallOutcome:
        why = server.dead or "it stopped"
        self.warn_once(
            f"dead:{server.name}",
            f"MCP server {server.name} stopped ({why}); its tools answer with an error "
            "for the rest of the session",
        )
        return CallOutcome(f"the MCP server {server.name} is not running ({why})", True)


def _key_names(world: World) -> list[str | None]:
    return [world.settings.api_key_env, *(r.api_key_env for r in world.roles)]


@asynccontextmanager
async def open_toolbox(
    world: World, *, source: str, replay: ReplaySetup | None = None
) -> AsyncIterator[ToolBox | None]:
    """The world's tools, started (None when it uses none); closed when the block ends.

    Every problem (a pattern that matches nothing, a server that did not start, a
    Python tool that does not import) is named in one WorldError. With ``replay``
    (``--record``, ``--replay``...) the listing and the results go to or come from the
    replay store; ``--replay`` starts nothing.
    """
    if not uses_tools(world):
        yield None
        return
    problems: list[str] = []
    tape = None
    if replay is not None:
        from rolecall.tools.tape import ToolTape

        tape = ToolTape(replay, world.name)
    try:
        async with anyio.create_task_group() as tg:
            box = ToolBox(world)
            box.tape = tape
            try:
                if tape is not None and tape.replaying:
                    box._replayed(tape, problems)
                else:
                    await box._start(tg, problems)
                    if tape is not None and not problems:
                        tape.keep_listing(list(box.specs.values()))
                if not problems:
                    yield box
            finally:
                box.close()
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    if problems:
        raise WorldError(source, problems)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
