"""Moved to :mod:`rfl_fast.app.plotting` (figures, on the application floor); this module keeps the
old import path."""

from .app.plotting import *  # noqa: F401,F403
from .app.plotting import __all__  # noqa: F401
