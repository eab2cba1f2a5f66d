"""``python -m rfl_fast ...``: the ``rfl-fast`` command line (for when scripts are not on PATH)."""

import sys

from .cli import main

sys.exit(main())
