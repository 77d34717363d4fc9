"""The command line's exit codes, in one place every command module may import.

The failures' codes are the exception tree's own (:mod:`rolecall.errors`); 130 and 143
are the shell's for SIGINT and SIGTERM.
"""

from __future__ import annotations

from rolecall.errors import RuntimeFailure, UsageError

EXIT_OK, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 130, 143
EXIT_FAILURE, EXIT_USAGE = RuntimeFailure.exit_code, UsageError.exit_code
