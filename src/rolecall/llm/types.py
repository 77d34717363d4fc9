"""Plain data shared by every model implementation (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ChatRole = Literal["system", "user", "assistant", "tool"]
BUILTIN_MODELS = ("offline", "scripted")  # built into rolecall (llm/registry.py)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One entry of a provider chat prompt."""

    role: ChatRole
    content: str
    name: str | None = None
    # tools.md: an assistant message's calls, and the call a ``tool`` message answers
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def as_provider_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None and self.role not in ("system", "tool"):
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.as_provider_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool offered to a model (OpenAI's function format); ``name`` is the name the
    provider sees (``[a-zA-Z0-9_-]``), ``full_name`` rolecall's (``time.get_time``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    full_name: str = ""

    def as_provider_dict(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call a model asked for: its provider id, the provider-side name, the JSON text
    of its arguments as the model wrote them. A stream yields it whole (assembled)."""

    call_id: str
    name: str
    arguments: str

    def as_provider_dict(self) -> dict[str, Any]:
        return {
            "id": self.call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class Persona:
    """What a model may know about the role it plays (used by the offline model)."""

    id: str
    name: str
    description: str = ""
    system_prompt: str = ""
    style: str = ""
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """Facts about the turn being generated; filled into scripted placeholders."""

    turn: int  # session-wide number of the message being generated (m<turn>)
    n: int  # this role's turn, 1-based
    speaker: str  # speaker role id
    target: str | None  # sender id of the message being answered, if any
    target_text: str | None  # the text being answered, if any
    topic: str
    instruction: str | None = None
    step_id: str | None = None
    target_name: str | None = None  # display name of the target's role, when it has one
    # "respond": not a turn but the question whether to answer target_text (chat.md,
    # respond: {ask_model: true}); the reply is YES or NO and a reason
    # "score": scoring a stored session after the fact (rolecall score, docs/compare.md):
    # target_text is the transcript, the instruction names the JSON verdict asked for
    # "select": the speaker selector's question (selection.md); the reply names a candidate
    purpose: Literal["turn", "respond", "summary", "score", "select"] = "turn"


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens, in and out (a role's ``price:`` in world.yaml)."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True, slots=True)
class Reference:
    """A passage put into the prompt for the model to answer from (knowledge.md)."""

    id: str  # k1, k2, ... as the prompt and a citation name it
    text: str
    source: str = ""  # path:lines


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """Everything one generation needs."""

    model: str
    messages: tuple[ChatMessage, ...]
    persona: Persona
    info: TurnInfo
    temperature: float | None = None
    max_tokens: int | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    timeout: float = 60.0
    retries: int = 2
    script: tuple[str | dict[str, Any], ...] = ()  # lines; tool calls as dicts (tools.md)
    world_title: str = ""
    participants: tuple[str, ...] = field(default_factory=tuple)
    price: Price | None = None  # the role's own price; wins over what the model reports
    client: str = "http"  # openai/... models through llm/openai_http.py; "litellm": litellm
    tools: tuple[ToolDef, ...] = ()  # tools.md: what the model may call this round
    references: tuple[Reference, ...] = ()  # the turn's retrieved passages, best first
    # a role's `output:` (selection.md): the JSON Schema its reply must match
    output_schema: dict[str, Any] | None = None
    # real-models.md: where another participant's turn would begin (reply hygiene);
    # sent to providers that take stop sequences, the cut applied to the stream either way
    stop: tuple[str, ...] = ()


@dataclass(slots=True)
class TextDelta:
    """A piece of generated text, in order. (Not frozen: one is made per streamed chunk,
    and a frozen dataclass's constructor costs twice as much; nothing changes it.)"""

    text: str


def well_formed(text: str) -> str:
    """``text``, each lone surrogate (half a UTF-16 pair, as a broken provider's JSON
    escape such as ``\\ud83d`` gives) replaced by U+FFFD: such text can be neither
    stored nor printed as UTF-8, and would stop the session at its next write."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one whole generation; always the last item of a stream.

    ``cost_usd`` is what the generation cost, when the model knows (``None``: unknown).
    Replay keeps both as recorded.
    """

    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None
    # the provider's ("stop", "length", ...), when it says; not part of equality: two
    # usages are the same counts and cost
    finish_reason: str | None = field(default=None, compare=False)


StreamItem = TextDelta | Usage | ToolCall


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic token estimate (about four characters a token).

    Used by the offline and scripted models, and for budget checks before a call.
    Real providers report their own counts.
    """
    return (len(text) + 3) // 4  # 0 for "", at least 1 for any text


def prompt_tokens(messages: tuple[ChatMessage, ...]) -> int:
    """Estimated input tokens of a prompt (content plus a small per-message overhead)."""
    # estimate_tokens inlined: this runs over the whole prompt on every turn
    return sum((len(m.content) + 3) // 4 for m in messages) + 4 * len(messages)
