"""Side-by-side kernel timings against the NumPy reference: see ``rfl_fast.app.bench``.

    python benchmarks/compare.py [--smoke] [--only NAME] [--json PATH]   (same as rfl-fast bench)
"""

import sys

from rfl_fast.app.bench import main

if __name__ == "__main__":
    sys.exit(main())
