"""The compiled normal rows of ``ItemStreams`` (``src/normal.cpp``, ``rfl/normal.hpp``): NumPy's
``Generator(PCG64).standard_normal``, bit for bit, from each generator's own state, which they
advance as NumPy does; other generators, and a fill that fails its probe, go NumPy's way."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.kernels import streams
from rfl_fast.kernels.streams import ItemStreams

needs_fill = pytest.mark.skipif(streams._compiled_fill() is None,
                                reason="no compiled normal rows (C++ core not built)")


@pytest.fixture
def threads():
    before = rf.get_threads()
    yield rf.set_threads
    rf.set_threads(before)


def _alone(seeds, shape):
    gens = [np.random.default_rng(s) for s in seeds]
    return gens, np.stack([g.standard_normal(shape) for g in gens])


@needs_fill
@pytest.mark.parametrize("shape", [(), (1,), (7,), (784,), (3, 5), (20, 5, 4)])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_compiled_rows_are_numpys_draws(shape, n_threads, threads, monkeypatch):
    threads(n_threads)
    monkeypatch.setattr(streams, "_DRAWS_PER_THREAD", 16)   # several blocks on the threads
    seeds = [[4, j] for j in range(9)]
    mine = [np.random.default_rng(s) for s in seeds]
    for _ in range(2):      # the streams continue where NumPy leaves them
        got = ItemStreams(mine).standard_normal((len(seeds),) + shape)
        ref, want = _alone(seeds, shape) if _ == 0 else (ref, np.stack(
            [g.standard_normal(shape) for g in ref]))
        np.testing.assert_array_equal(got, want)
    assert [g.integers(1 << 62) for g in mine] == [g.integers(1 << 62) for g in ref]


@needs_fill
def test_many_normals_take_numpys_rare_branches_too():
    """4 million normals (about 28,000 through the ziggurat's rare branches, some through its
    tail): the same numbers."""
    mine = [np.random.default_rng(11), np.random.default_rng(12)]
    got = ItemStreams(mine).standard_normal((2, 2_000_000))
    _, want = _alone([11, 12], (2_000_000,))
    np.testing.assert_array_equal(got, want)


def test_two_generators_on_one_bit_generator_are_one_stream(threads, monkeypatch):
    """Generators sharing a bit generator share one stream: the rows are drawn in order on one
    thread (several threads would race on the shared state), as NumPy draws them."""
    threads(2)
    monkeypatch.setattr(streams, "_DRAWS_PER_THREAD", 16)
    bg = np.random.PCG64(9)
    got = ItemStreams([np.random.Generator(bg), np.random.Generator(bg)] * 3).standard_normal(
        (6, 400))
    ref = np.random.Generator(np.random.PCG64(9))
    np.testing.assert_array_equal(got, np.stack([ref.standard_normal(400) for _ in range(6)]))


@needs_fill
def test_a_repeated_generator_continues_its_own_stream():
    g, h = np.random.default_rng(5), np.random.default_rng(6)
    got = ItemStreams([g, h, g]).standard_normal((3, 50))
    g2, h2 = np.random.default_rng(5), np.random.default_rng(6)
    want = np.stack([g2.standard_normal(50), h2.standard_normal(50), g2.standard_normal(50)])
    np.testing.assert_array_equal(got, want)


def test_other_generators_go_numpys_way(monkeypatch):
    """A Generator subclass, or another bit generator (Philox), is drawn by NumPy: the same
    numbers, and the compiled fill is never called."""
    monkeypatch.setattr(streams, "_compiled_fill", lambda: pytest.fail("compiled fill used"))

    class Counting(np.random.Generator):
        pass

    gens = [Counting(np.random.PCG64(1)), np.random.Generator(np.random.Philox(2))]
    got = ItemStreams(gens).standard_normal((2, 30))
    want = np.stack([np.random.Generator(np.random.PCG64(1)).standard_normal(30),
                     np.random.Generator(np.random.Philox(2)).standard_normal(30)])
    np.testing.assert_array_equal(got, want)


def test_a_fill_that_fails_the_probe_is_not_used():
    def wrong(caps, out, n):       # draws nothing: the probe's rows stay arbitrary
        np.ctypeslib.as_array(ctypes_double_p(out), shape=(len(caps) * n,))[:] = 0.0
        return 1

    import ctypes
    ctypes_double_p = lambda p: ctypes.cast(p, ctypes.POINTER(ctypes.c_double))  # noqa: E731
    assert not streams._probe(wrong)
    assert not streams._probe(lambda caps, out, n: 0)     # a build without 128-bit integers


def test_the_layout_is_checked_before_any_compiled_draw(monkeypatch):
    """NumPy's PCG64 state is read only where it is laid out as the header reads it: this
    NumPy's words equal what ``bit_generator.state`` reports; a NumPy 3 is not trusted."""
    assert streams._numpy_layout() == (np.lib.NumpyVersion(np.__version__) < "3.0.0")
    monkeypatch.setattr(np, "__version__", "3.0.0")
    assert not streams._numpy_layout()
