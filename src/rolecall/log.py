"""rolecall's loggers: structlog, imported when something is first logged.

Every module asks :func:`get_logger` for its logger at import time, but a run that logs
nothing (the usual case: warnings and errors only) never imports structlog, which costs
about 15 ms of a start (``rolecall run``, ``import rolecall``).

When structlog is first needed, the configurations waiting for it run, in order (the
command line's, :func:`when_loaded`); then, unless the application or the command line
configured structlog, it is bound to stdlib logging, so that library use prints
nothing: records go to the ``rolecall`` logger, which has a ``NullHandler`` (see
:mod:`rolecall`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

# configurations waiting for structlog's import (the command line's); None once imported
_waiting: list[Callable[[ModuleType], None]] | None = []
_structlog: ModuleType | None = None  # set once imported and configured
_loading = threading.Lock()  # a thread's first record waits for another's configuring

logging.getLogger("rolecall").addHandler(logging.NullHandler())


def get_logger(name: str) -> Logger:
    """The logger named ``name``; structlog is imported when it first logs."""
    return Logger(name, {})


def when_loaded(configure: Callable[[ModuleType], None]) -> None:
    """Call ``configure(structlog)`` once structlog is imported: now if it is."""
    with _loading:
        if _waiting is not None:
            _waiting.append(configure)
            return
    configure(_load())


def _load() -> ModuleType:
    global _structlog, _waiting
    loaded = _structlog
    if loaded is not None:
        return loaded
    with _loading:
        if _structlog is None:
            import structlog

            waiting, _waiting = _waiting or [], None
            for configure in waiting:
                configure(structlog)
            if not structlog.is_configured():
                _bind_to_stdlib(structlog)
            _structlog = structlog
        return _structlog


def _bind_to_stdlib(structlog: Any) -> None:
    """Send structlog's records to stdlib logging (the application decides the rest)."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.stdlib.render_to_log_kwargs,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,  # a later configure() (the CLI's) takes over
    )


class Logger:
    """A structlog logger made on first use: ``bind`` keeps it lazy."""

    __slots__ = ("_bound", "_context", "_name")

    def __init__(self, name: str, context: dict[str, Any]) -> None:
        self._name = name
        self._context = context
        self._bound: Any = None

    def _logger(self) -> Any:
        bound = self._bound
        if bound is None:
            bound = _load().get_logger(self._name)
            if self._context:
                bound = bound.bind(**self._context)
            self._bound = bound
        return bound

    def bind(self, **values: Any) -> Logger:
        return Logger(self._name, {**self._context, **values})

    def _wanted(self, level: int) -> bool:
        """Whether a record of ``level`` can go anywhere. Before anyone imported
        structlog, nobody configured it either: rolecall's binding (or the command
        line's) will filter by the stdlib logger's level, so that decides, and a record
        nobody shows does not import structlog."""
        if _structlog is None and "structlog" not in sys.modules:
            return logging.getLogger(self._name).isEnabledFor(level)
        return True

    def _log(self, level: int, method: str, event: str, values: dict[str, Any]) -> None:
        if self._wanted(level):
            getattr(self._logger(), method)(event, **values)

    def debug(self, event: str, **values: Any) -> None:
        self._log(logging.DEBUG, "debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        self._log(logging.INFO, "info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        self._log(logging.WARNING, "warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        self._log(logging.ERROR, "error", event, values)
