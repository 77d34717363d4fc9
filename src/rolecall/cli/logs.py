"""Configuring structlog, once, for the command line (library code only asks for loggers).

Logs go to stderr (warnings and up by default; ``-v`` info, ``-vv`` debug, ``-q``
errors only) and, with ``--log-file``, as JSON lines to that file. Values of
secret-looking environment variables are redacted from every log line.

The stdlib handlers and their levels are set at once; structlog is configured, and the
handlers' formatters (structlog's) are built, when the first record is logged
(:mod:`rolecall.log`): a run that logs nothing does not import structlog.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rolecall.errors import UsageError
from rolecall.log import when_loaded
from rolecall.redaction import redact, secret_values


def _redact_processor(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    secrets = secret_values()
    if not secrets:
        return event_dict
    return {k: redact(v, secrets) if isinstance(v, str) else v for k, v in event_dict.items()}


def _shared(structlog: Any) -> list[Any]:
    """The processors of every record, structlog's and stdlib's (``foreign_pre_chain``)."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact_processor,
    ]


class _Deferred(logging.Formatter):
    """A handler's formatter, built (importing structlog) for the first record it formats."""

    def __init__(self, build: Callable[[ModuleType], logging.Formatter]) -> None:
        super().__init__()
        self._build = build
        self._formatter: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._formatter is None:
            import structlog

            self._formatter = self._build(structlog)
        return self._formatter.format(record)


def _console(structlog: Any) -> logging.Formatter:
    formatter: logging.Formatter = structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        foreign_pre_chain=_shared(structlog),
    )
    return formatter


def _json_lines(structlog: Any) -> logging.Formatter:
    formatter: logging.Formatter = structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(),
        ],
        foreign_pre_chain=_shared(structlog),
    )
    return formatter


def _configure_structlog(structlog: Any) -> None:
    structlog.configure(
        # filter_by_level first: a debug line nobody shows costs no processing (the
        # redaction reads the environment; a provider call logs one at debug level)
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared(structlog),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def configure(verbosity: int = 0, log_file: str | None = None) -> None:
    console_level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(
        verbosity, logging.DEBUG
    )
    when_loaded(_configure_structlog)
    root = logging.getLogger()
    root.handlers.clear()
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(console_level)
    console.setFormatter(_Deferred(_console))
    root.addHandler(console)
    level = console_level
    if log_file:
        try:
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or exc
            raise UsageError(f"--log-file {log_file}: cannot open it: {why}") from exc
        file_level = logging.DEBUG if verbosity >= 2 else logging.INFO
        handler.setLevel(file_level)
        handler.setFormatter(_Deferred(_json_lines))
        root.addHandler(handler)
        level = min(level, file_level)
    root.setLevel(level)
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "aiosqlite", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, level))
