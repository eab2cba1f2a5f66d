"""The one table of kernels: every kernel is declared here, once.

A kernel entry names its argument and result core dimensions, its family (which fixes the
size ``auto`` chooses by and the benchmark sweep's grid) and whether the C++ backend has a
checked fast lane (``_core.<name>_checked``) for the public API. Its NumPy reference is the
function of the same name in :mod:`rfl_fast.kernels.reference`; its compiled routes are the
functions of the same name in ``rfl_fast._core`` and :mod:`rfl_fast.kernels._numba`.

``auto``'s choice is a declared rule, read here: C++, then Numba, then the reference
(:data:`DEFAULT_ORDER`), except where a kernel declares a :class:`Route` for a band of sizes
(each with the reason and the benchmark that shows its margin), and never a backend past its
``max_size``. No measured per-shape table: the shape sweep (``rfl-fast bench --sweep``) and the
CI ratio gate (``benchmarks/gate.py``) check the rules against the reference on the whole grid.

Adding a kernel: its reference in ``reference.py``, its compiled code, and one entry below.
Multi-client kernels (``FUSED``) read clients of different sizes from one row array; their
references are in :mod:`rfl_fast.kernels.fused`.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product

from .._validation import by_name

__all__ = ["Kernel", "Family", "FAMILIES", "REGISTRY", "KERNELS", "Fused", "FUSED", "Route",
           "DEFAULT_ORDER", "declared_order", "handles", "sweep_grid", "bench_shapes"]

#: ``auto``'s order where a kernel declares no route for the size: the compiled backends first.
DEFAULT_ORDER = ("cpp", "numba", "numpy")


@dataclass(frozen=True)
class Route:
    """A declared exception to :data:`DEFAULT_ORDER`: ``auto`` takes ``order`` for a first
    argument whose size (the family's: p of a Stiefel (n, p), n of an (n, n) matrix, d of a
    vector) is at least ``min_size`` and, where ``max_items`` is set, whose batch holds at most
    that many items. ``why``: the reason, and the benchmark that shows it."""

    order: tuple
    min_size: int
    why: str
    max_items: int | None = None

    def holds(self, size, items):
        """Whether the rule covers a first argument of ``size`` in a batch of ``items``."""
        return size >= self.min_size and (
            self.max_items is None or (items is not None and items <= self.max_items))


#: The reference first where the C++ kernel makes the reference's own BLAS/LAPACK calls, or
#: LAPACK's blocked eigensolver beats the compiled per-item one: the compiled lead there is call
#: overhead on one machine (0.56x at Stiefel(1000, 12).proj, batch 40, on 16 cores).
_BLAS_PROJ = Route(("numpy", "cpp", "numba"), 9,
                   "from p = 9 the C++ projection makes the reference's two GEMMs "
                   "(rfl-fast bench --sweep --only stiefel_proj)")
_LAPACK_EIGH = Route(("numpy", "cpp", "numba"), 128,
                     "from n = 128 LAPACK's blocked dsyevd beats the compiled per-item "
                     "eigensolvers (rfl-fast bench --sweep --only sym_ / spd_)")
#: One or two matrices from n = 64: the compiled kernel's lone-item route is slower than
#: LAPACK's dsyevd for the plain matrix functions (0.66-0.97x at n = 64 and 96, quiet 2-core
#: VM); from 4 items the compiled batch leads (1.2-2.2x at n = 64, one thread or two). The SPD
#: maps (congruences fused around the eigensolver) lead at every batch size.
_LAPACK_EIGH_FEW = Route(("numpy", "cpp", "numba"), 64,
                         "a batch of 1-2 matrices from n = 64: the compiled lone-item route "
                         "is slower than LAPACK's dsyevd (rfl-fast bench --sweep --only sym_)",
                         max_items=2)


#: The Stiefel exponential: the compiled kernel forms x'u, u'u and the product in its rows'
#: passes and the 2p x 2p and p x p exponentials by per-item Pade steps; the reference makes
#: the products as BLAS calls over the whole stack and solves by LAPACK, which overtakes it as
#: p grows (measured quiet, 2-core VM, reference time over compiled: one item 1.1-3.8x at
#: p = 10, 0.91-2.1x at p = 12, 0.24-0.94x at p = 16-32; batches of 16-200 items 0.62-1.08x at
#: p = 10, 0.42-0.87x at p = 12, 0.07-0.22x at p = 128; one item 1.0-1.4x at p = 14 but 0.72x
#: at St(3072, 14)). Left as found: batches of tiny rows at
#: p = 6-8 (200 x St(50, 8): 0.5-0.8x), where the same rule would cost 2x at St(784, 8).
_EXP_BLAS = Route(("numpy", "cpp", "numba"), 16,
                  "from p = 16 the reference's BLAS products and LAPACK solves beat the "
                  "compiled per-item Pade steps (rfl-fast bench --sweep --only stiefel_exp)")
_EXP_ONE = Route(DEFAULT_ORDER, 9,
                 "a lone item at p = 9 to 15: the compiled kernel still leads mostly "
                 "(rfl-fast bench --sweep --only stiefel_exp)", max_items=1)
_EXP_BATCH = Route(("numpy", "cpp", "numba"), 9,
                   "batches from p = 9: the reference's products over the whole stack lead "
                   "(rfl-fast bench --sweep --only stiefel_exp)")


@dataclass(frozen=True)
class Family:
    """Kernels over one kind of core shape.

    ``auto`` chooses by the last dimension of the first argument (p of a Stiefel (n, p), n of
    an (n, n) matrix, d of a vector); ``grid`` lists the sweep's ``(n_items, *dims)`` points, the arguments of
    ``kernels.testing.kernel_inputs`` after ``rng``.
    """

    name: str
    grid: tuple             # ((n_items, n[, p]), ...)
    quick: tuple            # a sample of ``grid`` that a sweep times in minutes
    bench: tuple = ()       # the papers' shapes that ``rfl-fast bench`` times (see Kernel.bench)
    memory_bound: bool = False   # a few flops per byte: the copy bandwidth bounds the kernels


def _stiefel_grid():
    return tuple((b, n, p) for b, n, p in product(
        (1, 16, 200), (50, 784, 3072), (1, 2, 3, 4, 5, 8, 10, 16, 32, 64, 128)) if p <= n)


def _stiefel_quick():
    return tuple((b, n, p) for b, n, p in _stiefel_grid()
                 if (b, n) in ((1, 50), (1, 784), (1, 3072), (16, 784), (16, 3072), (200, 50)))


def _square_grid():
    return tuple((b, n) for b, n in product(
        (1, 16, 200), (2, 3, 4, 5, 9, 16, 20, 32, 64, 128, 256)))


def _vector_grid():
    return tuple((b, d) for b, d in product((1, 200, 10_000), (3, 10, 100, 784, 10_000))
                 if b * d <= 10_000_000)


FAMILIES = by_name((
    Family("stiefel", _stiefel_grid(), _stiefel_quick(),
           ((200, 784, 5), (1_000, 200, 5), (1, 784, 5)), memory_bound=True),
    Family("square", _square_grid(), _square_grid(), ((10_000, 9), (1_000, 20))),
    Family("vector", _vector_grid(), tuple(p for p in _vector_grid() if p[0] != 200),
           ((100_000, 10), (10_000, 784)), memory_bound=True),
), lambda f: f.name, "kernels.FAMILIES")
#: the hyperboloid's benchmark shapes: H^2, H^5 and H^10 (points in R^3, R^6, R^11)
_HYPERBOLIC = ((100_000, 3), (100_000, 6), (100_000, 11))


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``args`` core ndims of each argument, ``out`` core ndims of the result."""

    name: str
    args: tuple
    out: int
    family: str
    fast_lane: bool = False
    summary: str = ""
    #: backend -> largest size (see ``Family``) it handles in reasonable time and memory; the
    #: sweep does not time it beyond, and ``auto`` never picks it there
    max_size: tuple = ()
    #: the NumPy reference where it is not ``reference.<name>`` (a kernel declared outside the
    #: package, which has no compiled route)
    reference: object = None
    #: ``(rng, n_items, *dims) -> args``, random valid arguments for the tests and benchmarks,
    #: where they are not the family's in ``kernels.testing`` (a kernel declared outside the
    #: package)
    inputs: object = None
    #: the ``(n_items, *dims)`` shapes ``rfl-fast bench`` times it at (default: its family's)
    bench: tuple = ()
    #: declared exceptions to ``DEFAULT_ORDER`` (:class:`Route`), by size
    routes: tuple = ()


REGISTRY = by_name((
    # Stiefel St(n, p), points (n, p)
    Kernel("stiefel_proj", (2, 2), 2, "stiefel", True, "(x, u) -> u - x sym(x'u)",
           routes=(_BLAS_PROJ,)),
    Kernel("stiefel_retr_polar", (2, 2), 2, "stiefel", True, "(x, u) -> polar(x + u)"),
    Kernel("stiefel_inv_retr_polar", (2, 2), 2, "stiefel", True,
           "(x, y) -> y S - x, (x'y)S + S(y'x) = 2I, S symmetric",
           max_size=(("numba", 32),)),  # Numba solves the O(p^6) system on S's upper triangle
    Kernel("stiefel_retr_qr", (2, 2), 2, "stiefel", False,
           "(x, u) -> qf(x + u), positive diagonal of R"),
    Kernel("stiefel_inv_retr_qr", (2, 2), 2, "stiefel", True,
           "(x, y) -> y R - x, (x'y)R + R'(y'x) = 2I, R upper triangular"),
    Kernel("polar", (2,), 2, "stiefel", False, "(a,) -> a (a'a)^(-1/2), the nearest Stiefel point"),
    Kernel("stiefel_exp", (2, 2), 2, "stiefel", False,
           "(x, u) -> [x u] expm([[A, -S], [I, A]]) [I; 0] expm(-A), A = x'u, S = u'u",
           routes=(_EXP_BLAS, _EXP_ONE, _EXP_BATCH)),
    # symmetric matrix functions (n, n), one symmetric eigendecomposition each
    Kernel("sym_expm", (2,), 2, "square", routes=(_LAPACK_EIGH, _LAPACK_EIGH_FEW)),
    Kernel("sym_logm", (2,), 2, "square", routes=(_LAPACK_EIGH, _LAPACK_EIGH_FEW)),
    Kernel("sym_sqrtm", (2,), 2, "square", routes=(_LAPACK_EIGH, _LAPACK_EIGH_FEW)),
    Kernel("sym_invsqrtm", (2,), 2, "square", routes=(_LAPACK_EIGH, _LAPACK_EIGH_FEW)),
    # SPD S++(n), affine-invariant metric
    # Numba's Jacobi lanes above n = 64: 0.08x the reference at (200, 128) (quick sweep)
    Kernel("spd_exp", (2, 2), 2, "square", True, "(x, u) -> x^½ expm(x^-½ u x^-½) x^½",
           max_size=(("numba", 64),), routes=(_LAPACK_EIGH,)),
    Kernel("spd_log", (2, 2), 2, "square", True, "(x, y) -> x^½ logm(x^-½ y x^-½) x^½",
           max_size=(("numba", 64),), routes=(_LAPACK_EIGH,)),
    Kernel("spd_dist", (2, 2), 0, "square", True, "(x, y) -> |logm(x^-½ y x^-½)|_F",
           max_size=(("numba", 64),), routes=(_LAPACK_EIGH,)),
    # sphere S^(d-1), points (d,)
    Kernel("sphere_exp", (1, 1), 1, "vector", True),
    Kernel("sphere_log", (1, 1), 1, "vector", True),
    Kernel("sphere_dist", (1, 1), 0, "vector"),
    Kernel("sphere_transport", (1, 1, 1), 1, "vector", False,
           "(x, y, v) parallel transport along the geodesic"),
    # hyperboloid (Lorentz) H^d, points (d+1,)
    Kernel("lorentz_exp", (1, 1), 1, "vector", True, bench=_HYPERBOLIC),
    Kernel("lorentz_log", (1, 1), 1, "vector", bench=_HYPERBOLIC),
    Kernel("lorentz_dist", (1, 1), 0, "vector", bench=_HYPERBOLIC),
    Kernel("lorentz_transport", (1, 1, 1), 1, "vector", bench=_HYPERBOLIC),
), lambda k: k.name, "kernels.REGISTRY")



class _Conventions(Mapping):
    """``REGISTRY`` read as name -> ``(args, out)``, on every use (nothing to keep in step)."""

    def __getitem__(self, name):
        k = REGISTRY[name]
        return k.args, k.out

    def __iter__(self):
        return iter(REGISTRY)

    def __len__(self):
        return len(REGISTRY)

    def __repr__(self):
        return repr(dict(self))


#: name -> (core ndims of each argument, core ndims of the result): the calling convention
KERNELS = _Conventions()


@dataclass(frozen=True)
class Fused:
    """One multi-client kernel: clients of different sizes read from one row array ``Z``
    (M, d) through ``offsets`` (n + 1,) (the layout of ``problems._clients.pack_clients``),
    outside ``KERNELS``' one-to-one batch convention. Its NumPy reference is
    ``kernels.fused.<name>_reference``; ``order`` is ``auto``'s order of the backends that have
    it (the reference last). ``steps``: for a kernel of whole local loops, the kernels of one
    step it fuses after the rows' gradient ``scale_i Z_i' Z_i X`` (the Riemannian gradient's
    kernel, the retraction's kernel), by which :func:`kernels.fused.local_stepper` finds it for a
    manifold declaring them (``Manifold.step_kernels``); ``inverse``: the inverse retraction's
    kernel of the proximal term ``-mu R_X^{-1}(anchor)`` it can add to the direction
    (``Manifold.inverse_kernels``; empty: none); ``projection``: the nearest-point projection's
    kernel of the ambient steps it can take instead of retractions (``Manifold.project_kernel``;
    empty: none); ``transports``: the transport kernels (``Manifold.transport_kernels``) by
    which it can carry a constant offset tangent at the anchor ``x_t`` to each iterate besides
    the gradient's own projection ``P_X(egrad - offset)`` (RFedSVRG's correction under a
    transport that remembers ``x_t``), and by which it can carry each direction of an
    accumulated stream to ``x_t`` (RFedAGS's; ``kernels.fused.TRANSPORT_MODES``; empty:
    none)."""

    name: str
    order: tuple
    summary: str = ""
    steps: tuple = ()
    inverse: str = ""
    projection: str = ""
    transports: tuple = ()


FUSED = by_name((
    Fused("pca_grad_sum", ("cpp", "numpy"),
          "rows of clients idx at X_j -> (Z_i' Z_i X_j)', |Z_i X_j|^2 (or the clipped sum)"),
    Fused("pca_local_steps", ("cpp", "numpy"),
          "rows of clients idx from X_j -> `steps` times X <- polar(X - eta [P_X(s_j Z_i' Z_i X "
          "- offset_j) - mu R_X^{-1}(anchor)]) (offset: none, or RFedSVRG's constant "
          "correction; anchor: none, or RFedProx's server point; accumulate: the directions "
          "summed too, RFedAGS's stream; ambient: RFedProj's steps zhat <- zhat - eta (P_X(..) "
          "+ drift_j), X <- polar(zhat))",
          steps=("stiefel_proj", "stiefel_retr_polar"), inverse="stiefel_inv_retr_polar",
          projection="polar"),
    Fused("sphere_local_steps", ("cpp", "numpy"),
          "pca_local_steps on the sphere's points (d,) with its Exp and Log (the retraction "
          "mode 'exp' of pca_local_steps at r = 1: x <- cos|u| x + sin|u| u/|u|; transport "
          "'parallel': the offset parallel-transported from the anchor x_t, or with "
          "accumulate each direction transported to it)",
          steps=("sphere_proj", "sphere_exp"), inverse="sphere_log",
          projection="sphere_project", transports=("sphere_transport",)),
    Fused("sphere_projection_local_steps", ("cpp", "numpy"),
          "pca_local_steps on the sphere's points (d,) with the projection retraction "
          "(x + u)/|x + u| and its inverse y/<x,y> - x (the polar pair at r = 1)",
          steps=("sphere_proj", "sphere_retr_projection"),
          inverse="sphere_inv_retr_projection", projection="sphere_project"),
    Fused("clipped_pca_sum", ("cpp", "numba", "numpy"),
          "one client's rows at X -> the clipped per-sample PCA gradient sum"),
    Fused("brockett_clipped_sum", ("cpp", "numpy"),
          "Brockett's samples A (M, d, d), b rows per client at X_j -> sum over the client's "
          "samples of clip_tau(P_X(2 A X H)), and whether every norm's fast form was trusted"),
), lambda f: f.name, "kernels.FUSED")


def declared_order(name, size, items=None):
    """``auto``'s backend order for kernel ``name`` at ``size`` (the family's; ``None``:
    unknown) in a batch of ``items`` (``None``: unknown): its first declared :class:`Route`
    that holds there, else :data:`DEFAULT_ORDER`; backends not declared fit for ``size``
    (``max_size``) dropped."""
    kernel = REGISTRY.get(name)
    order = DEFAULT_ORDER
    if kernel is not None and size is not None:
        order = next((r.order for r in kernel.routes if r.holds(size, items)), DEFAULT_ORDER)
    return tuple(b for b in order if kernel is None or handles(name, b, size))


def size_limit(name, backend):
    """The largest size ``backend`` is declared fit for at kernel ``name`` (``None``: any)."""
    return dict(REGISTRY[name].max_size).get(backend)


def handles(name, backend, size):
    """Whether ``backend`` is declared fit for kernel ``name`` at ``size``."""
    limit = size_limit(name, backend)
    return limit is None or size is None or size <= limit


def sweep_grid(name, quick=False):
    """The sweep's ``(n_items, *dims)`` points for kernel ``name`` (``quick``: the sample)."""
    family = FAMILIES[REGISTRY[name].family]
    return family.quick if quick else family.grid


def bench_shapes(name):
    """The ``(n_items, *dims)`` shapes at which ``rfl-fast bench`` times kernel ``name``."""
    k = REGISTRY[name]
    return k.bench or FAMILIES[k.family].bench
