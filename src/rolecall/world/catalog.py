"""Where named worlds come from: the local ``./worlds/`` folder and the shipped worlds.

The worlds that come with rolecall are package data (``rolecall/worlds/<name>/``), so
``rolecall run classroom`` works after ``pip install rolecall`` from any folder. A
world folder of the same name under ``./worlds/`` wins over the shipped one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Source = Literal["local", "shipped"]


def shipped_dir() -> Path:
    """The folder of the worlds installed with rolecall."""
    return Path(__file__).resolve().parent.parent / "worlds"


@dataclass(frozen=True, slots=True)
class WorldEntry:
    """One named world: its name, its ``world.yaml`` and where it was found."""

    name: str
    path: Path
    source: Source
    shadows: bool = False  # a local world hiding a shipped one of the same name


def _folders(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.parent.name: p for p in sorted(folder.glob("*/world.yaml"))}


def available(local: Path | None = None) -> list[WorldEntry]:
    """Every named world, sorted by name; ``local`` (default ``./worlds``) wins on a clash.

    When ``local`` is the shipped folder itself (a checkout whose ``./worlds`` points
    there) the worlds are listed as shipped.
    """
    shipped_root = shipped_dir()
    local_root = Path("worlds") if local is None else local
    shipped = _folders(shipped_root)
    same = local_root.is_dir() and local_root.resolve() == shipped_root
    mine = {} if same else _folders(local_root)
    entries = [
        WorldEntry(name, path, "local", shadows=name in shipped) for name, path in mine.items()
    ]
    entries += [
        WorldEntry(name, path, "shipped") for name, path in shipped.items() if name not in mine
    ]
    return sorted(entries, key=lambda e: e.name)


def find(name: str, local: Path) -> Path | None:
    """The ``world.yaml`` of the world called ``name``: local first, then shipped."""
    if "/" in name or "\\" in name or name in ("", ".", ".."):
        return None
    for root in (local, shipped_dir()):
        candidate = root / name / "world.yaml"
        if candidate.is_file():
            return candidate
    return None
