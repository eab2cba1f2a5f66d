"""Federated algorithms on manifolds, one module per family.

Each algorithm is a frozen dataclass of hyperparameters with pure client and server steps over
explicit state (protocol in :mod:`rfl_fast.algorithms.base`); run it with
:func:`rfl_fast.federation.run`.
"""

from .._validation import by_name
from .ags import AGSState, RFedAGS, reweighted_weights
from .base import FederatedAlgorithm
from .fedavg_prox import PointState, RFedAvg, RFedProx
from .pri import PriRFed, PriState
from .proj import ProjState, RFedProj
from .svrg import RFedSVRG, SVRGState
from .svrg_bb import BBState, RFedSVRG2BB, RFedSVRG2BBS

#: name -> class of every federated algorithm, the one list of them: the application's names
#: (:data:`rfl_fast.app.names.ALGORITHMS`: experiment files, estimators, the Flower run config)
#: and the arrival checks' default kinds derive from it.
ALGORITHMS = by_name((RFedAvg, RFedProx, RFedSVRG, RFedSVRG2BB, RFedSVRG2BBS, RFedProj, RFedAGS,
                      PriRFed), lambda cls: cls.__name__, "algorithms.ALGORITHMS")

__all__ = ["FederatedAlgorithm", "RFedAvg", "RFedProx", "RFedSVRG", "RFedSVRG2BB",
           "RFedSVRG2BBS", "RFedProj", "RFedAGS", "reweighted_weights", "PriRFed",
           "PointState", "SVRGState", "BBState", "ProjState", "AGSState", "PriState",
           "ALGORITHMS", "algorithm_classes"]


def algorithm_classes():
    """The registered federated algorithms, ``{name: class}`` (a copy of :data:`ALGORITHMS`)."""
    return dict(ALGORITHMS)
