""":class:`ReplCompleter`: ``@role``, ``/command`` and path completion for the prompt."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rolecall.cli.repl.commands import _ALIASES, _SPECS, COMMANDS
from rolecall.cli.repl.runner import _flag_names, _models_in_use
from rolecall.cli.repl.views import _shorten

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document

    from rolecall.api.session import Session
    from rolecall.world.models import World


_MENTION_PREFIX = re.compile(r"(?:^|(?<=[^\w.@-]))@([\w-]*)$")


@dataclass(frozen=True)
class Candidate:
    """One completion: replace the ``-start`` characters before the cursor with ``text``."""

    text: str
    start: int
    display: str = ""
    meta: str = ""


class ReplCompleter:
    """``/commands`` (with descriptions), their arguments, and ``@agent`` mentions.

    Headless (:meth:`complete`); :meth:`for_prompt` wraps it for prompt-toolkit.
    """

    def __init__(
        self,
        world: Callable[[], World],
        session: Callable[[], Session | None] | None = None,
        stored: Callable[[], list[tuple[str, str]]] | None = None,
    ) -> None:
        self.world = world
        self.session = session or (lambda: None)
        self.stored = stored or list  # (id, what it is about) of the stored sessions

    def for_prompt(self) -> Completer:
        from prompt_toolkit.completion import Completer, Completion

        source = self

        class _Completer(Completer):
            def get_completions(
                self, document: Document, complete_event: CompleteEvent
            ) -> Iterator[Completion]:
                for c in source.complete(document.text_before_cursor):
                    yield Completion(
                        c.text,
                        start_position=-c.start,
                        display=c.display or None,
                        display_meta=c.meta,
                    )

        return _Completer()

    def _models(self) -> list[str]:
        session = self.session()
        if session is not None:
            return _models_in_use(session)
        world = self.world()
        return sorted({world.model_for(r) for r in world.roles})

    def complete(self, text: str) -> Iterator[Candidate]:
        """The candidates for ``text``, the input before the cursor."""
        if text.startswith("/") and "\n" not in text:
            if " " not in text:
                yield from self._commands(text[1:])
            else:
                yield from self._arguments(text)
            return
        match = _MENTION_PREFIX.search(text)
        if match is not None:
            yield from self._agents(match.group(1), at=True)

    def _commands(self, prefix: str) -> Iterator[Candidate]:
        low = prefix.lower()
        for spec in COMMANDS:
            if spec.name.startswith(low):
                yield Candidate("/" + spec.name, len(prefix) + 1, spec.usage, spec.summary)

    def _agents(self, prefix: str, *, at: bool) -> Iterator[Candidate]:
        low = prefix.lower()
        world = self.world()
        for role in world.roles:
            if role.id.lower().startswith(low):
                meta = role.display_name + (f" — {role.description}" if role.description else "")
                shown = ("@" if at else "") + role.id
                yield Candidate(role.id, len(prefix), shown, _shorten(meta, 60))
        if at and "all".startswith(low) and low:
            yield Candidate("all", len(prefix), "@all", "every agent answers")

    def _words(self, prefix: str, words: Iterable[str], meta: str = "") -> Iterator[Candidate]:
        for word in words:
            if word.lower().startswith(prefix.lower()):
                yield Candidate(word, len(prefix), "", meta)

    def _paths(self, word: str, *, json_only: bool = False) -> Iterator[Candidate]:
        import os

        from prompt_toolkit.completion import CompleteEvent, PathCompleter
        from prompt_toolkit.document import Document

        def wanted(name: str) -> bool:  # folders lead to files; session files end .json
            return not json_only or name.endswith(".json") or os.path.isdir(name)

        completer = PathCompleter(expanduser=True, file_filter=wanted)
        for c in completer.get_completions(Document(word, len(word)), CompleteEvent()):
            yield Candidate(c.text, -c.start_position, c.display_text, c.display_meta_text)

    def _arguments(self, text: str) -> Iterator[Candidate]:
        head, _, rest = text[1:].partition(" ")
        name = _ALIASES.get(head.lower(), head.lower())
        spec = _SPECS.get(name)
        if spec is None:
            return
        parts = rest.split(" ")
        word = parts[-1]
        before = [w for w in parts[:-1] if w]
        previous = before[-1] if before else ""
        positional = [
            w
            for i, w in enumerate(before)
            if not w.startswith("--")
            and not (i and before[i - 1].startswith("--") and "=" not in before[i - 1])
        ]
        if previous == "--role" and "role" in spec.options:
            yield from self._agents(word, at=False)
            return
        if word.startswith("-") and spec.options:
            yield from self._words(word, [f"--{o}" for o in spec.options])
            return
        if name in ("memory", "clear") and not positional:
            yield from self._agents(word.lstrip("@"), at=False)
        elif name == "help" and not positional:
            yield from self._words(word, [s.name for s in COMMANDS])
        elif name == "flag" and not positional:
            yield from self._words(word, _flag_names(self.world()), "a flag the world checks")
        elif name == "model" and not positional:
            yield from self._words(word, ["default", *self._models()])
        elif name == "export" and not positional:
            yield from self._words(word, spec.choices)
        elif name == "load" and not positional:
            current = self.session()
            for sid, about in self.stored():
                if sid.startswith(word) and (current is None or sid != current.session_id):
                    yield Candidate(sid, len(word), "", _shorten(about, 50))
            yield from self._paths(word, json_only=True)
        elif name in ("save", "load"):
            yield from self._paths(word, json_only=True)
        elif name == "export":
            yield from self._paths(word)
