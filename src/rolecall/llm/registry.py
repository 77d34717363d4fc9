"""Choosing the model implementation for a model string.

``offline`` and ``scripted`` are built in; a model string whose prefix (the part before
the first ``/``) names an installed plugin (entry-point group ``rolecall.models``, see
:mod:`rolecall.llm.plugins`) is made by that plugin; anything else goes to the litellm
adapter, whose module is imported only here and only when such a model is first needed.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import TYPE_CHECKING

from rolecall.errors import ProviderRefused
from rolecall.llm.protocol import ChatModel
from rolecall.llm.scripted import ScriptedModel
from rolecall.llm.types import BUILTIN_MODELS

if TYPE_CHECKING:
    from rolecall.llm.replay import ReplaySetup

BUILTIN = BUILTIN_MODELS  # the models made here, not by litellm or a plugin
REFUSE_ENV = "ROLECALL_REFUSE_REAL_MODELS"
# set by rolecall.testing.refuse_real_models(): no provider model is created meanwhile
refusing: ContextVar[bool] = ContextVar("rolecall_refuse_real_models", default=False)


def needs_litellm(model: str) -> bool:
    from rolecall.llm.plugins import plugin_for

    return model not in BUILTIN and plugin_for(model) is None


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
        from rolecall.llm.litellm_model import LiteLLMModel

        if self.retry_delay is not None:
            return LiteLLMModel(name, retry_delay=self.retry_delay)
        return LiteLLMModel(name)
