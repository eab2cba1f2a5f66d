"""The sphere's fused local steps (``kernels.fused.sphere_local_steps``: Exp / Log;
``sphere_projection_local_steps``: the projection retraction): their NumPy references against
the steps written out with ``Sphere``'s own methods, the compiled kernel (``pca_local_steps``'
loop at r = 1) against the references, and every algorithm on ``SpherePCA`` fused against its
composed loop."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.algorithms import (RFedAGS, RFedAvg, RFedProj, RFedProx, RFedSVRG, RFedSVRG2BB,
                                 RFedSVRG2BBS)
from rfl_fast.federation import Full, run
from rfl_fast.kernels import fused
from rfl_fast.problems import SpherePCA

EPS = np.finfo(float).eps
needs_cpp = pytest.mark.skipif(not fused.compiled_available("pca_local_steps"),
                               reason="C++ extension not built")
MODES = {"sphere_local_steps": "exp", "sphere_projection_local_steps": "projection"}
#: the terms of each algorithm's steps (the keyword arguments of the kernel, built from rng)
TERMS = ("plain", "offset", "prox", "2bb", "accumulate", "ambient")


def _problem(sizes, d, seed, gram=False):
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal((m, d)) for m in sizes]
    return SpherePCA(data, gram=gram), data


def _terms(term, rng, k, d, x_t):
    """The kernel's keywords for ``term`` (points (k, d) of S^(d-1), anchor x_t (d,))."""
    if term == "offset":
        return {"offset": 0.3 * rng.standard_normal((k, d))}
    if term == "prox":
        return {"anchor": x_t, "mu": 0.7}
    if term == "2bb":
        return {"offset": 0.3 * rng.standard_normal((k, d)), "anchor": x_t,
                "coef": rng.uniform(-1.0, 1.0, k)}
    if term == "accumulate":
        return {"accumulate": True}
    if term == "ambient":
        return {"accumulate": True, "ambient": True, "drift": 0.2 * rng.standard_normal((k, d))}
    return {}


def _written_out(P, idx, x0, eta, steps, method, offset=None, anchor=None, mu=0.0,
                 accumulate=False, ambient=False, drift=None, coef=None):
    """The steps with ``Sphere``'s methods, one at a time (the oracle of the references):
    ``x <- R_x(-eta (P_x(egrad - offset + coef R_anchor^{-1}(x)) - mu R_x^{-1}(anchor)))``,
    or the ambient steps ``zhat <- zhat - eta (P_x(egrad) + drift)``, ``x <- zhat/|zhat|``."""
    M = P.manifold
    x = np.array(np.broadcast_to(x0, (idx.size, M.shape[0])))
    zhat, total = x.copy(), np.zeros_like(x)
    for step in range(steps):
        g = P.egrad(idx, x)
        if offset is not None:
            g = g - offset
        if coef is not None:
            g = g + coef[:, None] * M.inv_retr(np.broadcast_to(anchor, x.shape), x, method)
        d = M.proj(x, g)
        if anchor is not None and coef is None:
            d = d - mu * M.inv_retr(x, np.broadcast_to(anchor, x.shape), method)
        total += d
        if ambient:
            zhat = zhat - eta * d - (0.0 if drift is None else eta * drift)
            if not (accumulate and step + 1 == steps):
                x = M.project(zhat)
            continue
        if accumulate and step + 1 == steps:
            break
        x = M.retr(x, -eta * d, method)
    out = zhat if ambient else x
    return (out, total) if accumulate else out


def _bound(P, idx, eta, steps, kw, rows_d):
    """``steps (1 + a + 3 eta (mu + |coef|))^steps (a rows_d + 3 (1 + a) + 10) eps`` with
    ``a = eta (|s| |Z|^2 + |offset| + |drift|)`` the largest over the clients: each step's
    direction is formed to ``rows_d eps`` relatively (``rows_d``: the longest sum of products of
    the gradient, ``m d``), the projection, Exp / Log (or the projection retraction) and the
    normalization add a few ``eps`` (``3 (1 + a)``, ``10``), and a step maps a perturbation of
    ``x`` to one at most ``1 + a + 3 eta (mu + |coef|)`` times larger (the gradient's Lipschitz
    constant ``|s| |Z|^2``; ``R^{-1}`` taken 3-Lipschitz this close to the anchor)."""
    rows = P.quadratic_rows()
    a = max(eta * abs(rows.scale[i]) * np.linalg.norm(
        rows.rows[rows.offsets[i]:rows.offsets[i + 1]], 2) ** 2 for i in idx)
    for key in ("offset", "drift"):
        if kw.get(key) is not None:
            a += eta * np.abs(kw[key]).max() * np.sqrt(P.d)
    c = eta * (kw.get("mu", 0.0) + (np.abs(kw["coef"]).max() if "coef" in kw else 0.0))
    growth = 1 + a + 3 * c
    return steps * growth ** steps * (a * rows_d + 3 * (1 + a) + 10) * EPS


def _compare(got, want, bound):
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
        assert g.shape == w.shape
        assert np.max(np.abs(g - w)) <= bound


@pytest.mark.parametrize("kernel", list(MODES))
@pytest.mark.parametrize("term", TERMS)
@pytest.mark.parametrize("gram", [False, True])
def test_references_equal_the_steps_written_out(kernel, term, gram):
    """Each sphere kernel's NumPy reference (``pca_local_steps_reference`` with the sphere's
    retraction, its points (k, d) mapped to (k, d, 1)) takes the steps of ``Sphere``'s own
    ``proj``, ``retr``, ``inv_retr`` and ``project`` on the problem's Euclidean gradients, for
    every term an algorithm adds; tolerance :func:`_bound`."""
    P, _ = _problem((30, 45, 12), 9, 3, gram)
    rng = np.random.default_rng(7)
    idx = np.array([2, 0, 1], dtype=np.int64)
    x0 = P.manifold.random_point(rng=1)
    x_t = P.manifold.exp(x0, P.manifold.proj(x0, 0.2 * rng.standard_normal(9)))
    kw = _terms(term, rng, 3, 9, x_t)
    rows = P.quadratic_rows()
    ref = getattr(fused, kernel + "_reference")
    got = ref(rows.rows, rows.offsets, idx, np.broadcast_to(x0, (3, 9)), rows.scale[idx], 0.05,
              4, h=rows.h, **kw)
    want = _written_out(P, idx, x0, 0.05, 4, MODES[kernel], **kw)
    _compare(got, want, _bound(P, idx, 0.05, 4, kw, 45 * 9))
    assert not np.allclose(want[0] if isinstance(want, tuple) else want, x0)


CASES = [((30, 45, 12, 7, 20, 9, 33, 15, 8, 11), 9),     # small clients: lockstep groups of 8
         ((30, 700, 12), 40)]                            # a client of two 512-row chunks


@needs_cpp
@pytest.mark.parametrize("kernel", list(MODES))
@pytest.mark.parametrize("term", TERMS)
@pytest.mark.parametrize("sizes,d", CASES)
def test_compiled_kernel_equals_its_reference(kernel, term, sizes, d):
    """The compiled route (``pca_local_steps``' C++ loop with ``retraction="exp"``, or the
    polar mode at r = 1) against the reference, for every term, clients in groups or alone;
    the thread count changes no bit. Tolerance :func:`_bound` (the two differ in the order of
    the gradient's sums and in Exp / Log's or the polar factor's rounding)."""
    P, _ = _problem(sizes, d, 5)
    rng = np.random.default_rng(11)
    k = len(sizes)
    idx = np.ascontiguousarray(rng.permutation(k), dtype=np.int64)
    M = P.manifold
    x_t = M.random_point(rng=3)               # the clients' starts within ~0.5 of the anchor:
    x0 = M.exp(np.broadcast_to(x_t, (k, d)),  # the projection's inverse exists there
               M.proj(x_t, 0.5 / np.sqrt(d) * rng.standard_normal((k, d))))
    kw = _terms(term, rng, k, d, x_t)
    rows = P.quadratic_rows()
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.02, 3)
    want = getattr(fused, kernel + "_reference")(*args, **kw)
    fn = getattr(fused, kernel)
    got = fn(*args, **kw, threads=1, backend="cpp")
    _compare(got, want, _bound(P, idx, 0.02, 3, kw, max(sizes) * d))
    again = fn(*args, **kw, threads=2, backend="cpp")
    for g, a in zip(got, again) if isinstance(got, tuple) else [(got, again)]:
        np.testing.assert_array_equal(g, a)


@needs_cpp
def test_projection_mode_is_the_polar_kernel_at_r_1():
    """The projection retraction's kernel is ``pca_local_steps``' polar mode on the points as
    (d, 1) matrices: the same bits."""
    P, _ = _problem((30, 45, 12), 9, 3)
    rows = P.quadratic_rows()
    idx = np.array([1, 2], dtype=np.int64)
    x0 = P.manifold.random_point(2, rng=1)
    args = (rows.rows, rows.offsets, idx)
    np.testing.assert_array_equal(
        fused.sphere_projection_local_steps(*args, x0, rows.scale[idx], 0.05, 3),
        fused.pca_local_steps(*args, np.ascontiguousarray(x0[..., None]), rows.scale[idx],
                              0.05, 3)[..., 0])


@needs_cpp
def test_compiled_kernel_refusals_name_the_argument():
    """The binding checks every argument before any work; a refusal names it."""
    from rfl_fast import _core

    Z = np.ones((5, 4))
    off = np.array([0, 2, 5], dtype=np.int64)
    idx = np.array([0, 1], dtype=np.int64)
    x0 = np.zeros((2, 4, 1))
    one = np.ones(2)
    with pytest.raises(ValueError, match="retraction must be 'polar' or 'exp'"):
        _core.pca_local_steps(Z, off, idx, x0, one, 0.1, 1, retraction="qr")
    with pytest.raises(ValueError, match="retraction 'exp'.*needs r = 1"):
        _core.pca_local_steps(Z, off, idx, np.zeros((2, 4, 2)), one, 0.1, 1, retraction="exp")
    with pytest.raises(ValueError, match="offset .* must have the shape of x0"):
        _core.pca_local_steps(Z, off, idx, x0, one, 0.1, 1, offset=np.zeros((2, 4, 2)),
                              retraction="exp")
    with pytest.raises(ValueError, match="drift .* must have the shape of x0"):
        _core.pca_local_steps(Z, off, idx, x0, one, 0.1, 1, ambient=True,
                              drift=np.zeros((1, 4, 1)))
    with pytest.raises(ValueError, match="drift needs ambient"):
        _core.pca_local_steps(Z, off, idx, x0, one, 0.1, 1, drift=np.zeros((2, 4, 1)))
    with pytest.raises(TypeError, match="argument drift"):
        _core.pca_local_steps(Z, off, idx, x0, one, 0.1, 1, ambient=True,
                              drift=np.zeros((2, 4, 1), dtype=complex))
    with pytest.raises(ValueError, match="needs r = 1"):
        fused.pca_local_steps_reference(Z, off, idx, np.zeros((2, 4, 2)), one, 0.1, 1,
                                        retraction="exp")


def test_sphere_declares_its_fused_steps():
    """The fused kernels are found from ``Sphere``'s declarations alone: its step kernels of
    both retractions, their inverses and its projection; the projection transport is the
    gradient's kernel, the parallel transport is not."""
    from rfl_fast.algorithms.fedavg_prox import fused_local_steps

    P, _ = _problem((30, 45, 12), 9, 3)
    x = P.manifold.random_point(rng=1)
    idx = np.array([0, 2])
    for method in ("exp", "projection"):
        assert fused_local_steps(P, method)(idx, x, 0.1, 2).shape == (2, 9)
        assert fused_local_steps(P, method, inverse=True) is not None
    assert fused_local_steps(P, None, ambient=True) is not None
    assert fused_local_steps(_problem((30, 45, 12), 9, 3, gram=True)[0], "exp") is not None
    assert RFedSVRG(0.1, 3)._fused_steps(P, "exp", "projection") is not None
    # the parallel transport's kernel is declared by sphere_local_steps (Exp / Log) only
    assert P.manifold.transport_kernels["parallel"] == "sphere_transport"
    assert "sphere_transport" in rf.kernels.registry.FUSED["sphere_local_steps"].transports
    for alg in (RFedSVRG(0.1, 3), RFedSVRG2BB(0.1, 3)):
        steps = alg._fused_steps(P, "exp", "parallel")
        assert steps is not None and steps.keywords == {"transport": "sphere_transport"}
        assert alg._fused_steps(P, "projection", "parallel") is None
    assert RFedSVRG(0.1, 3, client_option=2)._fused_steps(P, "exp", "parallel") is None
    assert RFedAGS(0.1, 3)._fused_steps(P, "exp", "parallel").keywords == {
        "transport": "sphere_transport"}
    assert RFedAGS(0.1, 3, batch_size=4)._fused_steps(P, "exp", "parallel") is None
    assert RFedSVRG2BB(0.1, 3)._fused_steps(P, "projection", "projection") is not None


def _fused_then_composed(P, alg, rounds, kw, backend):
    """``alg`` run with the fused kernels (the number of ``pca_local_steps`` calls counted),
    then with every algorithm's composed loop (no fused kernel found)."""
    from rfl_fast.algorithms import ags, fedavg_prox, proj, svrg

    calls = []
    with rf.backend(backend), pytest.MonkeyPatch.context() as mp:
        kernel = fused.pca_local_steps
        mp.setattr(fused, "pca_local_steps", lambda *a, **k: calls.append(1) or kernel(*a, **k))
        a = run(P, alg, rounds, **kw)
        for module in (fedavg_prox, svrg, ags, proj):
            mp.setattr(module, "fused_local_steps", lambda *args, **k: None)
        n = len(calls)
        b = run(P, alg, rounds, **kw)
    assert len(calls) == n
    return a, b, n


def _fused_equals_composed(alg, backend, growth, factor=1.0):
    """``alg`` on SpherePCA (clients of 30, 50, 600, 20 rows in R^40), 3 rounds of 5 steps of
    0.05, fused then composed (:func:`_fused_then_composed`): one fused call per round, the
    runs moved, and the iterates within ``factor rounds tau growth^tau (3 a (d + 10) + 10)
    eps``, ``growth`` the per-step growth of a difference as a function of ``a`` (``eta |s|
    |Z|^2``, the largest over the clients) and ``eta``."""
    sizes, d = (30, 50, 600, 20), 40
    P, data = _problem(sizes, d, 9)
    rounds, tau, eta = 3, 5, 0.05
    x0 = P.manifold.random_point(rng=1)
    kw = dict(participation=Full(), x0=x0, seed=0, metrics=False)
    a, b, n = _fused_then_composed(P, alg, rounds, kw, backend)
    assert n == rounds                          # one fused call per round
    a_max = max(eta * 2.0 / m * np.linalg.norm(z, 2) ** 2 for m, z in zip(sizes, data))
    bound = factor * rounds * tau * growth(a_max, eta) ** tau * \
        (3 * a_max * (d + 10) + 10) * EPS
    assert np.max(np.abs(a.x - b.x)) <= bound
    assert np.max(np.abs(a.x - x0)) > 1e-3      # the runs moved


ALGORITHMS = {
    "RFedAvg": (RFedAvg(0.05, 5), 1.0),
    "RFedProx": (RFedProx(0.05, 5, mu=0.5), 1.0),
    "RFedProx-projection": (RFedProx(0.05, 5, mu=0.5, retraction="projection"), 1.0),
    "RFedSVRG": (RFedSVRG(0.05, 5, transport="projection"), 1.0),
    "2BB": (RFedSVRG2BB(0.05, 5, transport="projection"), 1.0),
    "2BBS": (RFedSVRG2BBS(0.05, 5, eta_min=0.05, eta_max=0.5, transport="projection"), 1.0),
    "RFedAGS": (RFedAGS(0.05, 5, transport="projection"), 1.0),
    "RFedProj": (RFedProj(0.05, 5), 10.0),
}


@pytest.mark.parametrize("backend", ["auto", "numpy"])
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_algorithms_fused_equal_their_composed_loop(name, backend):
    """Each algorithm on SpherePCA takes the fused kernel once per round (RFedSVRG's, 2BB's,
    2BBS's and RFedAGS's here with the projection transport, the gradient's own kernel; with
    the default parallel transport: the tests below) and gives the composed loop's iterates
    to rounding.

    Tolerance: as the kPCA tests of ``tests/test_algorithms.py``: a difference of
    ``3 a (d + 10) + 10`` eps per step (the gradient's sums in another order, ``P_x(g - v)``
    against ``P_x g - P_x v``, the Exp / Log or projection retraction's rounding), enlarged at
    most ``1 + a + 3 eta mu`` times by each later step (``a = eta |s| |Z|^2``, the largest over
    the clients) and not by the tangent mean (beta = 1): ``rounds tau growth^tau per_step
    eps``; RFedProj times 10 for its drift correction's round trip (divided by ``eta tau`` and
    multiplied back)."""
    alg, factor = ALGORITHMS[name]
    mu = getattr(alg, "mu", 0.0)
    _fused_equals_composed(alg, backend, lambda a, eta: 1 + a + 3 * eta * mu, factor)


@pytest.mark.parametrize("backend", ["auto", "numpy"])
def test_ags_parallel_transport_fused_equals_its_composed_loop(backend):
    """RFedAGS with the sphere's default (parallel) transport takes the fused kernel once per
    round, each step's direction transported to ``x_t`` inside it (the stream ``sum_k
    PT_{x_k -> x_t}(a d_k)`` is not one transport of the sum), and gives the composed loop's
    iterates to rounding: :func:`test_algorithms_fused_equal_their_composed_loop`'s bound, the
    growth per step enlarged by ``a_max`` (the transport of ``d_k`` moves with ``x_k``:
    Lipschitz constant ``|d_k| <= a_max / eta``, times the step ``eta``)."""
    _fused_equals_composed(RFedAGS(0.05, 5), backend, lambda a, eta: 1 + 2 * a)


# ---------------------------------------------------------------- the parallel transport


def _parallel_case(sizes, d, seed, gram=False, spread=0.5):
    """A problem, clients ``idx`` (a permutation), the anchor ``x_t``, starts within ~spread
    of it, offsets tangent at ``x_t`` and 2BB weights."""
    P, _ = _problem(sizes, d, seed, gram)
    rng = np.random.default_rng(seed + 1)
    k, M = len(sizes), P.manifold
    idx = np.ascontiguousarray(rng.permutation(k), dtype=np.int64)
    x_t = M.random_point(rng=seed + 2)
    x0 = M.exp(np.broadcast_to(x_t, (k, d)),
               M.proj(x_t, spread / np.sqrt(d) * rng.standard_normal((k, d))))
    offset = M.proj(x_t, 0.3 * rng.standard_normal((k, d)))
    return P, idx, x_t, x0, offset, rng.uniform(-1.0, 1.0, k)


def _composed_parallel(P, idx, x_t, x0, eta, steps, offset, coef):
    """RFedSVRG's composed local loop (``algorithms.svrg``' ``client_update``, steps
    ``l = 1 .. tau-1``) written out with the problem's ``rgrad`` and ``Sphere``'s maps:
    ``v = diff - coef Log_{x_t}(x)``, ``d = rgrad f_i(x) - PT_{x_t -> x}(v)``,
    ``x <- Exp_x(-eta d)``."""
    M = P.manifold
    at = np.broadcast_to(x_t, x0.shape)
    x = np.array(x0)
    for _ in range(steps):
        v = offset if coef is None else offset - coef[:, None] * M.inv_retr(at, x, "exp")
        d = P.rgrad(idx, x) - M.transport(at, x, v, "parallel")
        x = M.retr(x, -eta * d, "exp")
    return x


@pytest.mark.parametrize("corrected", [False, True])
@pytest.mark.parametrize("gram", [False, True])
def test_parallel_reference_equals_the_composed_maps(corrected, gram):
    """``transport="parallel"``: the reference's steps are RFedSVRG's (2BB's with ``coef``)
    composed loop under the sphere's parallel transport, step by step (the loop written out
    with ``Sphere``'s methods; the reference takes their NumPy kernels, the kernels layer
    importing no manifold, in the same order); they differ only in the gradient's sums
    (``pca_grad_sum_reference`` against the problem's ``rgrad``): :func:`_bound` (offset and coef
    in its growth: the transport and Log are Lipschitz in ``x`` with constants ``|v|`` and ~1
    this close to ``x_t``). The transported offset is not its projection: the projection
    kernel's iterates differ by far more than the bound."""
    P, idx, x_t, x0, offset, coef = _parallel_case((30, 45, 12), 9, 3, gram)
    coef = coef if corrected else None
    rows = P.quadratic_rows()
    kw = {"offset": offset, "anchor": x_t} | ({"coef": coef} if corrected else {})
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.05, 4)
    got = fused.sphere_local_steps_reference(*args, h=rows.h, transport="parallel", **kw)
    want = _composed_parallel(P, idx, x_t, x0, 0.05, 4, offset, coef)
    bound = _bound(P, idx, 0.05, 4, kw, 45 * 9)
    _compare(got, want, bound)
    projected = fused.sphere_local_steps_reference(*args, h=rows.h, **kw) if corrected else \
        fused.sphere_local_steps_reference(*args, h=rows.h, offset=offset)
    assert np.max(np.abs(projected - want)) > 1e6 * bound
    assert np.max(np.abs(want - x0)) > 1e-3


@needs_cpp
@pytest.mark.parametrize("corrected", [False, True])
@pytest.mark.parametrize("sizes,d", CASES)
def test_parallel_compiled_kernel_equals_its_reference(corrected, sizes, d):
    """The C++ loop of ``transport="parallel"`` (``rfl::sphere`` log, transport, exp on the
    group's clients) against the reference, clients in lockstep groups or alone; the thread
    count changes no bit. Tolerance :func:`_bound` (the gradient's sums in another order, the
    maps' rounding: the same formulas)."""
    P, idx, x_t, x0, offset, coef = _parallel_case(sizes, d, 5)
    kw = {"offset": offset, "anchor": x_t, "transport": "parallel"}
    if corrected:
        kw["coef"] = coef
    rows = P.quadratic_rows()
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.02, 3)
    want = fused.sphere_local_steps_reference(*args, **kw)
    got = fused.sphere_local_steps(*args, **kw, threads=1, backend="cpp")
    _compare(got, want, _bound(P, idx, 0.02, 3, kw, max(sizes) * d))
    np.testing.assert_array_equal(
        got, fused.sphere_local_steps(*args, **kw, threads=2, backend="cpp"))


def _composed_stream(P, idx, x_t, eta, steps):
    """RFedAGS's composed local loop (``algorithms.ags``' ``client_update``) over the step,
    written out with the problem's ``rgrad`` and ``Sphere``'s maps from ``x_t``: ``d =
    rgrad f_i(x)``, ``sum += d`` (the first, at ``x_t``) or ``PT_{x -> x_t}(d)``,
    ``x <- Exp_x(-eta d)`` but after the last step; ``(x, sum)``."""
    M = P.manifold
    at = np.broadcast_to(x_t, (idx.size, x_t.size))
    x, total = np.array(at), np.zeros(at.shape)
    for step in range(steps):
        d = P.rgrad(idx, x)
        total += d if step == 0 else M.transport(x, at, d, "parallel")
        if step + 1 < steps:
            x = M.retr(x, -eta * d, "exp")
    return x, total


def _stream_bound(P, idx, eta, steps, rows_d):
    """The stream's tolerance: a step's direction ``d`` is ``1/eta`` times the step, so its
    own error is :func:`_bound`'s over ``eta``; an error ``e`` in ``x`` moves the next
    directions by at most ``a/eta e`` (the gradient's Lipschitz constant ``|s| |Z|^2``) and
    their transports by ``|d| e <= a/eta e``; summed over the steps: :func:`_bound` times
    ``(1 + 2 a steps) / eta`` (``a = eta |s| |Z|^2``, the largest over the clients), plus the
    transport's few eps of ``|d|`` per term."""
    rows = P.quadratic_rows()
    a = max(eta * abs(rows.scale[i]) * np.linalg.norm(
        rows.rows[rows.offsets[i]:rows.offsets[i + 1]], 2) ** 2 for i in idx)
    return _bound(P, idx, eta, steps, {}, rows_d) * (1 + 2 * a * steps) / eta + \
        steps * 10 * (P.d + 3) * EPS * a / eta


@pytest.mark.parametrize("gram", [False, True])
def test_parallel_stream_reference_equals_the_composed_maps(gram):
    """``transport="parallel"`` with ``accumulate`` (no offset): the reference's stream is
    RFedAGS's composed loop under the sphere's parallel transport (each direction transported
    to ``x_t``), step by step; tolerance :func:`_stream_bound`. Not transporting (the sum as
    it is) and transporting the sum once (the projection's shortcut) are off by far more."""
    P, idx, x_t, _, _, _ = _parallel_case((30, 45, 12), 9, 3, gram)
    rows = P.quadratic_rows()
    x0 = np.broadcast_to(x_t, (idx.size, 9))
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.05, 4)
    got = fused.sphere_local_steps_reference(*args, h=rows.h, anchor=x_t, accumulate=True,
                                             transport="parallel")
    want = _composed_stream(P, idx, x_t, 0.05, 4)
    bound = _stream_bound(P, idx, 0.05, 4, 45 * 9)
    _compare(got, want, bound)
    raw = fused.sphere_local_steps_reference(*args, h=rows.h, accumulate=True)[1]
    once = P.manifold.proj(np.broadcast_to(x_t, raw.shape), raw)
    for wrong in (raw, once):
        assert np.max(np.abs(wrong - want[1])) > 1e4 * bound
    assert np.max(np.abs(want[0] - x0)) > 1e-3


@needs_cpp
@pytest.mark.parametrize("gram", [False, True])
@pytest.mark.parametrize("sizes,d,steps", [(CASES[0][0], CASES[0][1], 3),
                                           (CASES[1][0], CASES[1][1], 3),
                                           ((1000,) * 10, 40, 4)])   # work for two threads
def test_parallel_stream_compiled_kernel_equals_its_reference(sizes, d, steps, gram):
    """The C++ loop of the stream under the parallel transport against the reference, clients
    in lockstep groups or alone, rows or Gram matrices, from a start other than ``x_t`` (the
    first direction is transported too); the thread count changes no bit (the last case is
    large enough for the kernel to start a second thread: its rule needs 2^19 multiply-adds
    a thread). Tolerance :func:`_stream_bound`."""
    P, idx, x_t, x0, _, _ = _parallel_case(sizes, d, 5, gram)
    rows = P.quadratic_rows()
    kw = {"anchor": x_t, "accumulate": True, "transport": "parallel", "h": rows.h}
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.02, steps)
    want = fused.sphere_local_steps_reference(*args, **kw)
    got = fused.sphere_local_steps(*args, **kw, threads=1, backend="cpp")
    _compare(got, want, _stream_bound(P, idx, 0.02, steps, max(sizes) * d))
    for g, h in zip(got, fused.sphere_local_steps(*args, **kw, threads=2, backend="cpp")):
        np.testing.assert_array_equal(g, h)


@needs_cpp
def test_parallel_compiled_kernel_near_the_antipode():
    """Where ``1 + <x_t, x> < 1e-6`` the kernel takes the logarithm's form of the transport, as
    ``Sphere.transport`` does (the closed form's error ~ eps/(1 + <x_t, x>) would be ~1e-8
    here). One step from ``x ~ -x_t`` at distance ``w ~ 1e-4``: the form's error is
    ``~ (d + 3) eps |v| / |w|`` in the transported vector (``e = w/|w|`` carries the rounding of
    ``w``), times ``eta`` in the step; bound ``10`` times that plus :func:`_bound`. The
    reference takes the same form there: it equals ``Sphere.transport``'s steps too."""
    P, idx, x_t, _, offset, _ = _parallel_case((30, 45, 12), 9, 3)
    M = P.manifold
    rng = np.random.default_rng(4)
    x0 = M.exp(np.broadcast_to(-x_t, (3, 9)), M.proj(-x_t, 1e-4 * rng.standard_normal((3, 9))))
    assert (1.0 + x0 @ x_t < 1e-6).all()
    rows = P.quadratic_rows()
    kw = {"offset": offset, "anchor": x_t, "transport": "parallel"}
    args = (rows.rows, rows.offsets, idx, x0, rows.scale[idx], 0.05, 1)
    want = fused.sphere_local_steps_reference(*args, **kw)
    got = fused.sphere_local_steps(*args, **kw, backend="cpp")
    composed = _composed_parallel(P, idx, x_t, x0, 0.05, 1, offset, None)
    w = np.linalg.norm(x0 - (x0 @ x_t)[:, None] * x_t, axis=1).min()
    bound = 10 * 0.05 * 12 * EPS * np.abs(offset).max() * np.sqrt(9) / w + \
        _bound(P, idx, 0.05, 1, kw, 45 * 9)
    _compare(got, want, bound)
    _compare(want, composed, bound)


@needs_cpp
def test_parallel_transport_refusals_name_the_argument():
    """``transport`` is checked with the other arguments, by the binding and the reference:
    the parallel transport only with retraction 'exp' (r = 1), the anchor, ``mu = 0``, no
    ambient steps and either an offset or accumulate (without coef), not both; the stepper
    refuses a transport kernel its fused kernel does not declare."""
    from rfl_fast import _core
    from rfl_fast.algorithms.fedavg_prox import fused_local_steps

    Z = np.ones((5, 4))
    off = np.array([0, 2, 5], dtype=np.int64)
    idx = np.array([0, 1], dtype=np.int64)
    x0 = np.zeros((2, 4, 1))
    one = np.ones(2)
    v, a = np.zeros((2, 4, 1)), np.zeros((4, 1))
    for fn in (_core.pca_local_steps, fused.pca_local_steps_reference):
        with pytest.raises(ValueError, match="transport must be 'projection' or 'parallel'"):
            fn(Z, off, idx, x0, one, 0.1, 1, offset=v, anchor=a, retraction="exp",
               transport="schild")
        with pytest.raises(ValueError, match="transport 'parallel'.*needs retraction 'exp'"):
            fn(Z, off, idx, x0, one, 0.1, 1, offset=v, anchor=a, transport="parallel")
        for bad in ({"anchor": a}, {"offset": v}, {"offset": v, "anchor": a, "mu": 0.5},
                    {"offset": v, "anchor": a, "accumulate": True}, {"accumulate": True},
                    {"anchor": a, "accumulate": True, "coef": one}):
            with pytest.raises(ValueError, match="transport 'parallel' needs the anchor x_t"):
                fn(Z, off, idx, x0, one, 0.1, 1, retraction="exp", transport="parallel", **bad)
        got = fn(Z, off, idx, x0 + np.array([[1.0], [0], [0], [0]]), one, 0.1, 1,
                 anchor=a + np.array([[1.0], [0], [0], [0]]), accumulate=True,
                 retraction="exp", transport="parallel")
        assert len(got) == 2 and got[1].shape == x0.shape
    P, _ = _problem((30, 45, 12), 9, 3)
    x = P.manifold.random_point(rng=1)
    steps = fused_local_steps(P, "projection", inverse=True)
    assert steps.transports == ()
    with pytest.raises(ValueError, match="transport: sphere_projection_local_steps"):
        steps(np.array([0]), x, 0.1, 1, offset=np.zeros((1, 9)), anchor=x,
              transport="sphere_transport")


PARALLEL = {"RFedSVRG": RFedSVRG(0.05, 5),
            "2BB": RFedSVRG2BB(0.05, 5),
            "2BBS": RFedSVRG2BBS(0.05, 5, eta_min=0.05, eta_max=0.5)}


@pytest.mark.parametrize("backend", ["auto", "numpy"])
@pytest.mark.parametrize("name", list(PARALLEL))
def test_parallel_transport_algorithms_fused_equal_their_composed_loop(name, backend,
                                                                       monkeypatch):
    """RFedSVRG, 2BB and 2BBS with the sphere's default (parallel) transport take the fused
    kernel once per round and give the composed loop's iterates to rounding; 2BB's and 2BBS's
    correction forced on (weights in [-1, 1]; the PCA runs' curvature pairs would leave it
    off), so the ``coef Log_{x_t}(x)`` term is exercised.

    Tolerance: :func:`test_algorithms_fused_equal_their_composed_loop`'s, the growth per step
    enlarged by ``3 eta |coef|`` (the Log term) and by ``eta |diff|`` (the transport of
    ``diff`` moves with ``x``: Lipschitz constant ``|v|``), ``|diff| <= 2 max_i |grad f_i|``
    (``<= 2 a_max / eta`` on the unit sphere)."""
    from rfl_fast.algorithms import svrg as svrg_module
    alg = PARALLEL[name]
    assert alg.transport is None or alg.transport == "parallel"
    coef = None
    if name != "RFedSVRG":
        coef = np.random.default_rng(2).uniform(-1.0, 1.0, 4)
        monkeypatch.setattr(RFedSVRG2BB, "_correction",
                            lambda self, problem, idx, x_t, msg, memo: coef[idx])
    seen = []
    gate = svrg_module.RFedSVRG._fused_steps
    monkeypatch.setattr(svrg_module.RFedSVRG, "_fused_steps",
                        lambda self, *a: seen.append(a[-1]) or gate(self, *a))
    c = 0.0 if coef is None else np.abs(coef).max()
    _fused_equals_composed(alg, backend, lambda a, eta: 1 + 3 * a + 3 * eta * c)
    assert set(seen) == {"parallel"}
