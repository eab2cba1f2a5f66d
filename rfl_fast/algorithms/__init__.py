"""Federated algorithms on manifolds, one module per family.

Each algorithm is a frozen dataclass of hyperparameters with pure client and server steps over
explicit state (protocol in :mod:`rfl_fast.algorithms.base`); run it with
:func:`rfl_fast.federation.run`.
"""

from .base import FederatedAlgorithm
from .fedavg_prox import PointState, RFedAvg, RFedProx
from .proj import ProjState, RFedProj
from .svrg import RFedSVRG, SVRGState

__all__ = ["FederatedAlgorithm", "RFedAvg", "RFedProx", "RFedSVRG", "RFedProj",
           "PointState", "SVRGState", "ProjState"]
