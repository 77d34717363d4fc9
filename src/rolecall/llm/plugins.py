"""Model adapters from other packages: the entry-point group ``rolecall.models``.

A package declares ``[project.entry-points."rolecall.models"] echo = "pkg.mod:Factory"``;
a model string ``echo`` or ``echo/<anything>`` is then created by ``Factory(model)``,
which returns a :class:`~rolecall.llm.protocol.ChatModel`. The built-in names
(``offline``, ``scripted``) cannot be taken; every other model string goes to litellm.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import metadata

from rolecall.errors import UsageError
from rolecall.llm.protocol import ChatModel

GROUP = "rolecall.models"
_BUILTIN = frozenset({"offline", "scripted"})


@dataclass(frozen=True, slots=True)
class Plugin:
    prefix: str  # the entry point's name: model strings ``prefix`` and ``prefix/...``
    target: str  # ``module:attribute``
    package: str  # the distribution that declares it, with its version
    entry: metadata.EntryPoint


@cache
def plugins() -> dict[str, Plugin]:
    """The installed model plugins by prefix (read once per process)."""
    found: dict[str, Plugin] = {}
    for entry in metadata.entry_points(group=GROUP):
        if entry.name in _BUILTIN or entry.name in found:
            continue
        dist = entry.dist
        package = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "?"
        found[entry.name] = Plugin(entry.name, entry.value, package, entry)
    return found


def plugin_for(model: str) -> Plugin | None:
    """The plugin that makes ``model``, if one is installed for its prefix."""
    if model in _BUILTIN:
        return None
    return plugins().get(model.split("/", 1)[0])


def create(plugin: Plugin, model: str) -> ChatModel:
    """The plugin's model for ``model``; a clear UsageError when the plugin is broken."""
    where = f"model plugin '{plugin.prefix}' ({plugin.target}, from {plugin.package})"
    try:
        factory = plugin.entry.load()
    except Exception as exc:
        raise UsageError(f"{where} could not be loaded: {type(exc).__name__}: {exc}") from exc
    try:
        made = factory(model)
    except Exception as exc:
        raise UsageError(
            f"{where} failed to create '{model}': {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(getattr(made, "stream", None)):
        raise UsageError(f"{where} returned {type(made).__name__}, which has no stream() method")
    model_obj: ChatModel = made
    return model_obj
