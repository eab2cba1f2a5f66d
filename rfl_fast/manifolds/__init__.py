"""Manifolds with one common interface (see ``base.Manifold``)."""

from .base import Manifold
from .euclidean import Euclidean
from .grassmann import Grassmann
from .lorentz import Lorentz
from .product import Product
from .spd import SPD
from .sphere import Sphere
from .stiefel import Stiefel

__all__ = ["Manifold", "Euclidean", "Sphere", "Stiefel", "Grassmann", "SPD", "Lorentz", "Product"]
