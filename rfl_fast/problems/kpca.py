"""kPCA on the Stiefel or Grassmann manifold: the top-r eigenvectors of the clients' pooled
covariance (or the subspace they span)."""

import numpy as np

from .._typing import ArrayLike, ClientSamples, FloatArray, Self, Weighting
from .._validation import check_choice, check_int
from ..errors import InvalidParameterError
from ..manifolds import Grassmann, Stiefel
from ._numerics import principal_angles
from ._quadratic import QuadraticProblem

__all__ = ["KPCA"]


_MANIFOLDS = {"stiefel": Stiefel, "grassmann": Grassmann}


def _manifold(name, d, r):
    return _MANIFOLDS[check_choice(name, "manifold", tuple(_MANIFOLDS))](d, r)


def _check_r(r, d):
    r = check_int(r, "r")
    if not 1 <= r <= d:
        raise InvalidParameterError("r", expected=f"1 <= r <= d = {d} (the data dimension)",
                                    got=f"r = {r}")
    return r


class KPCA(QuadraticProblem):
    r"""Federated ``r``-PCA ("kPCA" in Zhang et al. 2024, Li & Ma 2022, Xiao et al. 2024) on the Stiefel manifold ``St(d, r)``
    or the Grassmann manifold ``Gr(d, r)``.

    Two forms; the seeds differ by a factor 1/2 and in the normalization of ``A_i``:

    * ``KPCA(data, r)`` -- per-sample data, Huang et al. 2025 (Stiefel PCA) and Zhang et al. 2024:
      :math:`f_{ij}(X) = -\lVert X^\top z_{ij}\rVert^2`,
      :math:`f_i(X) = \frac{1}{m_i}\sum_j f_{ij}(X) = -\operatorname{tr}(X^\top A_i X)` with
      :math:`A_i = Z_i^\top Z_i / m_i`, i.e. no factor 1/2 and a per-client mean.
    * ``KPCA.from_covariances(A, r)`` -- Li & Ma 2022 (eq. 3) and Xiao et al. 2024 (eq. 4):
      :math:`f_i(X) = -\tfrac12 \operatorname{tr}(X^\top A_i X)` with ``A_i`` as given. Li & Ma 2022
      calls ``A_i`` "the covariance matrix" without normalization; Xiao et al. 2024 (eq. 55) uses
      :math:`A_i = D_i^\top D_i` (a sum over the client's rows). To reproduce them pass those
      matrices unchanged.

    The two forms have the same minimizers (``KPCA(Z, r)`` is ``from_covariances`` with
    ``A_i = 2 Z_i'Z_i / m_i``). The optimum ``X*`` is the top-``r`` eigenvectors of
    :math:`A = \sum_i w_i A_i` (eigenvalues descending, each column signed so that its
    largest-magnitude entry is positive); any ``X* Q``, ``Q`` orthogonal, is optimal too, so
    ``dist`` and ``angle`` measure subspaces.

    The objective depends on ``span(X)`` only, so it is naturally a function on the Grassmann
    manifold (``manifold="grassmann"``): the same gradients (on Stiefel the projection of
    ``-2c A_i X`` is ``-2c (I - XX') A_i X`` as well, since ``X' A_i X`` is symmetric), the same
    polar retraction, but the server's consensus reads the clients' points as subspaces
    (``inv_retr`` of :class:`~rfl_fast.manifolds.Grassmann` does not depend on the bases the clients
    return), and ``dist`` is the principal-angle distance. The papers' experiments use Stiefel.

    Gradients: :math:`\operatorname{grad} f_i(X) = -2c (I - XX^\top) A_i X` (``c = 1`` or
    ``1/2``), computed per client as ``Z_i'(Z_i X)`` without forming ``d x d`` matrices unless
    that is cheaper (``gram``); per-sample
    :math:`\operatorname{grad} f_{ij} = -2 (I - XX^\top) z z^\top X` with norm
    :math:`2 \lVert (I - XX^\top) z\rVert\, \lVert X^\top z\rVert`.

    Parameters
    ----------
    data : list of array_like (m_i, d), ndarray (n, m, d) or ClientData
        Client samples as rows.
    r : int
        Number of components, ``1 <= r <= d``.
    weighting : {"uniform", "samples"} or array_like (n,)
    gram : bool, optional
        See ``SpherePCA``.
    manifold : {"stiefel", "grassmann"}, optional
        ``St(d, r)`` (default, the papers') or ``Gr(d, r)``.

    Attributes
    ----------
    manifold : Stiefel or Grassmann
    d, r : int
    form : {"samples", "covariances"}
    """

    def __init__(self, data: ClientSamples, r: int, *, weighting: Weighting = "uniform",
                 gram: bool | None = None, manifold: str = "stiefel") -> None:
        self._setup_samples(data, None, weighting, gram)
        self.r = _check_r(r, self.d)
        self.manifold = _manifold(manifold, self.d, self.r)

    @classmethod
    def from_covariances(cls, A: ArrayLike, r: int, *, weighting: Weighting = "uniform",
                         manifold: str = "stiefel") -> Self:
        """``f_i(X) = -tr(X' A_i X) / 2`` (Li & Ma 2022, Xiao et al. 2024).

        Parameters
        ----------
        A : array_like, shape (n, d, d)
            Symmetric client matrices.
        r : int
        weighting : {"uniform"} or array_like (n,)
        manifold : {"stiefel", "grassmann"}, optional
        """
        self = cls.__new__(cls)
        self._setup_covariances(A, None, weighting)
        self.r = _check_r(r, self.d)
        self.manifold = _manifold(manifold, self.d, self.r)
        return self

    def principal_angles(self, x: ArrayLike) -> FloatArray:
        """Principal angles between ``span(X)`` and ``span(X*)``, shape (r,), ascending;
        accurate below 1e-8 (sines and cosines combined).

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        ndarray, shape (r,)
            In radians.
        """
        return principal_angles(self._point(x), self.solution())

    def angle(self, x: ArrayLike) -> float:
        """Sum of the principal angles to ``X*`` (the seeds' "principal angle").

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
            In radians.
        """
        return float(np.sum(self.principal_angles(x)))

    def dist_to_solution(self, x: ArrayLike) -> float:
        """Grassmann distance ``|principal angles|_2`` between ``span(X)`` and ``span(X*)``."""
        return float(np.linalg.norm(self.principal_angles(x)))

    def feasibility(self, x: ArrayLike) -> float:
        """``|X'X - I|_F``."""
        x = self._point(x)
        return float(np.linalg.norm(x.T @ x - np.eye(self.r)))

    def metrics(self, x: ArrayLike) -> dict[str, float]:
        """``grad_norm``, ``f_gap``, ``dist`` (Grassmann), ``feasibility`` (``|X'X - I|_F``)
        and ``angle`` (sum of principal angles to ``X*``)."""
        x = self._point(x)
        theta = self.principal_angles(x)
        return {"grad_norm": self.grad_norm(x),
                "f_gap": float(self.f(x) - self.f_star()),
                "dist": float(np.linalg.norm(theta)),
                "feasibility": self.feasibility(x),
                "angle": float(np.sum(theta))}
