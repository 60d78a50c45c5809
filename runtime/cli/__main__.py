"""`python -m sparkpoint.runtime.cli`: the `sparkpoint` command (as the console script)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
