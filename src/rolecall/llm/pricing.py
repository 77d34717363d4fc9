"""What the next call will cost, for the hard budgets (``max_tokens``, ``max_cost``).

Token counts: a model with a ``count_tokens(messages, model)`` method (the litellm
adapter: the model's own tokenizer) counts the prompt; other models keep the estimate of
:func:`~rolecall.llm.types.prompt_tokens`. Prices: a role's ``price:`` wins; else a model
with ``price_rates(model)`` answers (litellm's bundled map); the built-in offline and
scripted models are free; anything else is unknown (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio.to_thread

from rolecall.llm.plugins import plugin_for
from rolecall.llm.protocol import ChatModel
from rolecall.llm.registry import BUILTIN
from rolecall.llm.types import ChatMessage, Price, prompt_tokens


@dataclass(frozen=True, slots=True)
class Estimate:
    input_tokens: int  # the prompt's tokens
    cost_usd: float | None  # the prompt plus the most the role may write; None: unknown


def rates(model: ChatModel, name: str, price: Price | None) -> tuple[float, float] | None:
    """USD per input token and per output token; None when unknown."""
    if price is not None:
        return price.input_per_mtok / 1e6, price.output_per_mtok / 1e6
    answer = getattr(model, "price_rates", None)
    if callable(answer):
        found = answer(name)
        if found is None:
            return None
        cost_in, cost_out = found
        return float(cost_in), float(cost_out)
    return (0.0, 0.0) if name in BUILTIN else None


async def estimate(
    model: ChatModel,
    name: str,
    prompt: tuple[ChatMessage, ...],
    *,
    price: Price | None,
    max_output: int | None,
    want_tokens: bool,
    want_cost: bool,
) -> Estimate:
    """The next call's prompt tokens and (with ``want_cost``) its most likely cost.

    Counting and price look-ups of the litellm adapter may load litellm (seconds) and
    run its tokenizer: they run in a worker thread, and only when a budget needs them.
    """
    counter = getattr(model, "count_tokens", None)
    if want_tokens or want_cost:
        tokens = (
            await anyio.to_thread.run_sync(counter, prompt, name)
            if callable(counter)
            else prompt_tokens(prompt)
        )
    else:
        tokens = prompt_tokens(prompt)
    if not want_cost:
        return Estimate(tokens, 0.0)
    found = await anyio.to_thread.run_sync(rates, model, name, price)
    if found is None:
        return Estimate(tokens, None)
    if max_output is None:
        limit = getattr(model, "max_output_tokens", None)
        max_output = await anyio.to_thread.run_sync(limit, name) if callable(limit) else None
    return Estimate(tokens, tokens * found[0] + (max_output or 0) * found[1])


def unpriced(name: str) -> str:
    """Why model ``name`` has no price, in words for a ``max_cost`` stop."""
    plugin = plugin_for(name)
    if plugin is not None:
        return (
            f"model '{name}' comes from the plugin {plugin.package}, which gives no price "
            "for it (no price_rates(), or it answered None)"
        )
    return f"model '{name}' is not in litellm's price map"
