"""``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``)."""

import sys

from rolecall.cli.repl.entry import _main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
