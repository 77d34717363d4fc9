"""Chat-style speaker labels: turn number, side badge and persona name (modes.md, Debate).

A debate shows each message as the debate system does, ``#3 PRO · Optimistic Advocate``;
other worlds keep the plain ``speaker`` header. Pure: a world in, labels out; used by
the terminal display and the exports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rolecall.world.models import World


@dataclass(frozen=True)
class Labels:
    """How senders are labelled: a badge and a display name per role id."""

    badges: Mapping[str, str]
    names: Mapping[str, str]

    def label(self, sender: str, turn: int | None) -> str | None:
        """``#turn BADGE · Name`` for a badged sender, else None (plain header)."""
        badge = self.badges.get(sender)
        if badge is None:
            return None
        number = f"#{turn} " if turn else ""
        return f"{number}{badge} · {self.names.get(sender, sender)}"


NONE = Labels({}, {})


def labels_of(world: World) -> Labels:
    """The debate's badges (PRO, CON, MODERATOR, JUDGE); none for other worlds."""
    if world.mode != "debate":
        return NONE
    badges = {"pro": "PRO", "con": "CON", "moderator": "MODERATOR"}
    judge = (world.block("debate") or {}).get("judge")
    if isinstance(judge, str):
        badges[judge] = "JUDGE"
    present = {rid: badge for rid, badge in badges.items() if rid in world.role_ids}
    return Labels(present, {rid: world.role(rid).display_name for rid in present})
