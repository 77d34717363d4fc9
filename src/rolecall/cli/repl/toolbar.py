"""The REPL's bottom toolbar, fitted to the terminal's width (pure, measured with wcwidth).

World · session · status · step and its counters · model override · tokens · hint. What
must stay visible is the status, the tokens and the hint; when the line is too wide the
step counters are shortened first, then dropped, then the session id is cut to a prefix
(prefixes are accepted wherever an id is), then the world name.
"""

from __future__ import annotations

from dataclasses import dataclass

from rolecall.cli.wrap import width_of

QUIT_WINDOW = 2.0  # seconds within which a second Ctrl-C (or Ctrl-D while busy) quits
SEP = " │ "

Fragments = list[tuple[str, str]]


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, ending with ``…`` when cut."""
    if width_of(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = max(width_of(ch), 0)
        if used + w > width - 1:
            break
        out, used = out + ch, used + w
    return out + "…"


@dataclass
class ToolbarParts:
    world: str
    session: str
    status: str
    step: str = ""
    counters: str = ""
    model: str = ""
    tokens: str = ""
    hint: str = "/help"

    def fragments(self) -> Fragments:
        sep = ("class:bottom-toolbar.hint", SEP)
        out: Fragments = [("class:bottom-toolbar.key", f" {self.world}")]
        if self.session:
            out += [sep, ("", self.session)]
        out += [sep, ("class:bottom-toolbar.state", self.status)]
        if self.step:
            out += [sep, ("", self.step)]
            if self.counters:
                out.append(("class:bottom-toolbar.hint", "  " + self.counters))
        if self.model:
            out += [sep, ("class:bottom-toolbar.state", self.model)]
        if self.tokens:
            out += [sep, ("", self.tokens)]
        out += [sep, ("class:bottom-toolbar.hint", self.hint + " ")]
        return out

    def width(self) -> int:
        return sum(width_of(text) for _, text in self.fragments())


def fit_toolbar(parts: ToolbarParts, columns: int) -> Fragments:
    """``parts`` as toolbar fragments at most ``columns`` wide, shortening the least
    important parts first (status, tokens and hint are kept whole)."""
    columns = max(columns - 1, 20)  # the last column would wrap on some terminals
    over = parts.width() - columns
    if over > 0 and parts.counters:
        keep = width_of(parts.counters) - over
        parts.counters = clip(parts.counters, keep) if keep >= 8 else ""
        over = parts.width() - columns
    if over > 0 and parts.session:
        keep = width_of(parts.session) - over
        parts.session = clip(parts.session, keep) if keep >= 9 else ""
        over = parts.width() - columns
    if over > 0 and parts.model:
        parts.model = clip(parts.model, max(width_of(parts.model) - over, 8))
        over = parts.width() - columns
    if over > 0:
        parts.world = clip(parts.world, max(width_of(parts.world) - over, 4))
    return parts.fragments()
