"""Federated algorithms on manifolds, one module per family.

Each algorithm is a frozen dataclass of hyperparameters with pure client and server steps over
explicit state (protocol in :mod:`rfl_fast.algorithms.base`); run it with
:func:`rfl_fast.federation.run`.
"""

from .ags import AGSState, RFedAGS, reweighted_weights
from .base import FederatedAlgorithm
from .fedavg_prox import PointState, RFedAvg, RFedProx
from .pri import PriRFed, PriState
from .proj import ProjState, RFedProj
from .svrg import RFedSVRG, SVRGState
from .svrg_bb import BBState, RFedSVRG2BB, RFedSVRG2BBS

__all__ = ["FederatedAlgorithm", "RFedAvg", "RFedProx", "RFedSVRG", "RFedSVRG2BB",
           "RFedSVRG2BBS", "RFedProj", "RFedAGS", "reweighted_weights", "PriRFed",
           "PointState", "SVRGState", "BBState", "ProjState", "AGSState", "PriState",
           "algorithm_classes"]


def algorithm_classes():
    """The federated algorithms exported here, ``{name: class}`` in export order.

    Only :class:`FederatedAlgorithm` subclasses count: the server-state classes
    (``PointState``, ``PriState``, ...) and the helper functions exported
    next to them are not algorithms. The CLI's experiment files, the Flower run config and the
    arrival checks' default kinds read this registry.
    """
    out = {}
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) and issubclass(obj, FederatedAlgorithm) \
                and obj is not FederatedAlgorithm:
            out[name] = obj
    return out
