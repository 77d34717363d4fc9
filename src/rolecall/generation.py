"""One generation: prompt → model stream → ``sse`` events → a finished text.

The :class:`Generator` is the only place a turn's reply is generated. It publishes
``sse/start``, ``sse/chunk`` and ``sse/end`` (or ``sse/error``), measures time and
tokens, and turns cancellation and provider failures into a :class:`Draft`-able
partial text. It holds no session state.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from rolecall.bus import Bus, StreamChunk, StreamEnd, StreamError, StreamStart, TrimEvent
from rolecall.llm import pricing
from rolecall.llm.hygiene import Participants, ReplyFilter, Step
from rolecall.llm.protocol import ChatModel
from rolecall.llm.types import (
    BUILTIN_MODELS,
    GenerationRequest,
    TextDelta,
    ToolCall,
    Usage,
    estimate_tokens,
    prompt_tokens,
    well_formed,
)


@dataclass
class Generated:
    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    cost_usd: float | None = None  # None: unknown
    # tools.md: the calls the model asked for (this round), then the turn's call ids
    calls: list[ToolCall] = field(default_factory=list)
    tool_calls: list[str] = field(default_factory=list)
    # selection.md: a role with `output:`: the parsed reply, or why it is not valid
    data: Any = None
    data_error: str | None = None
    # why the reply ended (the provider's, or a hygiene cut's: other_speaker, repetition)
    finish_reason: str | None = None


class GenerationFailed(Exception):
    """A generation ended without a complete text (cancelled or failed)."""

    def __init__(self, partial: str, reason: str, error: BaseException | None = None) -> None:
        self.partial = partial
        self.reason = reason
        self.error = error
        super().__init__(reason)


class Generator:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._scope: anyio.CancelScope | None = None

    @property
    def busy(self) -> bool:
        return self._scope is not None

    def cancel(self) -> bool:
        """Cancel the generation in progress (Ctrl-C); False when none is running."""
        if self._scope is None:
            return False
        self._scope.cancel()
        return True

    async def generate(
        self,
        model: ChatModel,
        request: GenerationRequest,
        message_id: str,
        *,
        target: str | None,
        step_id: str | None,
        loop_iteration: int | None,
        reply_to: str | None = None,
        start: bool = True,
        draft_id: str | None = None,
        counted: tuple[int, int] = (0, 0),
        audience: Sequence[str] | None = None,
        hygiene: Participants | None = None,
    ) -> Generated:
        """One model round. ``start``: publish ``sse/start`` (False for the rounds after
        a turn's tool calls, tools.md); a round that asks for tool calls ends without
        ``sse/end`` (the turn goes on after their results). ``draft_id``: the id of the
        draft a cancelled or failed round is kept as (named on ``sse/error``). ``counted``:
        the input and output tokens of the turn's earlier rounds (tools.md), added to
        ``sse/end``'s figures so that they are the whole turn's, as its message's are."""
        bus = self.bus
        sender = request.info.speaker
        publish = bus.publish
        if start:
            publish(
                StreamStart.trusted(
                    message_id=message_id,
                    sender=sender,
                    target=target,
                    step_id=step_id,
                    loop_iteration=loop_iteration,
                    reply_to=reply_to,
                    audience=list(audience) if audience is not None else None,
                )
            )
        parts: list[str] = []
        calls: list[ToolCall] = []
        chars = 0
        usage: Usage | None = None
        prepare = getattr(model, "prepare", None)
        started = time.perf_counter()
        failure: GenerationFailed | None = None
        screen = ReplyFilter(hygiene) if hygiene is not None else None
        received = 0  # characters the model sent (a cut one's tokens count too)

        bounds: list[int] = []  # where each delta the model sent ends, in the text

        def shown(out: Step) -> None:
            nonlocal chars
            if out.emit:
                parts.append(out.emit)
                # the model's own pieces: held text goes out as it came (a reply the
                # filter leaves alone streams exactly as without it)
                assert screen is not None
                end = screen.shown
                at = end - len(out.emit)
                while bounds and bounds[0] <= at:
                    bounds.pop(0)
                for stop in (*[b for b in bounds if b < end], end):
                    piece = screen.text[at:stop]
                    at = stop
                    chars += len(piece)
                    publish(StreamChunk.of(message_id, sender, piece, max(1, (chars + 3) // 4)))
            for trim in out.trims:
                publish(
                    TrimEvent.trusted(
                        message_id=message_id,
                        kind=trim.kind,
                        removed=trim.removed,
                        shown=trim.shown,
                    )
                )

        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                if prepare is not None:  # a client's import (litellm: seconds): not generation
                    await prepare(request)
                    started = time.perf_counter()
                stream = model.stream(request)
                async for item in stream:
                    if isinstance(item, TextDelta):
                        delta = item.text
                        if not delta:
                            continue
                        if not delta.isascii():  # any model's text, checked in one place
                            delta = well_formed(delta)
                        if screen is not None:
                            received += len(delta)
                            bounds.append(received)
                            shown(screen.feed(delta))
                            if screen.cut is not None:
                                break
                            continue
                        parts.append(delta)
                        chars += len(delta)
                        publish(StreamChunk.of(message_id, sender, delta, max(1, (chars + 3) // 4)))
                    elif isinstance(item, ToolCall):
                        calls.append(item)
                    else:
                        usage = item
                if screen is not None:
                    if screen.cut is not None:
                        closing = getattr(stream, "aclose", None)
                        if closing is not None:  # the rest is not wanted: stop the model
                            await closing()
                    else:
                        shown(screen.close())
            except Exception as exc:
                partial = "".join(parts) if screen is None else screen.message
                failure = GenerationFailed(partial, "error", exc)
            finally:
                self._scope = None
        seconds = time.perf_counter() - started
        text = "".join(parts) if screen is None else screen.message
        if scope.cancelled_caught:
            failure = GenerationFailed(text, "cancelled")
        if failure is not None:
            detail = failure.reason if failure.error is None else str(failure.error)
            publish(
                StreamError(
                    message_id=message_id,
                    sender=sender,
                    error=detail,
                    partial=text,
                    draft_id=draft_id,
                )
            )
            raise failure
        cut = screen.cut if screen is not None else None
        if usage is None and cut is not None:  # the stream was closed before its usage:
            # the tokens received, estimated (never past the cap the provider was sent);
            # priced when the price is known here (the role's price:, or a built-in
            # model's nothing), else unknown: a provider's price would mean loading its
            # client's map (litellm's: seconds)
            out = max(1, (received + 3) // 4)
            if request.max_tokens is not None:
                out = min(out, request.max_tokens)
            usage = Usage(prompt_tokens(request.messages), out)
            if request.price is not None or request.model in BUILTIN_MODELS:
                cost_in, cost_out = pricing.rates(model, request.model, request.price) or (0, 0)
                cost_usd = usage.input_tokens * cost_in + usage.output_tokens * cost_out
                usage = Usage(usage.input_tokens, usage.output_tokens, cost_usd)
        if usage is None:  # estimated, never past the cap the provider was sent
            out = estimate_tokens(text)
            if request.max_tokens is not None:
                out = min(out, request.max_tokens)
            usage = Usage(prompt_tokens(request.messages), out)
        finish = cut.kind if cut is not None else usage.finish_reason
        cost = usage.cost_usd
        if request.price is not None:  # the world's price for this role wins
            cost = request.price.cost(usage.input_tokens, usage.output_tokens)
        if calls:
            return Generated(
                text,
                usage.input_tokens,
                usage.output_tokens,
                seconds,
                cost,
                calls=calls,
                finish_reason=finish,
            )
        publish(
            StreamEnd.trusted(
                message_id=message_id,
                sender=sender,
                input_tokens=usage.input_tokens + counted[0],
                output_tokens=usage.output_tokens + counted[1],
                finish_reason=finish,
            )
        )
        return Generated(
            text, usage.input_tokens, usage.output_tokens, seconds, cost, finish_reason=finish
        )
