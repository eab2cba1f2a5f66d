"""Manifolds with one common interface (see ``base.Manifold``)."""

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
MANIFOLDS = {cls.__name__: cls for cls in (Euclidean, Sphere, Stiefel, Grassmann, SPD, Lorentz,
                                           Product)}

__all__ = ["Manifold", "MANIFOLDS", "Euclidean", "Sphere", "Stiefel", "Grassmann", "SPD",
           "Lorentz", "Product"]
