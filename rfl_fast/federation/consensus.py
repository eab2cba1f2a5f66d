"""Moved to :mod:`rfl_fast.algorithms.consensus` (a building block of the algorithms); this
module keeps the old import path."""

from ..algorithms.consensus import *  # noqa: F401,F403
from ..algorithms.consensus import __all__  # noqa: F401
