"""asv: every hot kernel under every backend at the papers' shapes (see compare.py)."""

import numpy as np

from rfl_fast.errors import BackendUnavailableError
from rfl_fast.kernels import _dispatch
from rfl_fast.kernels.registry import FAMILIES, REGISTRY, bench_shapes
from rfl_fast.kernels.testing import kernel_inputs

BACKENDS = list(_dispatch.BACKENDS)


def _case_id(name, shape):
    return f"{name}{tuple(shape)}"


class _KernelSuite:
    """Parameterized by (case, backend); a case is a kernel at one shape."""

    cases = []
    param_names = ["case", "backend"]
    timeout = 300

    def __init_subclass__(cls):
        cls.params = [[_case_id(n, s) for n, s in cls.cases], BACKENDS]
        cls._by_id = {_case_id(n, s): (n, s) for n, s in cls.cases}

    def setup(self, case, backend):
        name, shape = self._by_id[case]
        if not _dispatch.is_available(backend):
            raise NotImplementedError(f"backend {backend} unavailable")  # asv: skipped
        try:
            self.fn = _dispatch.resolve(name, backend)[1]   # the reference, declared or not
        except BackendUnavailableError:                   # a kernel this backend lacks
            raise NotImplementedError(f"{name} has no {backend} route") from None
        self.args = kernel_inputs(name, np.random.default_rng(0), *shape)
        self.fn(*self.args)  # compile / load from cache outside the timing

    def time_kernel(self, case, backend):
        self.fn(*self.args)


def _family_cases(family):
    """Every registered kernel of ``family`` at its benchmark shapes (``registry.bench_shapes``)."""
    return [(k, s) for k, v in REGISTRY.items() if v.family == family for s in bench_shapes(k)]


# one suite per kernel family of the registry (Stiefel, Square, Vector): a kernel registered
# in a family is timed with no list here to edit
for _family in FAMILIES:
    globals()[_family.title()] = type(_family.title(), (_KernelSuite,),
                                      {"cases": _family_cases(_family), "__module__": __name__})


class ClippedSumPCA:
    """Fused clipped per-sample gradient sum of kPCA at m = 6000, d = 784, r = 5 (seed 002's
    MNIST shape) by route, against materializing the per-sample gradients with NumPy and the
    plain non-private gradient (``rfl-fast bench --only clipped`` prints the ratios)."""

    params = [["fused-cpp", "fused-numba", "fused-numpy", "materialized", "nonprivate"]]
    param_names = ["route"]
    timeout = 300

    def setup(self, route):
        import rfl_fast as rf
        from rfl_fast import privacy as P
        from rfl_fast.kernels import fused

        m, d, r = 6000, 784, 5
        Z = np.random.default_rng(0).standard_normal((m, d)) / np.sqrt(d)
        M = rf.Stiefel(d, r)
        X = M.random_point(rng=1)
        c, tau = 2.0, 0.5
        if route == "fused-cpp" and not fused.compiled_available():
            raise NotImplementedError("C++ kernel unavailable")  # asv: skipped
        if route == "fused-numba" and not _dispatch.is_available("numba"):
            raise NotImplementedError("numba unavailable")
        if route.startswith("fused-"):
            b = route.split("-", 1)[1]
            self.fn = lambda: P.clipped_sum_pca(Z, X, tau, c, backend=b)
        elif route == "materialized":
            self.fn = lambda: P.clipped_sum_reference(M, X, P.pca_sample_rgrads(Z, X, c), tau)
        else:
            def nonprivate():
                S = Z.T @ (Z @ X)
                return -c * (S - X @ (X.T @ S))
            self.fn = nonprivate
        self.fn()  # compile / warm caches outside the timing

    def time_clipped_sum(self, route):
        self.fn()


class PublicLatency:
    """One 784x5 matrix through the public API (its fast lane) against the raw C++ kernel."""

    params = [["retr", "proj"], ["public", "raw"]]
    param_names = ["method", "route"]

    def setup(self, method, route):
        import rfl_fast as rf

        if not _dispatch.is_available("cpp"):
            raise NotImplementedError("backend cpp unavailable")  # asv: skipped
        M = rf.Stiefel(784, 5)
        x = M.random_point(rng=0)
        u = M.random_tangent(x, rng=1)
        if route == "public":
            self.fn, self.args = getattr(M, method), (x, u)
        else:
            kernel = {"retr": "stiefel_retr_polar", "proj": "stiefel_proj"}[method]
            self.fn, self.args = getattr(_dispatch.load("cpp"), kernel), (x[None], u[None])
        self.fn(*self.args)

    def time_call(self, method, route):
        self.fn(*self.args)


class CppThreads:
    """C++ batch loops on one thread and on every core (``rfl_fast.set_threads``)."""

    cases = [("sym_logm", (10_000, 9)), ("stiefel_retr_polar", (200, 784, 5)),
             ("stiefel_proj", (200, 784, 5)), ("sphere_exp", (100_000, 10))]
    params = [[_case_id(n, s) for n, s in cases], ["one", "all"]]
    param_names = ["case", "threads"]

    def setup(self, case, threads):
        import rfl_fast as rf

        if not _dispatch.is_available("cpp"):
            raise NotImplementedError("backend cpp unavailable")  # asv: skipped
        name, shape = {_case_id(n, s): (n, s) for n, s in self.cases}[case]
        rf.set_threads(1 if threads == "one" else None)
        self.fn = getattr(_dispatch.load("cpp"), name)
        self.args = kernel_inputs(name, np.random.default_rng(0), *shape)
        self.fn(*self.args)

    def teardown(self, case, threads):
        import rfl_fast as rf

        rf.set_threads(None)

    def time_kernel(self, case, threads):
        self.fn(*self.args)


class StiefelRoutes:
    """The C++ Stiefel kernels on one thread at every p from 1 to 10 (batch 16), so that each
    route boundary of ``cpp/include/rfl/stiefel.hpp`` shows as a step between neighbouring p:
    p = 5's own vector path and lockstep eigensolvers, the row-vector products from p = 7, the
    linear Lyapunov system up to p = 6, the compile-time p up to 8 (BLAS from 9 where the
    application set it). Compare neighbouring p per item, not across kernels."""

    params = [sorted(k for k, v in REGISTRY.items() if v.family == "stiefel"),
              [10, 50, 784], list(range(1, 11))]
    param_names = ["kernel", "n", "p"]
    timeout = 300

    def setup(self, name, n, p):
        import rfl_fast as rf

        if not _dispatch.is_available("cpp"):
            raise NotImplementedError("backend cpp unavailable")  # asv: skipped
        if p > n:
            raise NotImplementedError("p > n")
        rf.set_threads(1)
        self.fn = getattr(_dispatch.load("cpp"), name)
        self.args = kernel_inputs(name, np.random.default_rng(0), 16, n, p)
        self.fn(*self.args)

    def teardown(self, name, n, p):
        import rfl_fast as rf

        rf.set_threads(None)

    def time_kernel(self, name, n, p):
        self.fn(*self.args)
