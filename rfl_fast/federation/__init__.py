"""Federated layer: the round engine, its history, checkpoints, arrival checks and faults.

``run(problem, algorithm, rounds, participation=Full(), ...) -> Result`` drives any algorithm
of :mod:`rfl_fast.algorithms` (see :mod:`rfl_fast.algorithms.base` for the protocol). The
algorithms' building blocks (participation models, step schedules, consensus) live with them in
:mod:`rfl_fast.algorithms` and are re-exported here, where users import them.
"""

from ..algorithms.consensus import KarcherResult, karcher_mean, tangent_mean
from ..algorithms.participation import Bernoulli, Full, Participation, Uniform
from ..algorithms.schedules import Constant, Decaying, Schedule
from .arrival import check_upload
from .context import ClientContext, ClientRandom, ServerContext, client_rng
from .driver import Result
from .engine import resume, run
from .faults import Faults
from .history import History

__all__ = [
    "run", "resume", "Result", "History", "Faults", "check_upload",
    "Participation", "Full", "Uniform", "Bernoulli",
    "Schedule", "Constant", "Decaying",
    "tangent_mean", "karcher_mean", "KarcherResult",
    "ClientContext", "ServerContext", "ClientRandom", "client_rng",
]
