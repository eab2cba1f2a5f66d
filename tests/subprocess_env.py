"""Subprocesses that import the same rfl_fast as the test process.

``python -c`` puts the working directory first on ``sys.path``; run from a source checkout it
would import the checkout's ``rfl_fast/`` (maybe without the built extension) instead of the
installed package. Running in a neutral folder with ``PYTHONPATH`` set to the folder that holds
the imported package makes both cases (installed wheel, in-place build) behave alike.
"""

import os
import tempfile

import rfl_fast


def same_package(**env):
    """``subprocess.run`` keyword arguments: ``cwd`` and ``env`` (plus ``env`` overrides)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(rfl_fast.__file__)))
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    return {"cwd": tempfile.gettempdir(), "env": dict(os.environ, PYTHONPATH=path, **env)}
