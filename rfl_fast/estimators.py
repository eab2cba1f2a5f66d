"""Moved to :mod:`rfl_fast.app.estimators` (the scikit-learn estimators, on the application floor);
this module keeps the old import path."""

from .app.estimators import *  # noqa: F401,F403
from .app.estimators import __all__  # noqa: F401
