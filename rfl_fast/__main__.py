"""``python -m rfl_fast ...``: the ``rfl-fast`` command line (for when scripts are not on PATH).

``python -m rfl_fast --include-dir`` / ``--cmake-dir`` / ``--pkgconfig-dir`` print the folders
a C++ build needs (the headers, ``rfl_fastConfig.cmake``, ``rfl_fast.pc``) and exit.
"""

import sys

from . import get_cmake_dir, get_include, get_pkgconfig_dir

_FOLDERS = {"--include-dir": get_include, "--cmake-dir": get_cmake_dir,
            "--pkgconfig-dir": get_pkgconfig_dir}

if len(sys.argv) == 2 and sys.argv[1] in _FOLDERS:
    print(_FOLDERS[sys.argv[1]]())
    sys.exit(0)

from .app.cli import main  # noqa: E402 (the folder flags above need no CLI imports)

sys.exit(main())
