"""Moved to :mod:`rfl_fast.app.config` (experiment files, on the application floor); this module
keeps the old import path."""

from .app.config import *  # noqa: F401,F403
from .app.config import __all__  # noqa: F401
