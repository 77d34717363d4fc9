"""The offline model's closing synthesis: a real closing that cites the ids it summarises.

The debate and consensus presets word their final step with the messages to cite,
``[m1] Name (PRO); [m2] Name (CON); ...``. From that list this module writes a
deterministic closing in the shape a real model gives: each side's strongest points
with their ids, common ground, what remains disputed, concessions, an assessment, and
nothing that hands the floor on.
"""

from __future__ import annotations

import re

_CITE = re.compile(r"\[(m[1-9][0-9]*)\]\s*([^;\[\]]+)")


def cited(instruction: str) -> list[tuple[str, str]]:
    """The ``(id, label)`` pairs listed after "messages:" in an instruction, in order."""
    _, found, listing = instruction.partition("messages:")
    if not found:
        return []
    return [(mid, label.strip().rstrip(".").strip()) for mid, label in _CITE.findall(listing)]


def is_closing(instruction: str) -> bool:
    """A final synthesis that lists the messages to cite (a preset's closing step)."""
    lowered = instruction.lower()
    return "summar" in lowered and len(cited(instruction)) >= 1


def _ids(ids: list[str]) -> str:
    return " ".join(f"[{mid}]" for mid in ids)


def closing(instruction: str, a: str, b: str, t: str) -> str:
    """The closing text; ``a``, ``b``, ``t`` are the salient words of the reply's context."""
    pairs = cited(instruction)
    by_label: dict[str, list[str]] = {}
    for mid, label in pairs:
        by_label.setdefault(label, []).append(mid)
    what = "debate" if "debate" in instruction.lower() else "discussion"
    sentences = [f"To close this {what} on {t}."]
    points = (a, b)
    for i, (label, ids) in enumerate(by_label.items()):
        sentences.append(
            f"{label} made the strongest case on {points[i % 2]} {_ids(ids[:3])}"
            + (f" and kept to it to the end {_ids(ids[-1:])}." if len(ids) > 3 else ".")
        )
    first, last = pairs[0][0], pairs[-1][0]
    sentences.append(f"The common ground is that {a} is central to the question [{first}].")
    sentences.append(f"The disagreement that remains is over {b} [{last}].")
    if "ended: concession" in instruction.lower():
        sentences.append(f"A point was conceded in the end [{last}].")
    else:
        sentences.append("Neither side conceded its central claim.")
    sentences.append(
        f"My assessment: the arguments on {a} held up best, because they were answered "
        f"most directly [{first}] [{last}]."
    )
    return " ".join(sentences)
