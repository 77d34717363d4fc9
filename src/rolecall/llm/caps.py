"""What a request's reply cap and stop sequences look like to a provider (real-models.md).

Both provider clients (``llm/openai_http.py``, ``llm/litellm_model.py``) send the
reply's cap with every request: ``max_tokens``, or ``max_completion_tokens`` for the
models that refuse the older name (OpenAI's reasoning models: ``o1``, ``o3``, ``o4``...,
``gpt-5``). Stop sequences (reply hygiene: where another participant's turn would begin)
go to the providers that take them: every one to a server of the request's ``api_base``
(llama.cpp, vLLM, Ollama, LM Studio), the first four to a provider's own API (OpenAI
takes at most four), none to the reasoning models (they take none).
"""

from __future__ import annotations

import re
from typing import Any, Final

from rolecall.llm.types import GenerationRequest

STOP_LIMIT: Final = 4  # OpenAI's API takes at most four stop sequences
_COMPLETION_ONLY = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.IGNORECASE)


def cap_field(model: str) -> str:
    """The name the provider knows the reply cap by."""
    return "max_completion_tokens" if _COMPLETION_ONLY.match(model) else "max_tokens"


def stop_for(request: GenerationRequest) -> list[str] | None:
    """The stop sequences to send (None: send none)."""
    if not request.stop or cap_field(request.model) == "max_completion_tokens":
        return None
    if request.api_base is None:
        return list(request.stop[:STOP_LIMIT])
    return list(request.stop)


def add_limits(body: dict[str, Any], request: GenerationRequest, model: str) -> None:
    """Put the reply cap and the stop sequences of ``request`` into ``body``."""
    if request.max_tokens is not None:
        body[cap_field(model)] = request.max_tokens
    stop = stop_for(request)
    if stop:
        body["stop"] = stop
