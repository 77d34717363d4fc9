"""Choosing the model implementation for a model string.

``offline`` and ``scripted`` are built in; a model string whose prefix (the part before
the first ``/``) names an installed plugin (entry-point group ``rolecall.models``, see
:mod:`rolecall.llm.plugins`) is made by that plugin; anything else is a provider's model,
a :class:`ProviderModel`: each request goes through the client its settings name
(``settings.client``): for an ``openai/...`` model, by default (``client: http``),
rolecall's own OpenAI-compatible client
(:mod:`rolecall.llm.openai_http`, which never imports litellm), or litellm with
``client: litellm``; every other provider's model goes through litellm
(:mod:`rolecall.llm.litellm_model`). Each client's module is imported only when a request
first needs it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from rolecall.errors import ProviderRefused
from rolecall.llm.protocol import ChatModel
from rolecall.llm.scripted import ScriptedModel
from rolecall.llm.types import BUILTIN_MODELS, ChatMessage, GenerationRequest, StreamItem

if TYPE_CHECKING:
    from rolecall.llm.litellm_model import LiteLLMModel
    from rolecall.llm.openai_http import OpenAIHTTPModel
    from rolecall.llm.replay import ReplaySetup

BUILTIN = BUILTIN_MODELS  # the models made here, not by litellm or a plugin
REFUSE_ENV = "ROLECALL_REFUSE_REAL_MODELS"
# set by rolecall.testing.refuse_real_models(): no provider model is created meanwhile
refusing: ContextVar[bool] = ContextVar("rolecall_refuse_real_models", default=False)


def lean_client(model: str, client: str) -> bool:
    """Whether a request for ``model`` under ``settings.client: <client>`` goes through
    rolecall's own OpenAI-compatible client (:mod:`rolecall.llm.openai_http`)."""
    return client == "http" and model.startswith("openai/")


def needs_litellm(model: str, client: str = "http") -> bool:
    """Whether ``model``'s requests under ``settings.client: <client>`` go through
    litellm (neither built in, nor a plugin's, nor on the lean client)."""
    from rolecall.llm.plugins import plugin_for

    return model not in BUILTIN and not lean_client(model, client) and plugin_for(model) is None


class ModelRegistry:
    """One model object per model string, created on first use.

    With ``replay``, every model (created or registered) is wrapped in a
    :class:`~rolecall.llm.replay.ReplayModel`; replaying creates the real model only for
    a call that is not in the store (``replay-or-call``) or for its price maps.
    """

    def __init__(
        self,
        *,
        offline_delay: float = 0.0,
        scripted_delay: float = 0.0,
        retry_delay: float | None = None,
        replay: ReplaySetup | None = None,
    ) -> None:
        self.offline_delay = offline_delay
        self.scripted_delay = scripted_delay
        self.retry_delay = retry_delay
        self.replay = replay
        self._models: dict[str, ChatModel] = {}
        self._real: dict[str, ChatModel] = {}
        self._roles: dict[str, ChatModel] = {}  # roles served elsewhere (transport: nats)

    def register(self, name: str, model: ChatModel) -> None:
        """Use ``model`` for ``name`` (tests and embedding applications)."""
        self._real[name] = model
        self._models.pop(name, None)

    def register_role(self, role_id: str, model: ChatModel) -> None:
        """Serve every generation of ``role_id`` with ``model``, whatever its model string
        (a remote agent: :class:`rolecall.nats.agents.RemoteModel`)."""
        self._roles[role_id] = model

    def for_role(self, role_id: str, name: str, *, remote: bool = False) -> ChatModel:
        """The model that generates ``role_id``'s turns, ``name`` being its model string;
        a ``remote`` role (``transport: nats``) is never generated here."""
        model = self._roles.get(role_id)
        if model is not None:
            return model
        if remote:
            raise ProviderRefused(
                f"role '{role_id}' has transport: nats, and this session has no NATS "
                "connection: run it with --nats URL and start `rolecall agent "
                f"{role_id} --world W --nats URL`",
                model=name,
            )
        return self.get(name)

    def get(self, name: str) -> ChatModel:
        model = self._models.get(name)
        if model is None:
            if self.replay is None:
                model = self.real(name)
            else:
                from rolecall.llm.replay import ReplayModel

                model = ReplayModel(name, lambda: self.real(name), self.replay)
            self._models[name] = model
        return model

    def real(self, name: str) -> ChatModel:
        """The model itself, never wrapped."""
        model = self._real.get(name)
        if model is None:
            model = self._real[name] = self._create(name)
        return model

    def _create(self, name: str) -> ChatModel:
        if name == "offline":
            from rolecall.llm.offline import OfflineModel

            return OfflineModel(delay=self.offline_delay)
        if name == "scripted":
            return ScriptedModel(delay=self.scripted_delay)
        if refusing.get() or os.environ.get(REFUSE_ENV, "") not in ("", "0"):
            raise ProviderRefused(
                f"model '{name}' would call a real provider, and real provider calls are "
                f"refused here (rolecall.testing.refuse_real_models() or {REFUSE_ENV}); use "
                "'offline', 'scripted', or pass models={...} with a test model",
                model=name,
            )
        from rolecall.llm.plugins import create, plugin_for

        plugin = plugin_for(name)
        if plugin is not None:
            return create(plugin, name)
        return ProviderModel(name, retry_delay=self.retry_delay)


HTTP_MODULE = "rolecall.llm.openai_http"


class ProviderModel:
    """A provider's model string: each request through the client it names.

    An ``openai/...`` model's requests go through
    :class:`~rolecall.llm.openai_http.OpenAIHTTPModel` unless the world says
    ``client: litellm``; everything else goes through
    :class:`~rolecall.llm.litellm_model.LiteLLMModel`. Each is made on first use. Token
    counts, asked without a request, are litellm's (the model's tokenizer); prices and
    output limits come from litellm's bundled map.
    """

    def __init__(self, name: str, *, retry_delay: float | None = None) -> None:
        self.name = name
        self.retry_delay = retry_delay
        self._litellm: LiteLLMModel | None = None
        self._http: OpenAIHTTPModel | None = None

    def __repr__(self) -> str:
        return f"ProviderModel({self.name!r})"

    def _options(self) -> dict[str, Any]:
        return {} if self.retry_delay is None else {"retry_delay": self.retry_delay}

    def through_http(self, request: GenerationRequest) -> bool:
        """Whether ``request`` goes through the lean client (``settings.client: http``)."""
        return lean_client(request.model or self.name, request.client)

    def litellm(self) -> LiteLLMModel:
        if self._litellm is None:
            from rolecall.llm.litellm_model import LiteLLMModel

            self._litellm = LiteLLMModel(self.name, **self._options())
        return self._litellm

    def http(self) -> OpenAIHTTPModel:
        if self._http is None:
            from rolecall.llm.openai_http import OpenAIHTTPModel  # imports aiohttp

            self._http = OpenAIHTTPModel(self.name, **self._options())
        return self._http

    def client(self, request: GenerationRequest) -> LiteLLMModel | OpenAIHTTPModel:
        """The client ``request`` goes through."""
        return self.http() if self.through_http(request) else self.litellm()

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        return self.client(request).stream(request)

    async def prepare(self, request: GenerationRequest) -> None:
        """Import the client ``request`` goes through (litellm: seconds), off the event loop.

        Called before a turn's clock starts (:class:`rolecall.generation.Generator`), so that an
        import is never counted as generation time (``max_seconds``).
        """
        if self.through_http(request):
            if HTTP_MODULE not in sys.modules:
                await anyio.to_thread.run_sync(importlib.import_module, HTTP_MODULE)
            return
        await self.litellm().prepare(request)

    async def calls_tools(self, request: GenerationRequest) -> bool:
        """Whether the model ``request`` goes to can be offered tools, as its client says."""
        return await self.client(request).calls_tools(request)

    def count_tokens(self, messages: tuple[ChatMessage, ...], model: str | None = None) -> int:
        return self.litellm().count_tokens(messages, model)

    def price_rates(self, model: str) -> tuple[float, float] | None:
        return self._prices(model).price_rates(model)

    def max_output_tokens(self, model: str) -> int | None:
        return self._prices(model).max_output_tokens(model)

    def _prices(self, model: str) -> LiteLLMModel | OpenAIHTTPModel:
        """Who answers for prices and output limits: the same map litellm ships, read as a
        file by the lean client for an ``openai/...`` model (no litellm import for a
        budget), else litellm's own look-up (its provider prefixes and aliases)."""
        return self.http() if model.startswith("openai/") else self.litellm()


async def aclose_clients() -> None:
    """Close the HTTP clients of both provider clients for the running event loop, those
    that were ever used (shutdown, and tests that run several event loops)."""
    lean = sys.modules.get(HTTP_MODULE)
    if lean is not None:
        await lean.aclose()
    if "rolecall.llm.litellm_model" in sys.modules:
        from rolecall.llm.litellm_model import aclose_clients as close_litellm

        await close_litellm()
