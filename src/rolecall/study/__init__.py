"""Document-driven study mode (modes.md, Study): the pure core and its one I/O edge.

* :mod:`~rolecall.study.segment`: a document's text -> sections -> units with kinds.
* :mod:`~rolecall.study.queue`: role scores and queues per unit (:func:`build_plan`).
* :mod:`~rolecall.study.intent`: classifying a learner's interruption.
* :mod:`~rolecall.study.realloc`: the turn order with reallocation, bounded delay,
  hysteresis locks and no A, B, A, B oscillation (:class:`Scheduler`).
* :mod:`~rolecall.study.document`: reading TXT, Markdown and PDF files (the only I/O).

Everything but ``document`` is pure and deterministic: the same text and settings give
the same units, queues and speakers.
"""

from __future__ import annotations

from rolecall.study.intent import Classification, classify
from rolecall.study.queue import ROLES, StudyPlan, build_plan
from rolecall.study.realloc import count_oscillations
from rolecall.study.scheduler import NextTurn, Scheduler, StudyState
from rolecall.study.segment import Unit, segment, segment_document

__all__ = [
    "ROLES",
    "Classification",
    "NextTurn",
    "Scheduler",
    "StudyPlan",
    "StudyState",
    "Unit",
    "build_plan",
    "classify",
    "count_oscillations",
    "segment",
    "segment_document",
]
