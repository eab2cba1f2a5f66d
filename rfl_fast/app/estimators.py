"""scikit-learn style estimators over the federated layer.

* :class:`FederatedPCA` -- principal components of data held by many clients, found by a
  federated algorithm on the Stiefel manifold (the kPCA problem); a drop-in transformer
  (``fit``/``transform``/``inverse_transform``, ``components_``, ``explained_variance_``).
* :class:`FederatedFrechetMean` -- the Frechet (Karcher) mean of SPD matrices held by many
  clients under the affine-invariant metric; ``transform`` gives tangent coordinates at the
  mean.

Both take the clients' data as a list of per-client arrays (``fit([X_0, X_1, ...])``) or as
one array with a ``clients=`` vector of client ids; their ``history_`` is the run's
:class:`~rfl_fast.federation.History` (per-round metrics and communication accounting).
"""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6: the same check is the estimator's own method
    def validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)

from .._validation import check_int
from ..errors import NoSolutionError
from ..linalg import sym_expm, sym_invsqrtm, sym_logm, sym_sqrtm
from . import names

__all__ = ["FederatedPCA", "FederatedFrechetMean", "ALGORITHMS"]

#: Algorithms the estimators accept by name (those of :mod:`rfl_fast.app.names`).
ALGORITHMS = tuple(names.ALGORITHMS)


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _participation(p):
    """``None`` -> Full(), int k -> Uniform(k), float p in (0, 1] -> Bernoulli(p), or a
    Participation as given."""
    from ..federation import Participation

    if p is None:
        return names.build("participation", "full")
    if isinstance(p, Participation):
        return p
    if _is_int(p):
        return names.build("participation", "uniform", k=int(p))
    if isinstance(p, numbers.Real) and not isinstance(p, bool) and 0 < p <= 1:
        return names.build("participation", "bernoulli", p=float(p))
    raise ValueError(f"participation: expected None (all clients), an int k (k clients per "
                     f"round), a float p in (0, 1] (each client answers with probability p) or "
                     f"a rfl_fast.federation Participation, got {p!r}")


def _seed(random_state):
    """An int seed for the engine from ``random_state`` (None: fresh entropy)."""
    if random_state is None:
        return None
    if _is_int(random_state):
        if random_state < 0:
            raise ValueError(f"random_state: expected an int >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(np.iinfo(np.int32).max))
    if not isinstance(random_state, bool):   # check_random_state takes a bool for an int
        try:  # a RandomState (scikit-learn 1.3's check_random_state takes no Generator)
            return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        except ValueError:
            pass
    raise ValueError(f"random_state: expected None, an int, a RandomState or a Generator, "
                     f"got {random_state!r}")


def _make_algorithm(name, step, local_steps, params):
    from .. import algorithms

    if isinstance(name, algorithms.FederatedAlgorithm):
        return name
    try:
        name = names.canonical("algorithm", name)
    except names.UnknownName as exc:
        raise ValueError(f"{exc} or an algorithm instance") from None
    fields = names.parameters(names.get("algorithm", name))
    kw = dict(params or {})
    if "step" in fields:
        kw["step"] = names.build_step(kw.get("step", step))
    if "local_steps" in fields:
        kw.setdefault("local_steps", local_steps)
    if name == "RFedProx":
        kw.setdefault("mu", 0.1)
    return names.build("algorithm", name, **kw)


def _group(X, clients, n_rows, seed, n_clients):
    """Row indices of each client: from ``clients`` ids, or an even random split of the rows
    into ``n_clients`` (one client when None)."""
    if clients is not None:
        ids = np.asarray(clients)
        if ids.ndim != 1 or ids.shape[0] != n_rows:
            raise ValueError(f"clients: expected one client id per sample, shape ({n_rows},), "
                             f"got shape {ids.shape}")
        _, inverse = np.unique(ids, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse)
        return np.split(order, np.cumsum(counts)[:-1])
    if n_clients is None:
        return [np.arange(n_rows)]
    k = check_int(n_clients, "n_clients", min_value=1)
    if k > n_rows:
        raise ValueError(f"n_clients={k} is larger than the number of samples n_samples="
                         f"{n_rows}")
    perm = np.random.default_rng(seed).permutation(n_rows)
    return np.array_split(perm, k)


def _is_client_list(X, sample_ndim):
    """Whether ``X`` is a list/tuple of per-client arrays (each with ``sample_ndim + 1`` axes)
    rather than one array written as nested lists (a list of rows is plain data)."""
    return (isinstance(X, (list, tuple)) and len(X) > 0
            and all(np.ndim(x) == sample_ndim + 1 for x in X))


def _stop_at(tol, scale):
    """An engine callback stopping the run once ``grad_norm <= tol * scale``."""
    if tol is None or tol <= 0:
        return None
    limit = tol * scale

    def callback(t, x, row):
        g = row.get("grad_norm", np.nan)
        return bool(g == g and g <= limit)

    return callback


# ------------------------------------------------------------------------------ PCA

class FederatedPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Principal component analysis of data spread over clients, by federated optimization
    on the Stiefel manifold.

    The clients agree on the global mean (each sends its mean and count), center their data
    with it and run a federated algorithm on ``f(X) = -sum_i (m_i/m) tr(X' A_i X)``,
    ``A_i = Z_i' Z_i / m_i``, over ``X`` in ``St(d, n_components)`` (the kPCA problem,
    :class:`rfl_fast.problems.KPCA` with sample weighting, so the objective is the pooled
    PCA of all rows). A last exchange of the ``(n_components, n_components)`` matrices
    ``X' Z_i' Z_i X`` orders the components within the found subspace (Rayleigh-Ritz) and
    gives their variances; no raw sample leaves a client.

    Parameters
    ----------
    n_components : int
        Number of components, ``1 <= n_components <= n_features``.
    algorithm : str or FederatedAlgorithm
        One of ``ALGORITHMS`` (default ``"RFedSVRG"``: variance reduction makes it converge
        to the exact PCA subspace even with heterogeneous clients), or an algorithm instance
        (then ``step``, ``local_steps`` and ``algorithm_params`` are ignored).
    step : float or "auto"
        Local step size. ``"auto"``: ``1 / max_i tr(A_i)``, from one scalar per client (safe
        for the gradient's Lipschitz constant ``2 lambda_max(A_i) <= 2 tr(A_i)``).
    local_steps : int
        Local steps per round.
    rounds : int
        Maximum number of communication rounds.
    participation : None, int, float or Participation
        ``None``: every client every round; int ``k``: ``k`` clients drawn per round; float
        ``p``: each client answers with probability ``p``.
    n_clients : int, optional
        When ``fit`` gets a plain ``X`` without ``clients``: split the rows at random into
        this many clients (default: one client, i.e. centralized Riemannian optimization).
    tol : float
        Stop once the Riemannian gradient norm is at most ``tol * sum_i (m_i/m) tr(A_i)``
        (the total variance); ``0`` runs all ``rounds``.
    algorithm_params : dict, optional
        Further parameters of the algorithm (e.g. ``{"mu": 0.1}`` for RFedProx).
    random_state : None, int, RandomState or Generator
        Seed of the initial point, client sampling and mini-batches.

    Attributes
    ----------
    components_ : ndarray, shape (n_components, n_features)
        Orthonormal principal axes, by decreasing explained variance; each row's
        largest-magnitude entry is positive (scikit-learn's sign convention).
    explained_variance_ : ndarray, shape (n_components,)
        Variance along each component (unbiased, ``m - 1`` in the denominator).
    explained_variance_ratio_ : ndarray, shape (n_components,)
    singular_values_ : ndarray, shape (n_components,)
    mean_ : ndarray, shape (n_features,)
        The pooled mean of all clients' rows.
    n_components_, n_features_in_, n_samples_, n_clients_ : int
    n_iter_ : int
        Rounds run (fewer than ``rounds`` when ``tol`` was reached).
    history_ : rfl_fast.federation.History
        Per-round metrics (``grad_norm``, ``angle`` to the exact PCA subspace, ``f_gap``)
        and accounting (bytes, CPU time). The simulation computes the metrics from all the
        data (the exact subspace centrally), for the record and for ``tol``; they never enter
        the algorithm's updates.
    algorithm_ : FederatedAlgorithm
        The algorithm used.

    Examples
    --------
    >>> from rfl_fast.app.estimators import FederatedPCA
    >>> pca = FederatedPCA(3, random_state=0).fit([X_client0, X_client1, X_client2])
    >>> Z = pca.transform(X_new)            # (m, 3)
    """

    def __init__(self, n_components=2, *, algorithm="RFedSVRG", step="auto", local_steps=5,
                 rounds=200, participation=None, n_clients=None, tol=1e-10,
                 algorithm_params=None, random_state=None):
        self.n_components = n_components
        self.algorithm = algorithm
        self.step = step
        self.local_steps = local_steps
        self.rounds = rounds
        self.participation = participation
        self.n_clients = n_clients
        self.tol = tol
        self.algorithm_params = algorithm_params
        self.random_state = random_state

    def _client_rows(self, X, clients, seed):
        """All rows (m, d) float and the row indices of each client."""
        if _is_client_list(X, 1):
            if clients is not None:
                raise ValueError("clients: give either a list of per-client arrays or one "
                                 "array X with clients=, not both")
            parts = [check_array(x, dtype=[np.float64, np.float32], input_name=f"X[{i}]")
                     for i, x in enumerate(X)]
            d = {p.shape[1] for p in parts}
            if len(d) != 1:
                raise ValueError(f"X: every client needs the same number of features, got "
                                 f"{sorted(d)}")
            sizes = [p.shape[0] for p in parts]
            stacked = validate_data(self, np.concatenate(parts), dtype=[np.float64, np.float32],
                                    ensure_min_samples=2)
            bounds = np.cumsum([0] + sizes)
            return stacked, [np.arange(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
        return X, _group(X, clients, X.shape[0], seed, self.n_clients)

    def fit(self, X, y=None, *, clients=None):
        """Fit the principal subspace by a federated run.

        Parameters
        ----------
        X : array_like, shape (m, n_features), or list of array_like (m_i, n_features)
            All rows (with ``clients``), or one array per client.
        y : ignored
        clients : array_like, shape (m,), optional
            Client id of every row of ``X`` (any hashable labels).

        Returns
        -------
        self
        """
        from ..federation import run
        from ..problems import KPCA

        seed = _seed(self.random_state)
        X, groups = self._client_rows(X, clients, seed)
        m, d = X.shape
        r = self.n_components
        if not _is_int(r) or not 1 <= r <= d:
            raise ValueError(f"n_components={r!r} must be an int between 1 and "
                             f"n_features={d}")
        rounds = check_int(self.rounds, "rounds", min_value=0)
        X = np.asarray(X, dtype=np.float64)
        sizes = np.array([g.size for g in groups], dtype=np.float64)
        # one statistics exchange: client means and counts -> the pooled mean
        means = np.stack([X[g].mean(axis=0) for g in groups])
        mean = sizes @ means / m
        parts = [X[g] - mean for g in groups]
        traces = np.array([np.einsum("ij,ij->", z, z) / z.shape[0] for z in parts])
        total = float(sizes @ traces / m)               # tr of the pooled covariance (ddof 0)
        step = self.step
        if isinstance(step, str):
            if step != "auto":
                raise ValueError(f"step: expected a number > 0 or 'auto', got {step!r}")
            step = 1.0 / traces.max() if traces.max() > 0 else 1.0
        algorithm = _make_algorithm(self.algorithm, step, self.local_steps,
                                    self.algorithm_params)
        problem = KPCA(parts, r, weighting="samples")
        scale = total if total > 0 else 1.0
        res = run(problem, algorithm, rounds, participation=_participation(self.participation),
                  seed=seed, callback=_stop_at(self.tol, scale))
        basis = np.asarray(res.x, dtype=np.float64)             # (d, r), orthonormal
        # Rayleigh-Ritz: order the directions inside span(basis) by variance
        gram = sum(((z @ basis).T @ (z @ basis)) for z in parts) / m
        lam, vecs = np.linalg.eigh(0.5 * (gram + gram.T))
        order = np.argsort(lam)[::-1]
        lam, comps = np.maximum(lam[order], 0.0), (basis @ vecs[:, order]).T
        big = np.argmax(np.abs(comps), axis=1)
        comps *= np.where(comps[np.arange(r), big] < 0, -1.0, 1.0)[:, None]
        self.mean_ = mean
        self.components_ = comps
        self.explained_variance_ = lam * m / (m - 1)
        total_var = total * m / (m - 1)
        self.explained_variance_ratio_ = (self.explained_variance_ / total_var if total_var > 0
                                          else np.zeros(r))
        self.singular_values_ = np.sqrt(lam * m)
        self.n_components_ = r
        self.n_samples_ = m
        self.n_clients_ = len(groups)
        self.n_iter_ = res.rounds
        self.history_ = res.history
        self.algorithm_ = res.algorithm
        return self

    def transform(self, X):
        """Project rows on the components.

        Parameters
        ----------
        X : array_like, shape (m, n_features)

        Returns
        -------
        ndarray, shape (m, n_components)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, X):
        """Map component scores back to feature space.

        Parameters
        ----------
        X : array_like, shape (m, n_components)

        Returns
        -------
        ndarray, shape (m, n_features)
        """
        check_is_fitted(self)
        X = check_array(X, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_components_:
            raise ValueError(f"X has {X.shape[1]} columns, but {type(self).__name__} has "
                             f"{self.n_components_} components")
        return X @ self.components_ + self.mean_

    @property
    def _n_features_out(self):
        return self.components_.shape[0]


# ------------------------------------------------------------------------------ SPD mean

def _spd_stack(x, name):
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[0] < 1:
        raise ValueError(f"{name}: expected a stack of square matrices, shape (m, n, n), got "
                         f"{a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or inf")
    return a


class FederatedFrechetMean(BaseEstimator):
    """Frechet (Karcher) mean of SPD matrices spread over clients, under the affine-invariant
    metric, by a federated algorithm on ``S++(n)``.

    Minimizes ``f(M) = sum_i (m_i/m) (1/m_i) sum_j dist^2(M, Z_ij)`` (the mean over all
    matrices; :class:`rfl_fast.problems.SPDMean` with sample weighting), starting from the
    pooled arithmetic mean (one exchange of client means and counts).

    Parameters
    ----------
    algorithm : str or FederatedAlgorithm
        One of ``ALGORITHMS`` (default ``"RFedSVRG"``) or an algorithm instance.
    step : float
        Local step size (``0.25``: with ``grad f_i = -2 mean Log``, two local steps of 0.25
        make one Karcher fixed-point step).
    local_steps : int
    rounds : int
        Maximum number of rounds.
    participation : None, int, float or Participation
        As in :class:`FederatedPCA`.
    tol : float
        Stop once the Riemannian gradient norm is at most ``tol`` (the affine-invariant
        metric is scale free); ``0`` runs all ``rounds``.
    algorithm_params : dict, optional
    random_state : None, int, RandomState or Generator

    Attributes
    ----------
    mean_ : ndarray, shape (n, n)
        The Frechet mean.
    n_samples_, n_clients_, n_iter_ : int
    history_ : rfl_fast.federation.History
    algorithm_ : FederatedAlgorithm
    """

    def __init__(self, *, algorithm="RFedSVRG", step=0.25, local_steps=2, rounds=100,
                 participation=None, tol=1e-10, algorithm_params=None, random_state=None):
        self.algorithm = algorithm
        self.step = step
        self.local_steps = local_steps
        self.rounds = rounds
        self.participation = participation
        self.tol = tol
        self.algorithm_params = algorithm_params
        self.random_state = random_state

    def fit(self, X, y=None, *, clients=None):
        """Fit the mean by a federated run.

        Parameters
        ----------
        X : list of array_like (m_i, n, n), or array_like (m, n, n) with ``clients``
            SPD matrices of each client. A single (m, n, n) stack without ``clients`` is one
            client.
        y : ignored
        clients : array_like, shape (m,), optional
            Client id of every matrix.

        Returns
        -------
        self
        """
        from ..federation import run
        from ..problems import SPDMean

        seed = _seed(self.random_state)
        if _is_client_list(X, 2):
            if clients is not None:
                raise ValueError("clients: give either a list of per-client stacks or one "
                                 "stack with clients=, not both")
            parts = [_spd_stack(x, f"X[{i}]") for i, x in enumerate(X)]
            shapes = {p.shape[1:] for p in parts}
            if len(shapes) != 1:
                raise ValueError(f"X: every client needs matrices of the same size, got "
                                 f"{sorted(shapes)}")
        else:
            stack = _spd_stack(X, "X")
            parts = [stack[g] for g in _group(stack, clients, stack.shape[0], seed, None)]
        rounds = check_int(self.rounds, "rounds", min_value=0)
        sizes = np.array([p.shape[0] for p in parts], dtype=np.float64)
        m = int(sizes.sum())
        problem = SPDMean(parts, weighting="samples")   # checks symmetry and definiteness
        x0 = sum(p.sum(axis=0) for p in parts) / m       # pooled arithmetic mean, SPD
        x0 = 0.5 * (x0 + x0.T)
        algorithm = _make_algorithm(self.algorithm, self.step, self.local_steps,
                                    self.algorithm_params)
        res = run(problem, algorithm, rounds, participation=_participation(self.participation),
                  x0=x0, seed=seed, callback=_stop_at(self.tol, 1.0))
        mean = np.asarray(res.x, dtype=np.float64)
        self.mean_ = 0.5 * (mean + mean.T)
        self.n_samples_ = m
        self.n_clients_ = len(parts)
        self.n_iter_ = res.rounds
        self.history_ = res.history
        self.algorithm_ = res.algorithm
        return self

    def transform(self, X):
        """Tangent coordinates at the mean: ``vec(logm(M^-1/2 X M^-1/2))``.

        The upper triangle with off-diagonal entries times ``sqrt(2)``, so the Euclidean
        norm of a row is the affine-invariant distance ``dist(mean_, X_j)``.

        Parameters
        ----------
        X : array_like, shape (m, n, n)
            SPD matrices.

        Returns
        -------
        ndarray, shape (m, n (n + 1) / 2)
        """
        check_is_fitted(self)
        X = _spd_stack(X, "X")
        n = self.mean_.shape[0]
        if X.shape[1] != n:
            raise ValueError(f"X: expected matrices of size ({n}, {n}), got {X.shape[1:]}")
        inv_sqrt = sym_invsqrtm(self.mean_)
        c = inv_sqrt @ X @ inv_sqrt
        try:                                    # one eigendecomposition per matrix
            L = sym_logm(0.5 * (c + np.swapaxes(c, -1, -2)))
        except NoSolutionError:
            raise ValueError("X: matrices must be symmetric positive definite") from None
        iu = np.triu_indices(n)
        w = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
        return L[:, iu[0], iu[1]] * w

    def inverse_transform(self, T):
        """SPD matrices from tangent coordinates (the inverse of :meth:`transform`).

        Parameters
        ----------
        T : array_like, shape (m, n (n + 1) / 2)

        Returns
        -------
        ndarray, shape (m, n, n)
        """
        check_is_fitted(self)
        sqrt = sym_sqrtm(self.mean_)
        T = check_array(T, dtype=np.float64)
        n = self.mean_.shape[0]
        if T.shape[1] != n * (n + 1) // 2:
            raise ValueError(f"T: expected {n * (n + 1) // 2} columns, got {T.shape[1]}")
        iu = np.triu_indices(n)
        w = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
        L = np.zeros((T.shape[0], n, n))
        L[:, iu[0], iu[1]] = T / w
        L[:, iu[1], iu[0]] = T / w
        return sqrt @ sym_expm(L) @ sqrt

    def dist(self, X):
        """Affine-invariant distance of each matrix to the mean.

        Parameters
        ----------
        X : array_like, shape (m, n, n)

        Returns
        -------
        ndarray, shape (m,)
        """
        return np.linalg.norm(self.transform(X), axis=1)
