"""The garbage collector set for long dialogues (docs/performance.md, "Garbage collection").

Every turn allocates short-lived objects (events, envelopes, prompt pieces) and keeps
some for good (the transcript, the bus's bounded history). With CPython's default
thresholds (700, 10, 10) the collector runs every few turns and scans the young
survivors again and again: measured on a 10,000-turn session, 169 collections took
0.4 s, and the longest stopped a turn for 100 ms. :func:`tune_gc` freezes what setup
allocated (modules, the world, the restored transcript: never garbage, never scanned
again) and collects less often: 2-5 collections in the same run, the longest about
20 ms. Cyclic garbage is still collected, later.

The CLI calls it once a session is set up; a program embedding rolecall may call it
too (it changes the process-wide collector, so it is never done behind your back).
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["GC_THRESHOLDS", "tune_gc"]

GC_THRESHOLDS: Final = (20_000, 50, 50)


def tune_gc() -> None:
    """Freeze what exists now and set :data:`GC_THRESHOLDS`.

    No collection first: with litellm imported one takes 0.2 s, and the little garbage
    setup leaves is not worth it (frozen, it stays until the process ends).
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
