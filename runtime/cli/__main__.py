"""`python -m sparkpoint.runtime.cli`: the `sparkpoint` command (as the console script)."""

import sys

from . import main

sys.exit(main())
