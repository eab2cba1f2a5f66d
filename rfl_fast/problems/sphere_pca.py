"""PCA on the sphere: the leading eigenvector of the clients' pooled covariance."""

import numpy as np

from .._typing import ArrayLike, ClientSamples, Self, Weighting
from ..manifolds import Sphere
from ._quadratic import QuadraticProblem

__all__ = ["SpherePCA"]


class SpherePCA(QuadraticProblem):
    """Federated leading-eigenvector problem on the sphere ``S^(d-1)`` in ``R^d``.

    Two forms (the seeds differ by a factor 1/2 and in what a client stores):

    * ``SpherePCA(data)`` -- per-sample data, Huang et al. 2024 (eq. 4.1) and Huang et al. 2025 (CPESph):
      ``f_ij(x) = -(z_ij' x)^2``, ``f_i(x) = (1/m_i) sum_j f_ij(x) = -x' A_i x`` with
      ``A_i = Z_i' Z_i / m_i`` (no factor 1/2, as in those seeds). Seed Huang et al. 2024 weights clients by
      ``p_i = N_i / sum N_j``: pass ``weighting="samples"``; Huang et al. 2025 uses ``1/N`` (the default).
    * ``SpherePCA.from_covariances(A)`` -- Li & Ma 2022 and Xiao et al. 2024: ``f_i(x) = -x' A_i x / 2`` with
      the client matrix ``A_i`` as given (Xiao et al. 2024 uses ``A_i = C_i' C_i``, a sum, not a mean).

    Its full local gradients are declared (``quadratic_rows()``, as kPCA's at ``r = 1``), so the
    algorithms' full-gradient local loops run as one fused call per round on ``Sphere``'s
    declared steps (``kernels.fused.sphere_local_steps``: Exp / Log, the default retraction;
    ``sphere_projection_local_steps``).

    The optimum is the top eigenvector of ``A = sum_i w_i A_i``; both ``x*`` and ``-x*`` are
    optimal and ``solution()`` returns the one whose largest-magnitude entry is positive.

    Parameters
    ----------
    data : list of array_like (m_i, d), ndarray (n, m, d) or ClientData
        Client samples ``z_ij`` as rows.
    weighting : {"uniform", "samples"} or array_like (n,)
        Client weights, see ``Problem``.
    gram : bool, optional
        Form the per-client ``d x d`` matrices ``A_i`` for the full gradients. Default: only
        when that is cheaper than two passes over the rows (``d <= mean m_i``) and the
        matrices take at most 256 MiB. Mini-batch and per-sample gradients always use rows.

    Attributes
    ----------
    manifold : Sphere
    d : int
    form : {"samples", "covariances"}
    """

    def __init__(self, data: ClientSamples, *, weighting: Weighting = "uniform",
                 gram: bool | None = None) -> None:
        self._setup_samples(data, 1, weighting, gram)
        self._make_manifold()

    @classmethod
    def from_covariances(cls, A: ArrayLike, *, weighting: Weighting = "uniform") -> Self:
        """``f_i(x) = -x' A_i x / 2`` (Li & Ma 2022, Xiao et al. 2024).

        Parameters
        ----------
        A : array_like, shape (n, d, d)
            Symmetric client matrices (e.g. covariances), one per client.
        weighting : {"uniform"} or array_like (n,)
            ``"samples"`` is the same as uniform here (one matrix per client); pass the
            client sample counts as an array to weight by them.
        """
        self = cls.__new__(cls)
        self._setup_covariances(A, 1, weighting)
        self._make_manifold()
        return self

    def _make_manifold(self):
        if self.d < 2:
            raise ValueError(f"data: the sphere needs dimension d >= 2, got d = {self.d}")
        self.manifold = Sphere(self.d)

    def _mat(self, x):
        return x[..., None]

    def _unmat(self, g):
        return g[..., 0]

    def angle(self, x: ArrayLike) -> float:
        """Angle between the lines ``span(x)`` and ``span(x*)``, in ``[0, pi/2]``; accurate
        for tiny angles (``atan2(|x - (x'x*) x*|, |x'x*|)`` for unit ``x``).

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
            In radians.
        """
        x = self._point(x)
        xs = self.solution()
        c = float(x @ xs)
        return float(np.arctan2(np.linalg.norm(x - c * xs), abs(c)))

    def dist_to_solution(self, x: ArrayLike) -> float:
        """Geodesic distance to the nearer of ``x*`` and ``-x*`` (equals ``angle`` on the
        sphere)."""
        return self.angle(x)

    def feasibility(self, x: ArrayLike) -> float:
        """``| |x| - 1 |``."""
        return abs(float(np.linalg.norm(self._point(x))) - 1.0)

    def metrics(self, x: ArrayLike) -> dict[str, float]:
        """``grad_norm``, ``f_gap``, ``dist``, ``feasibility`` and ``angle`` (the angle
        between the lines of ``x`` and ``x*``)."""
        out = super().metrics(x)
        out["angle"] = out["dist"]
        return out
