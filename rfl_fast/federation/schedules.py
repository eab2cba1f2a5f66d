"""Moved to :mod:`rfl_fast.algorithms.schedules` (a building block of the algorithms); this
module keeps the old import path."""

from ..algorithms.schedules import *  # noqa: F401,F403
from ..algorithms.schedules import __all__  # noqa: F401
