"""The public API's implementation (re-exported by :mod:`rolecall`) and the composition root.

Importing it binds structlog to stdlib logging unless the application configured
structlog itself, so that library use prints nothing: records go to the ``rolecall``
logger, which has a ``NullHandler`` (see :mod:`rolecall`). The command line configures
its own output (``rolecall.cli.logs``).
"""

from __future__ import annotations

import logging

import structlog


def bind_structlog() -> None:
    """Send structlog's records to stdlib logging unless the application configured it."""
    if structlog.is_configured():
        return
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


logging.getLogger("rolecall").addHandler(logging.NullHandler())
bind_structlog()
