"""Tool calls in the replay store (tools.md, docs/replay.md): ``--record`` keeps each
call's result and the tools the servers listed with the model calls; ``--replay``
answers from them without starting any server.

They are lines of the same JSON Lines store as the model calls: a result is a
recording whose request is ``{"tool": NAME, "arguments": {...}}`` (the i-th call with
the same arguments gets the i-th result, as model calls do), the listing one whose
request is ``{"tools_of": WORLD}``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from rolecall.llm.replay import Recording, ReplaySetup, request_key
from rolecall.tools.specs import CallOutcome, ToolSpec


class ToolTape:
    """The recorded tools of one world, read and written through a replay store."""

    def __init__(self, setup: ReplaySetup, world: str) -> None:
        self.store = setup.store
        self.mode = setup.mode
        self.world = world
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def replaying(self) -> bool:
        """Only recorded answers: no server is started (``--replay``)."""
        return self.mode == "replay"

    def _listing_request(self) -> dict[str, Any]:
        return {"tools_of": self.world}

    def listing(self) -> list[ToolSpec] | None:
        rec = self.store.find(request_key(self._listing_request()), 0)
        if rec is None or not rec.chunks or not isinstance(rec.chunks[0], dict):
            return None
        return [
            ToolSpec(
                str(s["name"]),
                str(s.get("description", "")),
                dict(s.get("parameters") or {}),
                str(s.get("source", "")),
                float(s.get("timeout", 30.0)),
            )
            for s in rec.chunks[0].get("specs", [])
        ]

    def keep_listing(self, specs: list[ToolSpec]) -> None:
        request = self._listing_request()
        rows = [{**s.as_dict(), "timeout": s.timeout} for s in specs]
        if (
            self.listing() is not None
            and [{**s.as_dict(), "timeout": s.timeout} for s in self.listing() or []] == rows
        ):
            return
        self.store.add(
            Recording(request_key(request), 0, request, [{"specs": rows}], {}, None, "", None)
        )

    def _key(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
        request = {"tool": tool, "arguments": json.loads(json.dumps(arguments))}
        key = request_key(request)
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
        return key, request, n

    def find(self, tool: str, arguments: dict[str, Any]) -> tuple[CallOutcome | None, Any]:
        """The recorded outcome of this call (None: a miss), and the handle to keep one."""
        key, request, n = self._key(tool, arguments)
        rec = self.store.find(key, n)
        handle = (key, request, n)
        if rec is None or not rec.chunks:
            return None, handle
        content = rec.chunks[0]
        return (
            CallOutcome(
                content if isinstance(content, str) else json.dumps(content),
                bool(rec.usage.get("is_error", False)),
                int(rec.usage.get("duration_ms", 0)),
            ),
            handle,
        )

    def keep(self, handle: Any, outcome: CallOutcome, role: str = "") -> None:
        key, request, n = handle
        usage = {"is_error": outcome.is_error, "duration_ms": outcome.duration_ms}
        self.store.add(Recording(key, n, request, [outcome.content], usage, None, role, None))

    def keep_unrecorded(self, tool: str, arguments: dict[str, Any], outcome: CallOutcome) -> None:
        """Keep ``outcome`` as the next occurrence of this call the recording lacks: a call
        cut while it ran (the process was killed) gets the error result its resumed
        session gave the model, so a replay gives the same transcript."""
        request = {"tool": tool, "arguments": json.loads(json.dumps(arguments))}
        key = request_key(request)
        recorded = self.store.load().get(key) or {}
        with self._lock:  # the next same call of this process is the one after it
            n = next(
                i for i in range(self._seen.get(key, 0), len(recorded) + 1) if i not in recorded
            )
            self._seen[key] = n + 1
        usage = {"is_error": outcome.is_error, "duration_ms": outcome.duration_ms}
        self.store.add(Recording(key, n, request, [outcome.content], usage, None, "", None))

    def miss(self, tool: str, arguments: dict[str, Any]) -> str:
        return (
            f"replay: no recorded result of {tool} with arguments "
            f"{json.dumps(arguments, ensure_ascii=False)} in {self.store.path} "
            "(record first with --record or --replay-or-call)"
        )
