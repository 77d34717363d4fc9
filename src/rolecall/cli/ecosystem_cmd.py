"""``rolecall models`` (the model implementations) and ``rolecall worlds schema``."""

from __future__ import annotations

import argparse
import json

from rolecall.cli.registry import add_command


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        sub,
        "models",
        description=(
            "The model implementations a world's model: string can name: the built-in "
            "offline and scripted models, installed plugins (entry-point group "
            "rolecall.models; the model string is PREFIX or PREFIX/...), and litellm for "
            "every other string."
        ),
        examples=["rolecall models"],
    )


def cmd_models(args: argparse.Namespace) -> int:
    from rolecall.llm.plugins import plugins

    rows = [
        ("offline", "built-in", "deterministic replies, no network, no key"),
        ("scripted", "built-in", "a role's script: lines in order"),
    ]
    for plugin in sorted(plugins().values(), key=lambda p: p.prefix):
        rows.append((f"{plugin.prefix}[/...]", f"plugin {plugin.package}", plugin.target))
    rows.append(("PROVIDER/MODEL", "litellm", "every other model string (docs.litellm.ai)"))
    width = max(len(r[0]) for r in rows)
    kind = max(len(r[1]) for r in rows)
    for name, source, what in rows:
        print(f"{name:{width}}  {source:{kind}}  {what}")
    return 0


def cmd_schema() -> int:
    """``rolecall worlds schema``: the JSON Schema of world.yaml on stdout."""
    from rolecall.world.schema import world_schema

    print(json.dumps(world_schema(), indent=2, ensure_ascii=False))
    return 0
