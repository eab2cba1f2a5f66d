"""Manifolds with one common interface (see ``base.Manifold``)."""

from .._validation import by_name
from .base import Manifold
from .euclidean import Euclidean
from .grassmann import Grassmann
from .lorentz import Lorentz
from .product import Product
from .spd import SPD
from .sphere import Sphere
from .stiefel import Stiefel

#: name -> class of every manifold, the one list of them: the Flower codec rebuilds a manifold
#: named on the wire from it, and the tests iterate it.
MANIFOLDS = by_name((Euclidean, Sphere, Stiefel, Grassmann, SPD, Lorentz, Product),
                    lambda cls: cls.__name__, "manifolds.MANIFOLDS")

__all__ = ["Manifold", "MANIFOLDS", "Euclidean", "Sphere", "Stiefel", "Grassmann", "SPD",
           "Lorentz", "Product"]
