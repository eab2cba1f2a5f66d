"""Federated problems ``f(x) = sum_i w_i f_i(x)`` on manifolds.

Every problem provides batched client losses and gradients (``loss``, ``egrad``, ``rgrad``
over client ids ``idx`` (k,) and points ``(k, *shape)``), mini-batch gradients (``batch`` (k, b)
sample indices), per-sample gradients and their norms, the optimum and per-iterate metrics.
"""

from .base import Problem
from .brockett import Brockett
from .hyperbolic import HyperbolicPrediction
from .kpca import KPCA
from .loss import LossProblem
from .spd_mean import SPDMean
from .sphere_pca import SpherePCA

__all__ = ["Problem", "SpherePCA", "KPCA", "Brockett", "SPDMean", "HyperbolicPrediction",
           "LossProblem"]
