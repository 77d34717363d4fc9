"""The real-model tier: the shipped worlds on a real small model served by llama.cpp.

SmolLM2-135M-Instruct through ``llama_cpp.server`` (scripts/real_model.py), started once
per pytest worker on 127.0.0.1 behind a recording proxy (proxy.py). The tests assert
the runtime's promises against what the server itself said, never the model's words.
Select them with ``-m realmodel``; docs/testing.md and docs/real-models.md.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.conftest import ROOT

CLIENTS = ("http", "litellm")
KEY_ENV = "ROLECALL_REAL_MODEL_KEY"  # llama.cpp's server asks for no key; litellm wants one
SHIPPED = sorted(p.name for p in (ROOT / "worlds").iterdir() if (p / "world.yaml").is_file())


def real_model_script() -> ModuleType:
    """scripts/real_model.py, imported by path (scripts/ is not a package)."""
    name = "rolecall_real_model_script"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "real_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def real_world(
    name: str, into: Path, *, base_url: str, client: str, cap: int, **settings: Any
) -> Path:
    """A copy of shipped world ``name`` (its whole folder) under ``into`` on the real
    model (scripts/real_model.py's ``real_world_data``: roles at temperature 0, every
    reply capped at ``cap`` tokens; roles that play a ``script:`` keep it)."""
    folder = into / f"{name}-{client}"
    shutil.copytree(ROOT / "worlds" / name, folder)
    data = real_model_script().real_world_data(
        folder, base_url=base_url, client=client, cap=cap, key_env=KEY_ENV, **settings
    )
    (folder / "world.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    return folder


def role_names(folder: Path) -> dict[str, list[str]]:
    """How each participant of the world in ``folder`` is named (its id and display
    name; a preset's roles too), and the human (``human``, ``user``)."""
    import rolecall

    names = {role.id: [role.id, role.display_name] for role in rolecall.load_world(folder).roles}
    names["human"] = ["human", "user"]
    return names


def events_of(stdout: str) -> list[dict[str, Any]]:
    """The JSON events a ``--json`` command wrote, one per line."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
