"""Tasks: how a ClientApp builds its own local problem (its data never leaves the client).

A task is a function ``task(client_id, node_config, **task_kwargs) -> Problem`` returning the
problem of *one* client (``n_clients == 1``; the client's data only). It runs on the client
machine, so it reads local files or generates local data; the server never calls it. The run
config names it by its registered name (``task = "kpca_from_file"``, arguments in
``task-kwargs``): the built-in ones are :data:`rfl_fast.app.names.TASKS`, an app registers
its own in code (``client_app(tasks={"mine": my_task})``); no import path is ever resolved.
``node_config`` is the SuperNode's ``--node-config`` (e.g. a local ``data-path``): which of its
keys a task reads is the task's code, never a run config value.

A task may carry an attribute ``full(**task_kwargs) -> Problem``: the pooled problem over all
clients, for demos and tests only (the server's ``server-metrics`` option and the comparison
with :func:`rfl_fast.federation.run`).

Built-in tasks:

* :func:`synthetic_kpca` -- kPCA on Stiefel with Gaussian clients generated from
  ``(seed, client_id)`` (every client makes its own data, the same on every machine);
* :func:`kpca_from_file` -- kPCA on the samples of a local ``.npy`` file named by the node
  config's ``data-path``.
"""

import numpy as np

from .._files import read_npy
from ..problems import KPCA

__all__ = ["synthetic_kpca", "kpca_from_file", "client_samples"]


def client_samples(client_id, *, n_clients, samples, d, seed=0, spread=0.5):
    """Client ``client_id``'s samples (m_i, d): ``z ~ N(0, Q_i diag(s)^2 Q_i')`` with a common
    decaying spectrum ``s_k = 1 / (1 + k)`` and a client rotation ``Q_i = expm(spread * A_i)``
    (heterogeneous clients), from the stream ``default_rng([seed, client_id])``."""
    if not 0 <= int(client_id) < int(n_clients):
        raise ValueError(f"client_id {client_id} outside [0, {n_clients})")
    m = samples[int(client_id)] if isinstance(samples, (list, tuple)) else samples
    rng = np.random.default_rng([int(seed), int(client_id)])
    s = 1.0 / (1.0 + np.arange(d))
    a = rng.standard_normal((d, d)) * spread / np.sqrt(d)
    q, _ = np.linalg.qr(np.eye(d) + (a - a.T) / 2)
    return (rng.standard_normal((int(m), d)) * s) @ q.T


def synthetic_kpca(client_id, node_config=None, *, n_clients, samples, d, r, seed=0,
                   spread=0.5):
    """One client's kPCA problem ``St(d, r)`` on :func:`client_samples`.

    Parameters
    ----------
    client_id : int
    node_config : mapping, optional
        Unused.
    n_clients, samples, d, r, seed, spread
        ``samples`` is an int (every client) or a list (one per client).
    """
    z = client_samples(client_id, n_clients=n_clients, samples=samples, d=d, seed=seed,
                       spread=spread)
    return KPCA([z], r)


def _synthetic_full(*, n_clients, samples, d, r, seed=0, spread=0.5, weighting="uniform"):
    data = [client_samples(i, n_clients=n_clients, samples=samples, d=d, seed=seed,
                           spread=spread) for i in range(n_clients)]
    return KPCA(data, r, weighting=weighting)


synthetic_kpca.full = _synthetic_full


def kpca_from_file(client_id, node_config=None, *, r):
    """kPCA on the rows of the ``.npy`` file at ``node_config["data-path"]`` (this client's
    samples), read by :func:`rfl_fast._files.read_npy` (header checked against the file)."""
    if not node_config or "data-path" not in node_config:
        raise ValueError("kpca_from_file: the SuperNode needs --node-config 'data-path=\"...\"' "
                         "naming this client's local .npy file of samples")
    z = read_npy(str(node_config["data-path"]))
    return KPCA([np.asarray(z, dtype=np.float64)], r)
