"""Moved to :mod:`rfl_fast.app.runner` (running an experiment file, on the application floor); this
module keeps the old import path."""

from .app.runner import *  # noqa: F401,F403
from .app.runner import __all__  # noqa: F401
