"""Moved to :mod:`rfl_fast.app.experiments` (the papers' experiments, on the application floor);
this module keeps the old import path."""

from .app.experiments import *  # noqa: F401,F403
from .app.experiments import __all__  # noqa: F401
