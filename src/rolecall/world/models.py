"""The world file as typed models (worlds.md)."""

from __future__ import annotations

import json
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


class Selector(_Model):
    """``settings.selector`` (selection.md): the model that names the next speaker when
    ``speaker_selection: model``; its instructions; a ``scripted`` selector's lines."""

    model: str | None = None  # None: the world's model
    instructions: str = ""
    script: list[str] | None = None  # what a `scripted` selector answers, in order


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
    # how openai/... models (OpenAI, or any OpenAI-compatible server at api_base) are
    # called: rolecall's lean HTTP client by default (llm/openai_http.py: the same request
    # at a tenth of litellm's CPU), or through litellm when a world says so
    # (docs/worlds.md); every other provider always goes through litellm
    client: Literal["litellm", "http"] = "http"
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
    # selection.md: who speaks next in a chat (and in a flow step `speaker: select`):
    # mentions (chat.md's rules), round_robin, random (seeded by `seed`), or model
    speaker_selection: Literal["mentions", "round_robin", "random", "model"] = "mentions"
    selector: Selector = Field(default_factory=Selector)
    allow_repeat: StrictBool = False  # the speaker that just spoke may be chosen again
    max_rounds: Annotated[Whole, Field(ge=1, le=1000)] = 3  # selected turns per human message
    seed: int | None = None  # random selection's seed
    # real-models.md: every reply's output cap, sent to the provider (a role's own
    # max_reply_tokens or max_tokens wins); reply hygiene (tags, other speakers'
    # turns, repetition cut from replies), on unless off
    max_reply_tokens: Annotated[Whole, Field(ge=1)] = 1024
    reply_hygiene: Annotated[Literal["on", "off"], BeforeValidator(_on_off)] = "on"


class Respond(_Model):
    """How an agent decides whether to answer a message nobody was addressed in (chat.md):
    the respond check."""

    # ask its own model, yes or no with a reason, instead of the routing rule alone
    ask_model: StrictBool = False
    history: Annotated[Whole, Field(ge=1, le=50)] = 6  # recent messages it is shown


class KnowledgeCollection(_Model):
    """A named collection of documents (knowledge.md): files or folders of .md, .txt,
    .pdf and .html, relative to the world's folder (absolute once loaded)."""

    paths: list[str] = Field(min_length=1)
    # the folder the paths are relative to, and citations shown from (default: the
    # world's folder); absolute once loaded
    root: str | None = None
    # the largest file indexed, in MB (10**6 bytes): a bigger one is refused, named
    max_file_mb: float = Field(default=20, gt=0)


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


class Output(_Model):
    """A role's ``output: {schema: S}`` (selection.md): its replies are JSON valid
    against the JSON Schema ``S``."""

    schema_: Annotated[dict[str, Any], Field(alias="schema")]

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _a_schema(self) -> Output:
        from rolecall.llm.shape import check_schema

        problem = check_schema(self.schema_)
        if problem is not None:
            raise PydanticCustomError(
                "bad_schema", "not a JSON Schema: {problem}", {"problem": problem}
            )
        return self


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
    # call entries: tools.md; a mapping is a reply of that JSON (a role's `output:`)
    script: list[str | ScriptCall | dict[str, Any]] | None = None
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
    # audiences.md: the role sees only messages from or to these role ids, the human's,
    # and those addressed to it; None: every message it is in the audience of
    sees: list[Ident] | None = None

    # selection.md: replies as JSON valid against a schema, or any JSON object (`json`)
    output: Output | Literal["json"] | None = None

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema its replies must match (``output: json``: any object)."""
        if self.output is None:
            return None
        if self.output == "json":
            return {"type": "object"}
        assert isinstance(self.output, Output)
        return self.output.schema_

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
        out: list[str | dict[str, Any]] = []
        for entry in self.script or ():
            if isinstance(entry, str):
                out.append(entry)
            elif isinstance(entry, ScriptCall):
                out.append(entry.model_dump(mode="json"))
            else:  # a scripted mapping: its JSON is the reply
                out.append(json.dumps(entry, ensure_ascii=False))
        return tuple(out)


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
