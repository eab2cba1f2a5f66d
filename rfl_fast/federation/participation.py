"""Moved to :mod:`rfl_fast.algorithms.participation` (a building block of the algorithms); this
module keeps the old import path."""

from ..algorithms.participation import *  # noqa: F401,F403
from ..algorithms.participation import __all__  # noqa: F401
