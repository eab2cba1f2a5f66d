"""rfl_fast's algorithms as a real Flower federation (optional extra ``rfl_fast[flower]``).

* :func:`server_app` -- a Flower ``ServerApp`` driving any rfl_fast algorithm
  (:func:`run_federation`: the simulation's round driver over :class:`MessageLink`);
* :func:`client_app` -- a Flower ``ClientApp`` running the algorithm's client hooks on the
  client's own data (:func:`handle`, the task named in the run config);
* :mod:`.codec` -- the wire format (arrays with their manifold named);
* :mod:`.schema` -- every message's declared, typed and bounded schema, read on arrival;
* :mod:`.spec` -- the run config both sides read (registered names only: :class:`AppNames`);
  :mod:`.tasks` -- built-in client tasks;
* :func:`write_app` -- a ready-to-run Flower app directory.

Only :func:`server_app`, :func:`client_app` and :class:`FlowerLink` import ``flwr``; the
rest (and :class:`InProcessLink`, the protocol run in one process) works without it. See
``docs/flower.md``.
"""

from .app import write_app, write_run_config
from .client import NodePolicy, client_app, handle
from .codec import manifold_from_spec, manifold_spec, pack
from .schema import Refused, check_arrays
from .server import (Failure, FlowerLink, InProcessLink, MessageLink, RemoteProblem,
                     run_federation, server_app)
from .spec import AppNames, FederationConfig, build_algorithm, build_participation

__all__ = ["server_app", "client_app", "run_federation", "handle", "MessageLink",
           "FederationConfig", "AppNames", "NodePolicy", "Refused", "RemoteProblem",
           "InProcessLink", "FlowerLink", "Failure", "pack", "check_arrays", "manifold_spec",
           "manifold_from_spec", "build_algorithm", "build_participation",
           "write_app", "write_run_config"]
