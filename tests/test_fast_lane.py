"""The public API's fast lane (``Manifold._compiled``, ``_core.<kernel>_checked``): it answers
exactly as the general route when it answers, and leaves everything else to the general route,
so errors never depend on which route ran."""

import sys

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import _core
from rfl_fast.kernels import _dispatch
from rfl_fast.errors import NoSolutionError, NotOnManifoldError

# (manifold, public method, kernel, second argument: a tangent vector or a point)
LANES = [
    (rf.Stiefel(784, 5), "proj", "stiefel_proj", "ambient"),
    (rf.Stiefel(784, 5), "retr", "stiefel_retr_polar", "tangent"),
    (rf.Stiefel(20, 3), "retr", "stiefel_retr_polar", "tangent"),
    (rf.Stiefel(784, 5), "inv_retr", "stiefel_inv_retr_polar", "point"),
    (rf.Stiefel(12, 4), "inv_retr", "stiefel_inv_retr_polar", "point"),
    (rf.SPD(9), "exp", "spd_exp", "tangent"),
    (rf.SPD(9), "log", "spd_log", "point"),
    (rf.SPD(4), "dist", "spd_dist", "point"),
    (rf.Sphere(784), "exp", "sphere_exp", "tangent"),
    (rf.Sphere(10), "log", "sphere_log", "point"),
    (rf.Lorentz(3), "exp", "lorentz_exp", "tangent"),
]
IDS = [f"{m!r}.{meth}" for m, meth, _, _ in LANES]


def _args(m, second, batch, rng):
    x = m.random_point(*batch, rng=rng)
    if second == "point":
        if isinstance(m, rf.Stiefel):  # near x, where the inverse retractions are defined
            return x, m.retr(x, 0.3 * m.tangent_gaussian(x, 1.0, rng=rng))
        return x, m.random_point(*batch, rng=rng)
    v = 0.5 * m.tangent_gaussian(x, 1.0, rng=rng)
    if second == "ambient":
        v = v + rng.standard_normal(v.shape)
    return x, v


def _general(monkeypatch, m, meth, x, y):
    """The method's answer through the general route only."""
    with monkeypatch.context() as mp:
        mp.setattr(_dispatch, "resolve_checked", lambda kernel, choice=None, shape=None: None)
        return getattr(m, meth)(x, y)


@pytest.mark.parametrize("m, meth, kernel, second", LANES, ids=IDS)
@pytest.mark.parametrize("batch", [(), (3,), (2, 9)])
def test_lane_answers_as_the_general_route(monkeypatch, m, meth, kernel, second, batch):
    """Under the C++ backend (auto may choose another at some of these shapes)."""
    rng = np.random.default_rng(len(batch))
    x, y = _args(m, second, batch, rng)
    lane = getattr(_core, kernel + "_checked")(x, y, m.shape)
    assert lane is not None  # ready float64 input: the lane answered
    with rf.backend("cpp"):
        assert _dispatch.resolve_checked(kernel) is not None
        got = getattr(m, meth)(x, y)
        want = _general(monkeypatch, m, meth, x, y)
    assert type(got) is type(want) and np.shape(got) == np.shape(want) == lane.shape
    np.testing.assert_array_equal(got, want)  # the same kernel: the same bits
    np.testing.assert_array_equal(lane, want)


@pytest.mark.parametrize("m, meth, kernel, second", LANES, ids=IDS)
def test_lane_leaves_what_it_does_not_take_to_the_general_route(m, meth, kernel, second):
    rng = np.random.default_rng(1)
    x, y = _args(m, second, (4,), rng)
    lane = getattr(_core, kernel + "_checked")
    k = m.core_ndim
    raw = np.zeros(x.nbytes + 8, dtype=np.uint8)
    misaligned = np.frombuffer(raw.data, dtype=np.float64, offset=1, count=x.size)
    misaligned = misaligned.reshape(x.shape)
    misaligned[...] = x

    class Sub(np.ndarray):
        pass

    others = {
        "float32": (x.astype(np.float32), y.astype(np.float32)),
        "not contiguous": (x, np.repeat(y, 2, axis=-1)[..., ::2]),
        "byte-swapped": (x.astype(">f8"), y),
        "misaligned": (misaligned, y),
        "subclass": (x.view(Sub), y),
        "list": (x.tolist(), y),
        "broadcast": (x[0], y),
        "other core shape": (x[..., :-1], y[..., :-1]),
        "empty batch": (x[:0], y[:0]),
    }
    for what, (a, b) in others.items():
        assert lane(a, b, m.shape) is None, what
    assert lane(x, y, m.shape[:-1] if k > 1 else ()) is None  # core of the wrong length
    assert lane(x, y, list(m.shape)) is None  # core not a tuple
    assert lane(x, y, tuple(str(s) for s in m.shape)) is None  # core entries not ints
    for arg in (0, 1):
        for bad in (np.nan, np.inf, -np.inf):
            for where in (0, 3, x.size - 1):  # first entry, inside the vector body, last entry
                a, b = x.copy(), y.copy()
                (a, b)[arg].flat[where] = bad
                assert lane(a, b, m.shape) is None, (arg, bad, where)


def test_nan_input_raises_the_named_error_on_a_shape_the_lane_takes():
    m = rf.Stiefel(784, 5)
    x = m.random_point(rng=0)
    u = m.proj(x, np.ones((784, 5)))
    u[7, 2] = np.nan
    with pytest.raises(ValueError, match="u"):
        m.retr(x, u)
    with pytest.raises(ValueError, match="x"):
        m.proj(u, x)


def _unsolved(name):
    """(manifold, method, kernel, x, y) where the lane takes every input and an item of the
    kernel's output is NaN or inf."""
    if name == "stiefel retr":
        m = rf.Stiefel(784, 5)
        x = m.random_point(3, rng=0)
        u = np.zeros_like(x)
        u[1] = -x[1]  # X + U = 0 for item 1 (not tangent: no validation asked)
        return m, "retr", "stiefel_retr_polar", x, u
    if name == "stiefel proj":  # x'u overflows: the general route returns the output as it is
        m = rf.Stiefel(30, 3)
        x = m.random_point(2, rng=1)
        return m, "proj", "stiefel_proj", 1e200 * x, 1e200 * x
    if name == "stiefel inv_retr":  # y orthogonal to x: x'y = 0
        m = rf.Stiefel(12, 4)
        x = np.eye(12)[:, :4]
        return m, "inv_retr", "stiefel_inv_retr_polar", np.stack([x, x]), \
            np.stack([x, np.eye(12)[:, 4:8]])
    if name == "sphere log":
        s = rf.Sphere(10)
        p = s.random_point(2, rng=1)
        q = p.copy()
        q[1] = -p[1]
        return s, "log", "sphere_log", p, q
    if name == "spd dist":
        m = rf.SPD(4)
        x = m.random_point(2, rng=2)
        return m, "dist", "spd_dist", x, np.stack([x[0], -np.eye(4)])
    m = rf.Lorentz(3)  # lorentz exp: the point overflows
    x = m.random_point(2, rng=3)
    return m, "exp", "lorentz_exp", x, 1e3 * m.tangent_gaussian(x, 1.0, rng=4)


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - compared below, type and message
        return type(exc), str(exc)


@pytest.mark.parametrize("name", ["stiefel retr", "stiefel proj", "stiefel inv_retr",
                                  "sphere log", "spd dist", "lorentz exp"])
def test_item_without_answer_ends_as_the_general_route_from_the_lanes_output(monkeypatch,
                                                                            name):
    """The lane returns the output it computed as (out,); the method raises or returns from it
    as the general route does from the same kernel's output, without a second call."""
    m, meth, kernel, x, y = _unsolved(name)
    lane = getattr(_core, kernel + "_checked")(x, y, m.shape)
    assert type(lane) is tuple and len(lane) == 1 and not np.isfinite(lane[0]).all()
    with rf.backend("cpp"):
        want = _outcome(_general, monkeypatch, m, meth, x, y)
        with monkeypatch.context() as mp:
            mp.setattr(sys.modules[type(m).__module__], "call",  # no second kernel call
                       lambda *a, **k: pytest.fail("the general route computed it again"))
            got = _outcome(getattr(m, meth), x, y)
    if type(want) is tuple:
        assert got == want and want[0] is NoSolutionError
    else:
        np.testing.assert_array_equal(got, want)  # NaN where NaN
        np.testing.assert_array_equal(lane[0], want)
    assert name != "stiefel retr" or "batch index [[1]]" in want[1]


def test_antipodal_log_raises():
    s = rf.Sphere(10)
    p = s.random_point(rng=1)
    with pytest.raises(NoSolutionError, match="antipodal"):
        s.log(p, -p)


def test_validation_and_other_backends_bypass_the_lane(monkeypatch):
    m = rf.Stiefel(30, 3, validate=True)
    x = m.random_point(rng=2)
    off = 1.5 * x  # not on the manifold: the lane would answer, the validation must not
    with pytest.raises(NotOnManifoldError):
        m.retr(off, np.zeros_like(x))
    m = rf.Stiefel(30, 3)
    u = m.tangent_gaussian(x, 0.1, rng=3)
    calls = []
    orig = _core.stiefel_retr_polar_checked
    monkeypatch.setattr(_core, "stiefel_retr_polar_checked",
                        lambda *a: calls.append(1) or orig(*a))
    _dispatch._checked.clear()
    try:
        for backend in [b for b in rf.available_backends() if b != "cpp"]:
            with rf.backend(backend):
                m.retr(x, u)
            m.retr(x, u, backend=backend)
        assert calls == []
        m.retr(x, u)
        assert calls == [1]
    finally:
        _dispatch._checked.clear()


@pytest.mark.parametrize("m, batch", [(rf.Stiefel(784, 5), (20,)), (rf.Sphere(10), (10_000,))])
def test_lane_in_chunks(monkeypatch, m, batch):
    """Batches larger than one chunk: the same answer; a NaN in the last chunk is still seen."""
    rng = np.random.default_rng(5)
    x = m.random_point(*batch, rng=rng)
    v = 0.5 * m.tangent_gaussian(x, 1.0, rng=rng)
    meth = "retr" if isinstance(m, rf.Stiefel) else "exp"
    np.testing.assert_array_equal(getattr(m, meth)(x, v), _general(monkeypatch, m, meth, x, v))
    kernel = "stiefel_retr_polar" if meth == "retr" else "sphere_exp"
    for arr in (x, v):
        arr.flat[-1] = np.nan
        assert getattr(_core, kernel + "_checked")(x, v, m.shape) is None
        arr.flat[-1] = 0.0
