"""Record and replay of model calls at the model seam (docs/replay.md).

:class:`ReplayModel` wraps any :class:`~rolecall.llm.protocol.ChatModel`. Recording keeps
every call in a JSON Lines store: the normalised request (model, messages, temperature,
max_tokens; for the built-in models also what they answer from: script, persona, turn
facts), the streamed chunks exactly as they came, the usage with its cost and the finish
reason. Replaying serves the same chunks for the same request without calling anything.

Why not litellm's own cache: it covers only litellm's models (not ``offline`` or
``scripted``), it stores the response assembled from a stream, so a cache hit is
re-chunked and the chunk boundaries are lost, and a miss silently calls the provider,
where a replay must fail and say what differed. So this is a small layer of our own.

The i-th call with a given request in a process gets the i-th recording of it (a role
asked the same thing twice may have answered differently); past the last recording it
gets the last. No API key is ever part of a request here: keys are read from the
environment by the litellm adapter at call time, and ``api_key_env`` (a variable's
name) and ``api_base`` are left out of the key so a replay works anywhere.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from rolecall.errors import NotTextError, ProviderRefused, UsageError
from rolecall.llm.protocol import ChatModel
from rolecall.llm.types import (
    BUILTIN_MODELS,
    GenerationRequest,
    StreamItem,
    TextDelta,
    ToolCall,
    Usage,
    estimate_tokens,
    prompt_tokens,
)
from rolecall.paths import read_text

ReplayMode = Literal["record", "replay", "replay-or-call"]
MODES: tuple[ReplayMode, ...] = ("record", "replay", "replay-or-call")


def normalise(request: GenerationRequest) -> dict[str, Any]:
    """The parts of a request that change the answer, as plain JSON data."""
    data: dict[str, Any] = {
        "model": request.model,
        "messages": [m.as_provider_dict() for m in request.messages],
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.output_schema is not None:  # a role's `output:` changes its answer
        data["output_schema"] = request.output_schema
    if request.tools:  # tools.md: what the model may call changes its answer
        data["tools"] = [t.as_provider_dict() for t in request.tools]
    if request.model in BUILTIN_MODELS:  # these answer from the turn's facts, not only the prompt
        data["script"] = list(request.script)
        data["persona"] = asdict(request.persona)
        data["info"] = asdict(request.info)
        data["world_title"] = request.world_title
        data["participants"] = list(request.participants)
    return data


def request_key(normalised: dict[str, Any]) -> str:
    text = json.dumps(normalised, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Recording:
    key: str
    n: int  # the occurrence of this request in the recording session, 0-based
    request: dict[str, Any]
    chunks: list[str | dict[str, Any]]  # text; a tool call as {"tool_call": {...}}
    usage: dict[str, Any]
    finish_reason: str | None
    role: str
    step: str | None


def _kind(value: Any) -> str:
    """What a JSON value is, for an error: ``a string``, ``null``, ``a list``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {str: "a string", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _problem(raw: Any) -> str | None:
    """What is wrong with one parsed line of a replay file, or None: every field is
    checked for its type, so a hand-edited ``"chunks": "text"`` is refused rather than
    replayed one character per chunk."""
    if not isinstance(raw, dict):
        return f"expected a JSON object, got {_kind(raw)}"
    for field in ("key", "request", "chunks", "usage"):
        if field not in raw:
            return f"no {field!r}"
    checks: list[tuple[str, Any, bool, str]] = [
        ("key", raw["key"], isinstance(raw["key"], str), "a string"),
        ("request", raw["request"], isinstance(raw["request"], dict), "an object"),
        ("chunks", raw["chunks"], isinstance(raw["chunks"], list), "a list"),
        ("usage", raw["usage"], isinstance(raw["usage"], dict), "an object"),
    ]
    n = raw.get("n", 0)
    checks.append(("n", n, _count(n), "a whole number of at least 0"))
    for field in ("finish_reason", "role", "step"):
        value = raw.get(field)
        checks.append((field, value, value is None or isinstance(value, str), "a string or null"))
    for field, value, ok, wanted in checks:
        if not ok:
            return f"{field!r} must be {wanted}, got {_kind(value)}"
    # a tool's result or a session's tool listing (tools/tape.py) is kept beside the model
    # calls: its request names the tool, its chunk is the result text or the listing
    tool = "tool" in raw["request"] or "tools_of" in raw["request"]
    for i, chunk in enumerate(raw["chunks"]):
        call = isinstance(chunk, dict) and isinstance(chunk.get("tool_call"), dict)
        listing = tool and isinstance(chunk, dict) and isinstance(chunk.get("specs"), list)
        if not (isinstance(chunk, str) or call or listing):
            return (
                f"'chunks' must be a list of strings (or tool calls), got {_kind(chunk)} "
                f"at chunks[{i}]"
            )
    usage = raw["usage"]
    if tool:
        if not isinstance(usage.get("is_error", False), bool):
            return f"'usage.is_error' must be true or false, got {_kind(usage['is_error'])}"
        if not _count(usage.get("duration_ms", 0)):
            got = _kind(usage["duration_ms"])
            return f"'usage.duration_ms' must be a whole number of at least 0, got {got}"
        return None
    for field in ("input_tokens", "output_tokens"):
        if field not in usage:
            return f"'usage' has no {field!r}"
        if not _count(usage[field]):
            got = _kind(usage[field])
            return f"'usage.{field}' must be a whole number of at least 0, got {got}"
    cost = usage.get("cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)):
        return f"'usage.cost_usd' must be a number or null, got {_kind(cost)}"
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class ReplayStore:
    """The JSON Lines file of recordings, loaded once, appended to line by line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_key: dict[str, dict[int, Recording]] | None = None

    def load(self) -> dict[str, dict[int, Recording]]:
        """The recordings by request key and occurrence (read once; errors name the line)."""
        if self._by_key is not None:
            return self._by_key
        found: dict[str, dict[int, Recording]] = {}
        try:
            lines = read_text(self.path).splitlines()
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            raise UsageError(f"replay file {self.path}: cannot read it ({exc})") from exc
        except NotTextError as exc:
            raise UsageError(f"replay file {self.path}: {exc.problem}") from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"replay file {self.path}, line {number}"
            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise UsageError(f"{where}: not a recording ({exc})") from exc
            problem = _problem(raw)
            if problem is not None:
                raise UsageError(f"{where}: not a recording: {problem}")
            rec = Recording(
                key=raw["key"],
                n=raw.get("n", 0),
                request=raw["request"],
                chunks=list(raw["chunks"]),  # text, or a tool call as {"tool_call": {...}}
                usage=dict(raw["usage"]),
                finish_reason=raw.get("finish_reason"),
                role=raw.get("role") or "",
                step=raw.get("step"),
            )
            found.setdefault(rec.key, {})[rec.n] = rec  # a later recording replaces one
        self._by_key = found
        return found

    def find(self, key: str, n: int) -> Recording | None:
        with self._lock:
            recs = self.load().get(key)
        if not recs:
            return None
        return recs.get(n) or recs[max(recs)]

    def add(self, rec: Recording) -> None:
        line = json.dumps(
            {
                "key": rec.key,
                "n": rec.n,
                "role": rec.role,
                "step": rec.step,
                "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "request": rec.request,
                "chunks": rec.chunks,
                "usage": rec.usage,
                "finish_reason": rec.finish_reason,
            },
            ensure_ascii=False,
        )
        with self._lock:
            self.load().setdefault(rec.key, {})[rec.n] = rec
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")

    def nearest(self, request: dict[str, Any]) -> tuple[Recording, str] | None:
        """The recorded request closest to ``request``, and where they first differ."""
        with self._lock:
            everything = [r for recs in self.load().values() for r in recs.values()]
        if not everything:
            return None
        target = json.dumps(request, sort_keys=True)

        def score(rec: Recording) -> tuple[bool, float]:
            same_model = rec.request.get("model") == request.get("model")
            ratio = difflib.SequenceMatcher(
                None, json.dumps(rec.request, sort_keys=True), target, autojunk=False
            ).quick_ratio()
            return same_model, ratio

        best = max(everything, key=score)
        return best, first_difference(best.request, request)


def first_difference(old: Any, new: Any, path: str = "") -> str:
    """The first path where two JSON values differ, with both values shortened."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return first_difference(
                    old.get(key), new.get(key), f"{path}.{key}" if path else key
                )
        return path
    if isinstance(old, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
        return f"{path} has {len(new)} entries, recorded {len(old)}"
    if isinstance(old, str) and isinstance(new, str):  # show where the texts part
        at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
        at = min(len(old), len(new)) if at is None else at
        start = max(0, at - 20)
        return (
            f"{path} (character {at + 1}): recorded {_short(old[start : at + 30], start > 0)}, "
            f"now {_short(new[start : at + 30], start > 0)}"
        )
    return f"{path}: recorded {_short(old)}, now {_short(new)}"


def _short(value: Any, cut_before: bool = False) -> str:
    text = json.dumps(value, ensure_ascii=False)
    text = text if len(text) <= 60 else text[:57] + "..."
    return "..." + text if cut_before else text


@dataclass(frozen=True)
class ReplaySetup:
    """What a run records or replays, and where."""

    mode: ReplayMode
    store: ReplayStore


class ReplayModel:
    """A ChatModel that records or replays the calls of the model it wraps."""

    # a call missing from the cassette goes to the model it wraps: counted as costing
    # (and said here, so that reading it never creates that model through __getattr__)
    repeatable = False

    def __init__(self, name: str, inner: Callable[[], ChatModel], setup: ReplaySetup) -> None:
        self.name = name
        self._inner = inner
        self.store = setup.store
        self.mode = setup.mode
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def __getattr__(self, attr: str) -> Any:  # price_rates, count_tokens, ...: the inner model's
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._inner(), attr)

    async def prepare(self, request: GenerationRequest) -> None:
        """The wrapped model's :meth:`prepare` when every call goes to it (``record``); a
        replay never creates it (a miss of ``replay-or-call`` imports on its call)."""
        if self.mode == "record":
            inner = getattr(self._inner(), "prepare", None)
            if inner is not None:
                await inner(request)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        normal = normalise(request)
        key = request_key(normal)
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
        if self.mode != "record":
            rec = self.store.find(key, n)
            if rec is not None:
                for chunk in rec.chunks:
                    if isinstance(chunk, dict):
                        yield ToolCall(**chunk["tool_call"])
                    else:
                        yield TextDelta(chunk)
                u = rec.usage
                yield Usage(
                    int(u["input_tokens"]),
                    int(u["output_tokens"]),
                    cost_usd=u.get("cost_usd"),
                    finish_reason=rec.finish_reason,
                )
                return
            if self.mode == "replay":
                raise ProviderRefused(self._miss(request, normal), model=request.model)
        chunks: list[str | dict[str, Any]] = []

        def record(usage: dict[str, Any], finish: str | None) -> None:
            self.store.add(
                Recording(
                    key=key,
                    n=n,
                    request=normal,
                    chunks=chunks,
                    usage=usage,
                    finish_reason=finish,
                    role=request.info.speaker,
                    step=request.info.step_id,
                )
            )

        ended = False
        inner = self._inner().stream(request)
        try:
            async for item in inner:
                if isinstance(item, TextDelta):
                    chunks.append(item.text)
                elif isinstance(item, ToolCall):
                    chunks.append({"tool_call": asdict(item)})
                else:
                    ended = True
                    record(
                        {
                            "input_tokens": item.input_tokens,
                            "output_tokens": item.output_tokens,
                            "cost_usd": item.cost_usd,
                        },
                        item.finish_reason,
                    )
                yield item
        except GeneratorExit:
            # closed by its reader before its usage (reply hygiene cut the reply,
            # real-models.md): what was read is the call, and replays cut the same way
            if not ended and chunks:
                text = "".join(c for c in chunks if isinstance(c, str))
                tokens = {"output_tokens": estimate_tokens(text), "cost_usd": None}
                record({"input_tokens": prompt_tokens(request.messages), **tokens}, None)
            closing = getattr(inner, "aclose", None)
            if closing is not None:  # the model's own stream (its connection) closes now
                await closing()
            raise

    def _miss(self, request: GenerationRequest, normal: dict[str, Any]) -> str:
        info = request.info
        where = f"role {info.speaker}, step {info.step_id or '(none)'}"
        text = f"replay: no recorded call for {where} on {request.model} in {self.store.path}"
        near = self.store.nearest(normal)
        if near is None:
            return text + " (the store is empty; record first with --record or --replay-or-call)"
        rec, diff = near
        return (
            f"{text}; nearest recorded request: role {rec.role}, step {rec.step or '(none)'}, "
            f"differing at {diff}"
        )
