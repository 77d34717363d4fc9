"""The world file as typed models (worlds.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from rolecall.flows.conditions.base import Number, Whole
from rolecall.flows.model import ID_PATTERN, Flow, Ident
from rolecall.mode_registry import known_modes


def _known_mode(name: str) -> str:
    modes = known_modes()
    if name not in modes:
        raise PydanticCustomError(
            "unknown_mode",
            "no mode {name} (modes: {modes})",
            {"name": repr(name), "modes": ", ".join(modes)},
        )
    return name


Mode = Annotated[str, AfterValidator(_known_mode)]
"""A mode's name, checked against the registry (:mod:`rolecall.mode_registry`)."""


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class Price(_Model):
    """USD per million tokens; overrides litellm's price map for one role."""

    input_per_mtok: Annotated[Number, Field(ge=0)]
    output_per_mtok: Annotated[Number, Field(ge=0)]


# --------------------------------------------------------------------------- tools
# tools.md: MCP servers and Python callables a world declares, and what each role may call
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")]
Approve = Literal["auto", "ask", "deny"]


class McpServer(_Model):
    """One MCP server: a stdio ``command`` or a streamable-HTTP ``url``."""

    command: Annotated[list[str], Field(min_length=1)] | None = None
    url: Annotated[str, Field(pattern=r"^https?://")] | None = None
    env: dict[str, str] = Field(default_factory=dict)  # the only variables (plus PATH, HOME)
    timeout: Annotated[float, Field(gt=0)] = 30.0  # seconds per call

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise PydanticCustomError(
                "mcp_transport", "give exactly one of command (stdio) or url (streamable HTTP)"
            )
        if self.url is not None and self.env:
            raise PydanticCustomError("mcp_env", "env is for a command's process, not a url")
        return self


class Tools(_Model):
    """A world's ``tools:``: MCP servers by name, Python callables by name."""

    mcp: dict[ToolName, McpServer] = Field(default_factory=dict)
    python: dict[
        ToolName,
        Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")],  # module:function
    ] = Field(default_factory=dict)


class ScriptCall(_Model):
    """A ``scripted`` role's tool call (tools.md): ``{call: time.now, arguments: {...}}``."""

    call: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    arguments: dict[str, Any] = Field(default_factory=dict)


def _on_off(value: Any) -> Any:
    """YAML reads a bare ``on``/``off`` as a boolean: take it as the word."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


class Settings(_Model):
    memory_window: Annotated[Whole, Field(ge=0, le=10000)] = 12
    turn_limit: Annotated[Whole, Field(ge=1)] = 5
    max_turns: Annotated[Whole, Field(ge=1)] = 100
    max_tokens: Annotated[Whole, Field(ge=1)] | None = None
    max_seconds: Annotated[Number, Field(gt=0)] | None = None
    max_cost: Annotated[Number, Field(gt=0)] | None = None  # USD, checked before each call
    # record or replay model calls (docs/replay.md); the CLI's --record/--replay win
    replay: Literal["off", "record", "replay", "replay-or-call"] = "off"
    replay_file: str | None = None  # JSON Lines; relative to the world's folder
    constraints: list[str] = Field(default_factory=list)
    api_base: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    timeout: Annotated[Number, Field(gt=0)] = 60.0
    retries: Annotated[Whole, Field(ge=0, le=10)] = 2
    # a remote agent (transport: nats) silent this long is gone (nats.md); seconds
    agent_timeout: Annotated[Number, Field(gt=0)] = 30.0
    # how openai/... models are called: through litellm, or rolecall's lean HTTP client
    # (llm/openai_http.py: the same request, a tenth of the CPU; docs/batch.md)
    client: Literal["litellm", "http"] = "litellm"
    # tools.md: tool calls per turn (then the model is asked once more without tools),
    # per session (None: no limit), and the characters a tool result keeps
    max_tool_calls: Annotated[Whole, Field(ge=0, le=1000)] = 8
    max_tool_calls_total: Annotated[Whole, Field(ge=0)] | None = None
    max_tool_result_chars: Annotated[Whole, Field(ge=100)] = 20000
    # long sessions (knowledge.md): a role's prompt budget in tokens; past it, older
    # messages are folded into a running summary (by summary_model, else the role's)
    # instead of the memory_window's trimming
    context_tokens: Annotated[Whole, Field(ge=256)] | None = None
    summary_model: str | None = None
    # real-models.md: every reply's output cap, sent to the provider (a role's own
    # max_reply_tokens or max_tokens wins); reply hygiene (tags, other speakers'
    # turns, repetition cut from replies), on unless off
    max_reply_tokens: Annotated[Whole, Field(ge=1)] = 1024
    reply_hygiene: Annotated[Literal["on", "off"], BeforeValidator(_on_off)] = "on"


class Respond(_Model):
    """How an agent decides whether to answer a message nobody was addressed in (chat.md)."""

    # ask its own model, yes or no with a reason, instead of the routing rule alone
    judge: StrictBool = False
    history: Annotated[Whole, Field(ge=1, le=50)] = 6  # recent messages it is shown


class KnowledgeCollection(_Model):
    """A named collection of documents (knowledge.md): files or folders of .md, .txt,
    .pdf and .html, relative to the world's folder (absolute once loaded)."""

    paths: list[str] = Field(min_length=1)
    # the folder the paths are relative to, and citations shown from (default: the
    # world's folder); absolute once loaded
    root: str | None = None


class LoreEntry(_Model):
    """World info put into a role's prompt when one of its keys is in the last few
    messages (knowledge.md, Lore entries)."""

    keys: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    text: Annotated[str, Field(min_length=1)]
    roles: list[Ident] | None = None  # None: every role
    name: str = ""  # how events and displays name it (default: its first key)

    @property
    def label(self) -> str:
        return self.name or self.keys[0]


class Role(_Model):
    id: Ident
    name: str = ""
    description: str = ""
    system_prompt: str = ""
    style: str = ""
    constraints: list[str] = Field(default_factory=list)
    model: str | None = None
    temperature: Annotated[Number, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[Whole, Field(ge=1)] | None = None  # the older name of:
    max_reply_tokens: Annotated[Whole, Field(ge=1)] | None = None  # None: settings'
    api_base: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    script: list[str | ScriptCall] | None = None  # call entries: tools.md
    price: Price | None = None
    # nats: the role's generations are served by `rolecall agent ROLE` processes (nats.md)
    transport: Literal["local", "nats"] = "local"
    respond: Respond | None = None  # None: the routing rules alone decide
    template: str | None = None  # where it came from (kept for display)
    # tools.md: names or patterns (``time.*``) of the tools it may call; None: none
    tools: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.*-]+$")]] | None = None
    # auto | ask | deny, or per pattern ({time.*: auto, add: ask}); the first match wins
    approve: Approve | dict[str, Approve] = "auto"
    # the world's knowledge collections retrieved for this role's turns (knowledge.md)
    knowledge: list[Ident] = Field(default_factory=list)
    knowledge_top_k: Annotated[Whole, Field(ge=1, le=50)] = 4

    @model_validator(mode="after")
    def _one_cap(self) -> Role:
        if (
            self.max_tokens is not None
            and self.max_reply_tokens is not None
            and self.max_tokens != self.max_reply_tokens
        ):
            raise PydanticCustomError(
                "two_caps",
                "max_tokens {a} and max_reply_tokens {b} are the same cap: give one",
                {"a": self.max_tokens, "b": self.max_reply_tokens},
            )
        return self

    @property
    def display_name(self) -> str:
        return self.name or self.id.replace("_", " ").title()

    def reply_cap(self, settings: Settings) -> int:
        """The most output tokens of one reply (real-models.md): the role's
        ``max_reply_tokens`` (or its older ``max_tokens``), else the settings'."""
        own = self.max_reply_tokens if self.max_reply_tokens is not None else self.max_tokens
        return own if own is not None else settings.max_reply_tokens

    def script_entries(self) -> tuple[str | dict[str, Any], ...]:
        """The ``script:`` as the scripted model reads it: lines, and calls as dicts."""
        return tuple(
            e if isinstance(e, str) else e.model_dump(mode="json") for e in self.script or ()
        )


class World(_Model):
    name: Annotated[str, Field(pattern=ID_PATTERN)]
    title: str = ""
    description: str = ""
    topic: str = ""
    model: str = "offline"
    mode: Mode | None = None
    settings: Settings = Field(default_factory=Settings)
    roles: list[Role] = Field(min_length=1)
    flow: Flow | None = None
    tools: Tools | None = None  # tools.md
    knowledge: dict[Annotated[str, Field(pattern=ID_PATTERN)], KnowledgeCollection] = Field(
        default_factory=dict
    )
    lore: list[LoreEntry] = Field(default_factory=list)
    # each mode's options block (`debate:`, `study:`, ...; and `judge:`), by its name:
    # written at the top level of world.yaml, validated by the mode (its ModeSpec
    # options) when the world is expanded; any registered mode may have one
    blocks: Annotated[dict[str, dict[str, Any]], SkipJsonSchema()] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_blocks(cls, data: Any) -> Any:
        """Move the top-level ``<mode>:`` blocks (and ``judge:``) into :attr:`blocks`."""
        if not isinstance(data, dict):
            return data
        names = {*known_modes(), "judge"} - set(cls.model_fields)
        found = [key for key in data if key in names]
        if not found:
            return data
        data = dict(data)
        blocks = dict(data.get("blocks") or {})
        for key in found:
            value = data.pop(key)
            if value is not None:
                blocks[key] = value
        data["blocks"] = blocks
        return data

    @model_serializer(mode="wrap")
    def _flatten_blocks(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The blocks back at the top level, as world.yaml (and stored worlds) have them."""
        out: dict[str, Any] = handler(self)
        blocks = out.pop("blocks", None) or {}
        out.update(blocks)
        return out

    def block(self, name: str) -> dict[str, Any] | None:
        """The options block of mode ``name`` (or ``judge``), None when the world has none."""
        return self.blocks.get(name)

    def with_block(self, name: str, options: dict[str, Any]) -> World:
        """This world with ``name``'s options block replaced."""
        return self.model_copy(update={"blocks": {**self.blocks, name: options}})

    def role(self, role_id: str) -> Role:
        for role in self.roles:
            if role.id == role_id:
                return role
        raise KeyError(role_id)

    @property
    def role_ids(self) -> list[str]:
        return [r.id for r in self.roles]

    def model_for(self, role: Role) -> str:
        return role.model or self.model
