"""The world file as typed models (worlds.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt
from pydantic_core import PydanticCustomError

from rolecall.flows.model import ID_PATTERN, Flow, Ident
from rolecall.modes.registry import known_modes


def _known_mode(name: str) -> str:
    modes = known_modes()
    if name not in modes:
        raise PydanticCustomError(
            "unknown_mode",
            "no mode '{name}' (modes: {modes})",
            {"name": name, "modes": ", ".join(modes)},
        )
    return name


Mode = Annotated[str, AfterValidator(_known_mode)]
"""A mode's name, checked against the registry (:mod:`rolecall.modes.registry`)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Price(_Model):
    """USD per million tokens; overrides litellm's price map for one role."""

    input_per_mtok: Annotated[float, Field(ge=0)]
    output_per_mtok: Annotated[float, Field(ge=0)]


class Settings(_Model):
    memory_window: Annotated[StrictInt, Field(ge=0, le=10000)] = 12
    turn_limit: Annotated[StrictInt, Field(ge=1)] = 5
    max_turns: Annotated[StrictInt, Field(ge=1)] = 100
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_seconds: Annotated[float, Field(gt=0)] | None = None
    max_cost: Annotated[float, Field(gt=0)] | None = None  # USD, checked before each call
    # record or replay model calls (docs/replay.md); the CLI's --record/--replay win
    replay: Literal["off", "record", "replay", "replay-or-call"] = "off"
    replay_file: str | None = None  # JSON Lines; relative to the world's folder
    constraints: list[str] = Field(default_factory=list)
    api_base: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    timeout: Annotated[float, Field(gt=0)] = 60.0
    retries: Annotated[StrictInt, Field(ge=0, le=10)] = 2
    # a remote agent (transport: nats) silent this long is gone (scale.md); seconds
    agent_timeout: Annotated[float, Field(gt=0)] = 30.0


class Role(_Model):
    id: Ident
    name: str = ""
    description: str = ""
    system_prompt: str = ""
    style: str = ""
    constraints: list[str] = Field(default_factory=list)
    model: str | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    api_base: str | None = None
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    script: list[str] | None = None
    price: Price | None = None
    # nats: the role's generations are served by `rolecall agent ROLE` processes (scale.md)
    transport: Literal["local", "nats"] = "local"
    template: str | None = None  # where it came from (kept for display)

    @property
    def display_name(self) -> str:
        return self.name or self.id.replace("_", " ").title()


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
    # preset options (modes.md); validated by the mode when the world is expanded
    debate: dict[str, Any] | None = None
    consensus: dict[str, Any] | None = None
    study: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None

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
