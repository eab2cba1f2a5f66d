"""Type aliases of the public signatures (the package ships ``py.typed``, PEP 561).

``FloatArray``: a float64 array (float32 for float32 input); ``Real``: one value per item, a
NumPy scalar for one point and an array for a stack; ``RNGLike``: what ``rng=`` accepts.
"""

from typing import Any, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["ArrayLike", "FloatArray", "Real", "RNGLike"]

FloatArray = NDArray[np.floating[Any]]
Real = Union[np.floating[Any], NDArray[np.floating[Any]]]
RNGLike = Union[None, int, np.random.SeedSequence, np.random.Generator]
