"""The public API's implementation (re-exported by :mod:`rolecall`) and the composition root.

Library use prints nothing: rolecall's loggers (:mod:`rolecall.log`) bind structlog to
stdlib logging when they first log, unless the application configured structlog itself,
and records go to the ``rolecall`` logger, which has a ``NullHandler``. The command
line configures its own output (``rolecall.cli.logs``).
"""
