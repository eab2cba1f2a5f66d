"""Federated layer: the round engine, participation models, step schedules and consensus.

``run(problem, algorithm, rounds, participation=Full(), ...) -> Result`` drives any algorithm
of :mod:`rfl_fast.algorithms` (see :mod:`rfl_fast.algorithms.base` for the protocol).
"""

from .arrival import check_upload
from .checkpoint import resume
from .consensus import KarcherResult, karcher_mean, tangent_mean
from .context import ClientContext, ClientRandom, ServerContext, client_rng
from .engine import Result, run
from .faults import Faults
from .history import History
from .participation import Bernoulli, Full, Participation, Uniform
from .schedules import Constant, Decaying, Schedule

__all__ = [
    "run", "resume", "Result", "History", "Faults", "check_upload",
    "Participation", "Full", "Uniform", "Bernoulli",
    "Schedule", "Constant", "Decaying",
    "tangent_mean", "karcher_mean", "KarcherResult",
    "ClientContext", "ServerContext", "ClientRandom", "client_rng",
]
