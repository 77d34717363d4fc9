"""Where a world's files are: the folder its knowledge's citations are shown relative to."""

from __future__ import annotations

import os
from pathlib import Path

from rolecall.world.models import World


def world_folder(world: World) -> Path | None:
    """The folder citations of the world's knowledge are shown relative to: the
    collections' root (the world's folder, once loaded from a file), else the deepest
    folder holding every path given (``rolecall debate --context FILE``)."""
    roots = [c.root for c in world.knowledge.values() if c.root]
    if not roots:
        roots = [str(Path(p).parent) for c in world.knowledge.values() for p in c.paths]
    if not roots or not all(Path(p).is_absolute() for p in roots):
        return None
    return Path(os.path.commonpath(roots))
