"""``python -m rolecall``: the same command as ``rolecall``."""

import sys

from rolecall.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
