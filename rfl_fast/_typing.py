"""Type aliases of the public signatures (the package ships ``py.typed``, PEP 561).

``FloatArray``: a float64 array (float32 for float32 input); ``Real``: one value per item, a
NumPy scalar for one point and an array for a stack; ``RNGLike``: what ``rng=`` accepts;
``ClientSamples``, ``ClientId``, ``Weighting``: the problems' client data, client ids and
client weights. ``Self`` is :data:`typing.Self` (from ``typing_extensions`` on Python 3.10, a
dependency there).
"""

import sys
from typing import Any, Protocol, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

if sys.version_info >= (3, 11):
    from typing import Self
else:  # Python 3.10
    from typing_extensions import Self

__all__ = ["ArrayLike", "FloatArray", "Real", "RNGLike", "ClientDataLike", "ClientSamples",
           "ClientId", "Weighting", "Self"]

FloatArray = NDArray[np.floating[Any]]
Real = Union[np.floating[Any], NDArray[np.floating[Any]]]
RNGLike = Union[None, int, np.random.SeedSequence, np.random.Generator]


class ClientDataLike(Protocol):
    """What the problems accept besides arrays as client data: an object with ``offsets``
    (n + 1,) and one data array (e.g. :class:`rfl_fast.data.ClientData`)."""

    @property
    def offsets(self) -> ArrayLike: ...


#: Client data: a list of per-client arrays (m_i, *s), an array (n, m, *s) or a ClientData.
ClientSamples = Union[ArrayLike, ClientDataLike]
#: One client id.
ClientId = Union[int, np.integer[Any]]
#: Client weights: "uniform", "samples" or explicit weights (n,).
Weighting = Union[str, ArrayLike]
