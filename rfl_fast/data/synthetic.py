"""Seeded synthetic data generators of the source papers (the five source papers: docs/references).

Every generator takes ``rng`` (None, an int seed or a ``numpy.random.Generator``); the same
seed gives bit-identical output. All outputs are float64 and C-contiguous, with the client
axis first so that they can be handed to :class:`rfl_fast.data.ClientData` or stacked kernels.

Readings of the papers taken here (the seeds are plain-text extractions):

* Li & Ma 2022 (Li & Ma, section 5.2): ``X_i`` in ``R^{d x p}`` standard normal, ``A_i = X_i X_i'``.
  The paper does not scale by ``p``; :func:`gaussian_covariances` follows it by default
  (``normalize="sum"``) and offers ``"mean"`` (``A_i = X_i X_i' / p``).
* Xiao et al. 2024 (Xiao, Yan, Wang, eq. 54): ``C_i`` in ``R^{p x d}`` with standard normal rows,
  ``A_i = C_i' C_i`` (the extraction lost the transpose; ``C_i C_i'`` would be ``p x p``).
  With ``p >= d`` these are SPD almost surely and are the data of the SPD Karcher mean
  (``d = p = 20``): :func:`gaussian_gram_spd`.
* Huang et al. 2024/Huang et al. 2025 eigengap construction: ``Sigma = diag(1, 1-1.1nu, 1-1.2nu, 1-1.3nu, 1-1.4nu,
  |y_1|/(d+1), |y_2|/(d+1), ...)``. The "..." between ``1-1.1nu`` and ``1-1.4nu`` is read as
  ``1-1.2nu, 1-1.3nu`` (five leading entries, as in Shamir's VR-PCA experiments from which the
  construction comes). See :func:`eigengap_clients` for ``U_i``/``V``.
* Huang et al. 2025 heterogeneous data: ``Z_ij ~ N(0, i/N)`` is read as variance ``i/N`` (1-based ``i``).
* Huang et al. 2024/Huang et al. 2025 SPD data: Wishart ``W(I_d/d, d)``; Xiao et al. 2024's SPD data are the Gram matrices above.
* Huang et al. 2025 Brockett: ``A_ij = B + B'`` with standard normal ``B``. These are symmetric but *not*
  positive definite, although the slide writes ``D_i subset S++^d``.
* Huang et al. 2024 hyperbolic structured prediction uses the WordNet mammals subtree, which cannot be
  downloaded here; :func:`hyperbolic_tree` builds a seeded random tree instead, embeds it in
  ``H^2`` (Lorentz model) with Sarkar's construction and gives each node Laplacian-eigenmap
  features.
"""

from dataclasses import dataclass

import numpy as np

from .._validation import as_rng, check_choice, check_float, check_int

__all__ = [
    "gaussian_covariances",
    "gaussian_gram_spd",
    "eigengap_spectrum",
    "eigengap_clients",
    "heterogeneous_gaussian_clients",
    "wishart_spd",
    "wishart_clients",
    "brockett_matrices",
    "random_orthonormal",
    "random_tree",
    "HyperbolicTree",
    "hyperbolic_tree",
]


# --------------------------------------------------------------------------- helpers


def random_orthonormal(n_rows, n_cols, size=None, *, rng=None):
    """Haar-distributed matrices with orthonormal columns (or rows if ``n_rows < n_cols``).

    Parameters
    ----------
    n_rows, n_cols : int
        Shape of each matrix.
    size : int or None
        Number of matrices; ``None`` returns a single matrix.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Q : ndarray, shape (n_rows, n_cols) or (size, n_rows, n_cols)
        ``Q'Q = I`` if ``n_rows >= n_cols``, else ``Q Q' = I``.
    """
    n_rows = check_int(n_rows, "n_rows", min_value=1)
    n_cols = check_int(n_cols, "n_cols", min_value=1)
    count = 1 if size is None else check_int(size, "size", min_value=1)
    gen = as_rng(rng)
    tall = n_rows >= n_cols
    a, b = (n_rows, n_cols) if tall else (n_cols, n_rows)
    g = gen.standard_normal((count, a, b))
    q, r = np.linalg.qr(g)
    # sign fix makes the distribution Haar (QR alone is not rotation invariant)
    s = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    s[s == 0] = 1.0
    q = q * s[:, None, :]
    if not tall:
        q = np.swapaxes(q, -1, -2)
    q = np.ascontiguousarray(q)
    return q[0] if size is None else q


def _sym(a):
    return 0.5 * (a + np.swapaxes(a, -1, -2))


# --------------------------------------------------------------------------- Gaussian covariances


def gaussian_covariances(n_clients, d, p, *, normalize="sum", return_samples=False, rng=None):
    """Client covariances ``A_i = X_i X_i'`` with standard normal ``X_i`` (Li & Ma 2022, section 5.2).

    Parameters
    ----------
    n_clients : int
        Number of clients ``n``.
    d : int
        Ambient dimension.
    p : int
        Samples per client (columns of ``X_i``); the paper's PCA run uses ``n * p = 10000``.
    normalize : {"sum", "mean"}
        ``"sum"``: ``A_i = X_i X_i'`` exactly as the paper writes it (eigenvalues grow with
        ``p``). ``"mean"``: ``A_i = X_i X_i' / p`` (a sample covariance, eigenvalues ~ 1).
    return_samples : bool
        Also return the samples, one row per sample: ``samples[i] = X_i'``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    A : ndarray, shape (n_clients, d, d)
        Symmetric positive semidefinite (definite if ``p >= d``), exactly symmetric.
    samples : ndarray, shape (n_clients, p, d)
        Only if ``return_samples``.
    """
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    d = check_int(d, "d", min_value=1)
    p = check_int(p, "p", min_value=1)
    check_choice(normalize, "normalize", ("sum", "mean"))
    gen = as_rng(rng)
    x = gen.standard_normal((n_clients, p, d))  # rows are samples: x[i] = X_i'
    a = _sym(np.einsum("nji,njk->nik", x, x, optimize=True))
    if normalize == "mean":
        a /= p
    a = np.ascontiguousarray(a)
    return (a, x) if return_samples else a


def gaussian_gram_spd(n_clients, d, p=None, *, normalize="sum", return_samples=False, rng=None):
    """SPD client matrices ``A_i = C_i' C_i``, ``C_i`` with standard normal rows (Xiao et al. 2024, eq. 54).

    These are the client data of Xiao et al. 2024's SPD Karcher mean (``d = p = 20``, ``n = 10``). Xiao et al. 2024's
    PCA (``p = 10000 / n`` rows, ``d = 600``) has ``p < d`` and PSD matrices: use
    :func:`gaussian_covariances` (``d``, ``p``) for it, which draws the same law.

    Parameters
    ----------
    n_clients : int
    d : int
        Matrix size.
    p : int, optional
        Rows of ``C_i``; defaults to ``d``. Must be ``>= d`` so that ``A_i`` is SPD.
    normalize : {"sum", "mean"}
        ``"sum"``: ``C_i' C_i`` as in the paper; ``"mean"``: ``C_i' C_i / p`` (a draw of
        ``W(I_d/p, p)``, mean ``I_d``).
    return_samples : bool
        Also return ``C``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    A : ndarray, shape (n_clients, d, d)
        Symmetric positive definite.
    C : ndarray, shape (n_clients, p, d)
        Only if ``return_samples``.
    """
    d = check_int(d, "d", min_value=1)
    p = d if p is None else check_int(p, "p", min_value=1)
    if p < d:
        raise ValueError(
            f"p: expected p >= d so that C_i'C_i is positive definite, got p={p} < d={d} "
            "(use gaussian_covariances for PSD matrices)"
        )
    return gaussian_covariances(
        n_clients, d, p, normalize=normalize, return_samples=return_samples, rng=rng
    )


# --------------------------------------------------------------------------- eigengap construction


def eigengap_spectrum(dim, nu, y):
    """The diagonal ``(1, 1-1.1nu, 1-1.2nu, 1-1.3nu, 1-1.4nu, |y_1|/dim, ...)`` of Huang et al. 2024 and Huang et al. 2025.

    Parameters
    ----------
    dim : int
        Ambient dimension, the papers' ``d + 1`` (the sphere is ``S^d`` in ``R^{d+1}``).
    nu : float
        Eigengap, ``0 < nu < 1/1.4`` so that every leading entry is positive.
    y : array_like, shape (..., max(dim - 5, 0))
        Standard normal draws for the tail.

    Returns
    -------
    sigma : ndarray, shape (..., dim)
        The leading ``min(dim, 5)`` entries followed by ``|y| / dim``.
    """
    head = 1.0 - np.array([0.0, 1.1, 1.2, 1.3, 1.4]) * nu
    y = np.asarray(y, dtype=np.float64)
    k = min(dim, 5)
    lead = np.broadcast_to(head[:k], y.shape[:-1] + (k,))
    return np.concatenate([lead, np.abs(y) / dim], axis=-1)


def eigengap_clients(
    n_clients, n_samples, dim, nu=1e-3, *, shared_basis=True, return_basis=False, rng=None
):
    """Client samples ``Z_i = U_i Sigma_i V`` with a designed eigengap (Huang et al. 2024 and Huang et al. 2025).

    Client ``i`` holds the rows ``z_ij = Z_i[j, :]'`` of ``Z_i`` (``n_samples x dim``).

    Readings taken (the slide text is partly garbled):

    * ``Sigma_i = diag(1, 1-1.1nu, 1-1.2nu, 1-1.3nu, 1-1.4nu, |y_1|/dim, ...)`` with fresh
      standard normal ``y`` per client (``Sigma_i`` carries the index ``i`` in both papers).
      The leading five entries are the top singular values whenever ``max|y_k| / dim <
      1 - 1.4 nu`` (always in practice for ``dim >= 20``, ``nu <= 0.1``).
    * ``V`` (``dim x dim``, Haar orthogonal) is shared by all clients by default: Huang et al. 2025 writes
      ``V`` without index, and only a shared ``V`` makes ``nu`` the gap of the global problem
      (its top eigenvector is then ``V[0]``). ``shared_basis=False`` draws one ``V_i`` per
      client, the literal reading of Huang et al. 2024 ("``U_i, V_i`` ... random column orthonormal").
    * ``U_i`` (``n_samples x dim``) has orthonormal columns when ``n_samples >= dim`` (Huang et al. 2024:
      ``N_i = 70 > d+1 = 25``); then ``Z_i' Z_i = V' Sigma_i^2 V`` exactly. When
      ``n_samples < dim`` (Huang et al. 2025's sphere run: ``S = 10``, ``d+1 = 26``) orthonormal columns do not
      exist and ``U_i`` gets orthonormal rows instead (``Z_i' Z_i`` is then a rank-``n_samples``
      compression of that matrix).

    Parameters
    ----------
    n_clients : int
        ``N``.
    n_samples : int
        Samples per client (``N_i`` or ``S``).
    dim : int
        Ambient dimension, the papers' ``d + 1`` (e.g. 26 for Huang et al. 2025's ``d = 25``), ``dim >= 2``.
    nu : float
        Eigengap, ``0 < nu < 1/1.4``.
    shared_basis : bool
        One ``V`` for all clients (default) or one per client.
    return_basis : bool
        Also return ``V`` and the diagonals.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Z : ndarray, shape (n_clients, n_samples, dim)
    V : ndarray, shape (dim, dim) or (n_clients, dim, dim)
        Only if ``return_basis``; shape ``(dim, dim)`` when ``shared_basis``.
    sigma : ndarray, shape (n_clients, dim)
        Only if ``return_basis``; the diagonals of ``Sigma_i`` in construction order.
    """
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    dim = check_int(dim, "dim", min_value=2)
    nu = check_float(nu, "nu", low=0.0, high=1.0 / 1.4, low_open=True, high_open=True)
    gen = as_rng(rng)
    y = gen.standard_normal((n_clients, max(dim - 5, 0)))
    sigma = eigengap_spectrum(dim, nu, y)
    u = random_orthonormal(n_samples, dim, n_clients, rng=gen)
    v = random_orthonormal(dim, dim, None if shared_basis else n_clients, rng=gen)
    z = np.matmul(u * sigma[:, None, :], v)
    z = np.ascontiguousarray(z)
    return (z, v, sigma) if return_basis else z


def heterogeneous_gaussian_clients(n_clients, n_samples, d, *, rng=None):
    """Heterogeneous clients ``z_ij ~ N(0, (i/N) I_d)``, ``i = 1..N`` (Huang et al. 2025, Stiefel PCA).

    ``N(0, i/N)`` is read as variance ``i/N`` (standard deviation ``sqrt(i/N)``), so client
    ``N`` has the largest spread. Huang et al. 2025 uses ``(N, S) = (40, 100)``, ``d = 100``.

    Parameters
    ----------
    n_clients : int
    n_samples : int
        Samples per client ``S``.
    d : int
        Dimension.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Z : ndarray, shape (n_clients, n_samples, d)
    """
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    d = check_int(d, "d", min_value=1)
    gen = as_rng(rng)
    std = np.sqrt(np.arange(1, n_clients + 1, dtype=np.float64) / n_clients)
    return gen.standard_normal((n_clients, n_samples, d)) * std[:, None, None]


# --------------------------------------------------------------------------- SPD / Wishart


def _wishart_draw(gen, count, d, df, chol):
    g = gen.standard_normal((count, df, d))
    w = np.einsum("nji,njk->nik", g, g, optimize=True)
    if chol is not None:
        w = chol @ w @ chol.T
    return _sym(w)


def wishart_spd(n, d, *, df=None, scale=None, diameter=None, max_draws=1_000_000, rng=None):
    """Wishart samples ``W(scale, df)``, by default ``W(I_d/d, d)`` (Huang et al. 2024, Huang et al. 2025).

    ``W(Sigma, df)`` is the law of ``G' G`` with ``G`` of shape ``(df, d)`` whose rows are
    ``N(0, Sigma)``; its mean is ``df * Sigma`` (the identity for the default).

    Parameters
    ----------
    n : int
        Number of samples.
    d : int
        Matrix size.
    df : int, optional
        Degrees of freedom, ``df >= d`` (so samples are SPD a.s.); defaults to ``d``.
    scale : array_like, shape (d, d), optional
        SPD scale matrix; defaults to ``I_d / d``.
    diameter : float, optional
        The papers state a "diameter bound ``D_W``" of the data set. If given, samples are
        drawn by rejection so that each lies within affine-invariant distance
        ``diameter / 2`` of the mean ``df * scale`` (hence any two within ``diameter``).
        Acceptance is low: about 1.4% for ``d = 2``, ``diameter = 1``; it is essentially zero
        for ``d >= 5``, in which case ``max_draws`` stops the search with an error.
        ``None`` (default) keeps the plain Wishart law.
    max_draws : int
        Cap on the number of candidate draws when ``diameter`` is given.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    W : ndarray, shape (n, d, d)
        Symmetric positive definite matrices.
    """
    n = check_int(n, "n", min_value=1)
    d = check_int(d, "d", min_value=1)
    df = d if df is None else check_int(df, "df", min_value=1)
    if df < d:
        raise ValueError(f"df: expected df >= d (= {d}) so that samples are SPD, got {df}")
    if scale is None:
        chol = None
        mean = np.eye(d)
        base = 1.0 / d
    else:
        s = np.asarray(scale)
        if s.dtype.kind not in "iuf":
            raise TypeError(f"scale: expected a real (d, d) array, got dtype {s.dtype}")
        s = s.astype(np.float64)
        if s.shape != (d, d):
            raise ValueError(f"scale: expected shape ({d}, {d}), got {s.shape}")
        if not np.allclose(s, s.T, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(s).max())):
            raise ValueError("scale: expected a symmetric matrix")
        try:
            chol = np.linalg.cholesky(s)
        except np.linalg.LinAlgError:
            raise ValueError("scale: expected a positive definite matrix") from None
        mean = df * s
        base = 1.0
    gen = as_rng(rng)
    if diameter is None:
        w = _wishart_draw(gen, n, d, df, chol)
        return np.ascontiguousarray(w * base) if chol is None else np.ascontiguousarray(w)
    diameter = check_float(diameter, "diameter", low=0.0, low_open=True)
    max_draws = check_int(max_draws, "max_draws", min_value=1)
    lam, q = np.linalg.eigh(mean)
    m_isqrt = (q / np.sqrt(lam)) @ q.T
    kept, total, drawn = [], 0, 0
    batch = max(64, 4 * n)
    while total < n:
        if drawn >= max_draws:
            raise ValueError(
                f"diameter: only {total} of {n} Wishart samples fell within distance "
                f"{diameter / 2:g} of the mean after {drawn} draws; increase diameter or max_draws"
            )
        count = min(batch, max_draws - drawn)
        w = _wishart_draw(gen, count, d, df, chol)
        if chol is None:
            w *= base
        drawn += count
        ev = np.linalg.eigvalsh(m_isqrt @ w @ m_isqrt)
        dist = np.sqrt(np.sum(np.log(ev) ** 2, axis=-1))
        ok = w[dist <= diameter / 2]
        kept.append(ok[: n - total])
        total += kept[-1].shape[0]
    return np.ascontiguousarray(np.concatenate(kept, axis=0))


def wishart_clients(n_clients, n_samples, d, *, df=None, diameter=None, rng=None):
    """SPD client data ``Z_ij ~ W(I_d/d, d)`` for the Frechet mean (Huang et al. 2024: ``d = 2``; Huang et al. 2025: ``d = 2``,
    ``N = 60``, ``S = 10``).

    Parameters
    ----------
    n_clients, n_samples, d : int
    df, diameter
        As in :func:`wishart_spd`.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    Z : ndarray, shape (n_clients, n_samples, d, d)
        SPD; ``Z[i, j]`` is the ``j``-th sample of client ``i``.
    """
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    w = wishart_spd(n_clients * n_samples, d, df=df, diameter=diameter, rng=rng)
    return w.reshape(n_clients, n_samples, w.shape[-2], w.shape[-1])


# --------------------------------------------------------------------------- Brockett


def brockett_matrices(n_clients, n_samples, d, *, rng=None):
    """Brockett data ``A_ij = B + B'``, ``B`` standard normal ``d x d`` (Huang et al. 2025, MBCFSti).

    Huang et al. 2025 uses ``d = 25``, ``p = 2``, ``S = 20``, ``N = 50``. The matrices are symmetric, not
    positive definite (the slide's ``subset S++^d`` is taken as a typo).

    Parameters
    ----------
    n_clients, n_samples, d : int
    rng : None, int or numpy.random.Generator

    Returns
    -------
    A : ndarray, shape (n_clients, n_samples, d, d)
        Exactly symmetric.
    """
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    n_samples = check_int(n_samples, "n_samples", min_value=1)
    d = check_int(d, "d", min_value=1)
    gen = as_rng(rng)
    b = gen.standard_normal((n_clients, n_samples, d, d))
    return np.ascontiguousarray(b + np.swapaxes(b, -1, -2))


# --------------------------------------------------------------------------- hyperbolic tree


def random_tree(n_nodes, *, max_children=4, rng=None):
    """A seeded random rooted tree grown breadth first.

    Nodes are numbered in breadth-first order (root 0, ``parents[v] < v``). Each node, taken
    in that order, receives ``Uniform{1..max_children}`` children until ``n_nodes`` exist, so
    the depth grows like ``log(n_nodes)`` (keeps a hyperbolic embedding numerically tame).

    Parameters
    ----------
    n_nodes : int
        ``>= 1``.
    max_children : int
        ``>= 1``.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    parents : ndarray of int64, shape (n_nodes,)
        ``parents[0] = -1``.
    """
    n_nodes = check_int(n_nodes, "n_nodes", min_value=1)
    max_children = check_int(max_children, "max_children", min_value=1)
    gen = as_rng(rng)
    parents = np.full(n_nodes, -1, dtype=np.int64)
    nxt, node = 1, 0
    while nxt < n_nodes:
        k = min(int(gen.integers(1, max_children + 1)), n_nodes - nxt)
        parents[nxt:nxt + k] = node
        nxt += k
        node += 1
    return parents


@dataclass(frozen=True, eq=False)
class HyperbolicTree:
    """A tree embedded in the Lorentz model of ``H^2`` with per-node features.

    Parameters
    ----------
    points : ndarray, shape (n_nodes, 3)
        Points on the hyperboloid ``-x0^2 + x1^2 + x2^2 = -1``, ``x0 > 0``.
    features : ndarray, shape (n_nodes, n_features)
        Laplacian-eigenmap coordinates of each node.
    parents : ndarray of int64, shape (n_nodes,)
        Parent of each node, ``-1`` for the root (node 0).
    depths : ndarray of int64, shape (n_nodes,)
        Edges from the root.
    edges : ndarray of int64, shape (n_nodes - 1, 2)
        ``(parent, child)`` pairs.
    edge_length : float
        Hyperbolic length of every tree edge.
    """

    points: np.ndarray
    features: np.ndarray
    parents: np.ndarray
    depths: np.ndarray
    edges: np.ndarray
    edge_length: float

    @property
    def n_nodes(self):
        """Number of nodes."""
        return self.points.shape[0]

    def graph_distances(self):
        """Tree (hop) distances between all nodes, shape ``(n_nodes, n_nodes)``, int64."""
        n = self.n_nodes
        dist = np.zeros((n, n), dtype=np.int64)
        for v in range(1, n):  # BFS order: parent row is complete
            p = self.parents[v]
            dist[v, :v] = dist[p, :v] + 1
            dist[:v, v] = dist[v, :v]
        return dist


def _sarkar_lorentz(parents, tau):
    """Sarkar's construction in the Lorentz model of H^2 (parents before children).

    Each node carries a Lorentz-orthonormal frame ``F = [x, t, m]`` (columns: the point, the
    unit tangent towards its parent, the normal). A child at angle ``phi`` from ``t`` has frame
    ``F R(phi) L(tau) P``: rotate in the tangent plane, boost by ``tau`` along the first
    spatial axis, then turn by ``pi`` so that the child's ``t`` points back to the parent.
    Working with frames avoids the cancellation of recomputing tangents from far-out points.
    """
    n = parents.shape[0]
    children = [[] for _ in range(n)]
    for v in range(1, n):
        children[parents[v]].append(v)
    ch, sh = np.cosh(tau), np.sinh(tau)
    boost_flip = np.array([[ch, -sh, 0.0], [sh, -ch, 0.0], [0.0, 0.0, -1.0]])  # L(tau) @ P
    frames = np.zeros((n, 3, 3))
    frames[0] = np.eye(3)
    for u in range(n):
        kids = children[u]
        if not kids:
            continue
        slots, first = (len(kids), 0) if u == 0 else (len(kids) + 1, 1)  # slot 0: parent
        phi = 2.0 * np.pi * np.arange(first, first + len(kids)) / slots
        rot = np.zeros((len(kids), 3, 3))
        rot[:, 0, 0] = 1.0
        rot[:, 1, 1] = rot[:, 2, 2] = np.cos(phi)
        rot[:, 2, 1] = np.sin(phi)
        rot[:, 1, 2] = -np.sin(phi)
        frames[kids] = frames[u] @ rot @ boost_flip
    pts = np.ascontiguousarray(frames[:, :, 0])
    pts[:, 0] = np.sqrt(1.0 + np.sum(pts[:, 1:] ** 2, axis=1))  # exactly onto the upper sheet
    return pts


def _laplacian_eigenmap(parents, n_features, closure):
    n = parents.shape[0]
    adj = np.zeros((n, n))
    for v in range(1, n):
        a = parents[v]
        while a >= 0:
            adj[v, a] = adj[a, v] = 1.0
            if not closure:
                break
            a = parents[a]
    deg = adj.sum(axis=1)
    # generalized problem L v = lambda D v (Belkin & Niyogi), solved through the normalized
    # Laplacian I - D^-1/2 A D^-1/2 (v = D^-1/2 u); skip the constant eigenvector
    s = 1.0 / np.sqrt(deg)
    lap_sym = np.eye(n) - s[:, None] * adj * s[None, :]
    from scipy.linalg import eigh
    _, u = eigh(lap_sym, subset_by_index=(1, n_features))
    vec = s[:, None] * u
    idx = np.argmax(np.abs(vec), axis=0)
    vec = vec * np.sign(vec[idx, np.arange(vec.shape[1])])  # deterministic signs
    return np.ascontiguousarray(vec)


def hyperbolic_tree(
    n_nodes=200, *, max_children=4, edge_length=1.0, n_features=3, closure=True, rng=None
):
    """A seeded random tree embedded in ``H^2`` (Lorentz model) with spectral node features.

    Stand-in for Huang et al. 2024's WordNet mammals subtree (1180 nodes, features from a Laplacian
    eigenmap to ``r = 3``), which cannot be downloaded here.

    * Tree: :func:`random_tree` (breadth-first, ``Uniform{1..max_children}`` children).
    * Embedding: Sarkar's construction carried out in the Lorentz model. The root sits at
      ``(1, 0, 0)``; a node of degree ``deg`` places its children at hyperbolic distance
      ``edge_length`` along tangent directions spaced ``2 pi / deg`` apart, the parent
      direction taking one slot. Every parent-child pair is at distance ``edge_length``
      exactly (up to rounding); larger ``edge_length`` lowers the distortion of other
      distances but pushes coordinates up like ``cosh(depth * edge_length)``, and the
      hyperboloid constraint only holds to about ``eps * x0^2`` in float64. Measured on 200
      nodes (``max_children=4``, depth 5): ``edge_length=1`` keeps ``x0 < 100`` (constraint
      to ~1e-12) but lets some distant branches come close (smallest ratio of hyperbolic to
      scaled tree distance ~0.01); ``edge_length=2`` gives a ratio >= 0.4 with ``x0 ~ 1e4``
      (constraint to ~1e-8).
    * Features: Laplacian eigenmap of the tree's transitive closure (``closure=True``, each node
      linked to all its ancestors, as Huang et al. 2024's "transitive closure" graph) or of the tree itself:
      the ``n_features`` generalized eigenvectors ``L v = lambda D v`` after the constant
      one, each signed so that its largest-magnitude entry is positive.

    Parameters
    ----------
    n_nodes : int
        ``>= n_features + 1``.
    max_children : int
        Maximum number of children per node (``>= 1``).
    edge_length : float
        Hyperbolic length of each edge, ``> 0``.
    n_features : int
        Feature dimension ``r`` (``>= 1``).
    closure : bool
        Build the features from the transitive closure (default) or from the tree edges.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    HyperbolicTree
        ``points`` (n_nodes, 3) on the hyperboloid, ``features`` (n_nodes, n_features),
        ``parents``, ``depths``, ``edges``.
    """
    n_nodes = check_int(n_nodes, "n_nodes", min_value=2)
    n_features = check_int(n_features, "n_features", min_value=1)
    if n_features > n_nodes - 1:
        raise ValueError(
            f"n_features: expected at most n_nodes - 1 = {n_nodes - 1} eigenmap coordinates, "
            f"got {n_features}"
        )
    edge_length = check_float(edge_length, "edge_length", low=0.0, low_open=True)
    parents = random_tree(n_nodes, max_children=max_children, rng=rng)
    depths = np.zeros(n_nodes, dtype=np.int64)
    for v in range(1, n_nodes):
        depths[v] = depths[parents[v]] + 1
    points = _sarkar_lorentz(parents, edge_length)
    features = _laplacian_eigenmap(parents, n_features, closure)
    edges = np.stack([parents[1:], np.arange(1, n_nodes, dtype=np.int64)], axis=1)
    return HyperbolicTree(
        points=points,
        features=features,
        parents=parents,
        depths=depths,
        edges=np.ascontiguousarray(edges),
        edge_length=edge_length,
    )
