"""The private local steps batched over the clients: ``Problem.clipped_rgrad_sum`` (one call for
all participants) against the per-client default it replaces, and the per-item random streams
that give a batch of clients the draws of each client alone."""

import copy
import pickle

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.kernels.streams import ItemStreams
from rfl_fast.federation.context import ClientRandom
from rfl_fast.problems import KPCA, SPDMean, Brockett, SpherePCA
from rfl_fast.problems.base import Problem

EPS = np.finfo(np.float64).eps
SIZES = (7, 12, 4, 9)


def _problems():
    rng = np.random.default_rng(3)
    rows = [rng.standard_normal((m, 10)) for m in SIZES]
    spd = [(lambda a: a @ np.swapaxes(a, -1, -2) + 0.5 * np.eye(4))(
        rng.standard_normal((m, 4, 4))) for m in SIZES]
    sym = [(lambda a: a + np.swapaxes(a, -1, -2))(rng.standard_normal((m, 8, 8))) for m in SIZES]
    return {"KPCA": KPCA(rows, 3, gram=False), "SpherePCA": SpherePCA(rows, gram=False),
            "SPDMean": SPDMean(spd), "Brockett": Brockett(sym, 2)}


PROBLEMS = _problems()


def _batches(P, idx, rng):
    sizes = np.asarray(P.sizes)[idx]
    b = int(sizes.min())
    full = None
    equal = np.stack([rng.choice(int(m), b - 1, replace=False) for m in sizes])
    ragged = [rng.choice(int(m), max(1, int(m) // 2), replace=False) for m in sizes]
    return {"all": full, "(k, b)": equal, "per-client sizes": ragged}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("tau", [1e-3, 0.7, 50.0, np.inf])
def test_the_batched_clipped_sum_is_the_per_client_sum(name, tau):
    """Every override computes the per-client default's terms (``sample_rgrad_norms``'
    factors times ``weighted_rgrad``'s terms), summed in another order: the two agree within
    ``c m eps sum_j |clip(g_j)|`` per client (the rounding of an m-term sum of those terms, c
    covering the terms' own few-eps differences)."""
    P = PROBLEMS[name]
    rng = np.random.default_rng(0)
    idx = np.array([2, 0, 3, 1])
    x = P.manifold.random_point(idx.size, rng=1)
    for label, batch in _batches(P, idx, rng).items():
        got = P.clipped_rgrad_sum(idx, x, tau, batch)
        want = Problem.clipped_rgrad_sum(P, idx, x, tau, batch)
        assert got.shape == want.shape == (idx.size,) + P.shape
        for j, i in enumerate(idx):
            bj = None if batch is None else batch[j]
            norms = P.sample_rgrad_norms(int(i), x[j], bj)
            m = norms.size
            bound = 64 * m * EPS * np.minimum(norms, tau).sum()
            err = np.linalg.norm(got[j] - want[j])
            assert err <= bound, (name, label, j, err, bound)


def test_brockett_full_round_reads_the_data_in_place():
    """Brockett, every client with the same number of samples, all clients in order, full
    batch (a DP-RSGD round of Full participation): the block route reads the flat data itself
    and still gives the per-client default's sum (same bound as above)."""
    rng = np.random.default_rng(5)
    sym = (lambda a: a + np.swapaxes(a, -1, -2))(rng.standard_normal((5, 6, 8, 8)))
    P = Brockett(sym, 3)
    idx = np.arange(5)
    x = P.manifold.random_point(5, rng=2)
    for tau in (1e-3, 0.5, np.inf):
        got = P.clipped_rgrad_sum(idx, x, tau)
        want = Problem.clipped_rgrad_sum(P, idx, x, tau)
        for j in idx:
            norms = P.sample_rgrad_norms(int(j), x[j])
            bound = 64 * norms.size * EPS * np.minimum(norms, tau).sum()
            assert np.linalg.norm(got[j] - want[j]) <= bound


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_one_sample_moves_a_batched_clipped_sum_by_at_most_tau(name):
    """The privacy promise at the batched call: dropping one sample from a client's batch
    changes that client's clipped sum by at most tau (plus rounding), and no other client's."""
    P = PROBLEMS[name]
    tau = 0.05
    idx = np.array([1, 3])
    x = P.manifold.random_point(idx.size, rng=4)
    m = int(min(np.asarray(P.sizes)[idx]))
    full = np.tile(np.arange(m), (idx.size, 1))
    less = full.copy()
    less[0, -1] = less[0, 0]        # client 1's last sample replaced by a repeat of its first
    a = P.clipped_rgrad_sum(idx, x, tau, full)
    b = P.clipped_rgrad_sum(idx, x, tau, less)
    assert np.linalg.norm(a[0] - b[0]) <= 2 * tau * (1 + 1e-12)     # replace-one: 2 tau
    np.testing.assert_array_equal(a[1], b[1])


def test_item_streams_draw_what_each_generator_draws_alone():
    """Row j of a stacked draw is exactly generator j's own draw of one item, and the streams
    advance as they would alone."""
    shape = (5, 3)
    alone = [np.random.default_rng(s) for s in (1, 2, 3)]
    together = ItemStreams(np.random.default_rng(s) for s in (1, 2, 3))
    for _ in range(2):
        block = together.standard_normal((3,) + shape)
        for j, g in enumerate(alone):
            np.testing.assert_array_equal(block[j], g.standard_normal(shape))
    with pytest.raises(ValueError, match="one row per stream"):
        together.standard_normal((2, 5))


@pytest.fixture
def small_chunks(monkeypatch):
    """Every draw of more than 16 normals split over the package's threads (the real floor,
    65 536 normals a thread, leaves the tests' small draws on one thread); the thread setting
    restored afterwards."""
    from rfl_fast.kernels import streams
    monkeypatch.setattr(streams, "_DRAWS_PER_THREAD", 16)
    before = rf.get_threads()
    yield
    rf.set_threads(before)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(7, 5, 3), (7, 40), (7,), (1, 90), (2, 0)], ids=str)
def test_item_streams_threaded_fills_are_each_generators_own_draws(small_chunks, threads, shape):
    """Split over threads (contiguous runs of items, one thread each), item ``j`` is still
    generator ``j``'s own draw, bit for bit, and each generator is left where a draw alone
    leaves it; ``(k,)`` gives each item one number."""
    rf.set_threads(threads)
    seeds = range(10, 10 + shape[0])
    alone = [np.random.default_rng(s) for s in seeds]
    together = ItemStreams(np.random.default_rng(s) for s in seeds)
    for _ in range(2):
        block = together.standard_normal(shape)
        assert block.shape == shape
        for j, g in enumerate(alone):
            np.testing.assert_array_equal(block[j], g.standard_normal(shape[1:]))
    for g, h in zip(alone, together.generators):
        assert g.bit_generator.state == h.bit_generator.state


def test_item_streams_keep_a_shared_generators_order_and_a_subclass_draw(small_chunks):
    """One generator feeding two items (a repeated client) draws them in order, whatever the
    threads; a Generator subclass's own ``standard_normal`` is the one called."""
    rf.set_threads(3)
    shared = np.random.default_rng(1)
    streams = ItemStreams([np.random.default_rng(0), shared, np.random.default_rng(2), shared])
    block = streams.standard_normal((4, 30))
    ref = np.random.default_rng(1)
    np.testing.assert_array_equal(block[1], ref.standard_normal(30))
    np.testing.assert_array_equal(block[3], ref.standard_normal(30))

    class Counted(np.random.Generator):
        calls = 0

        def standard_normal(self, *args, **kwargs):
            Counted.calls += 1
            return super().standard_normal(*args, **kwargs)

    gens = [Counted(np.random.PCG64(s)) for s in range(5)]
    block = ItemStreams(gens).standard_normal((5, 40))
    assert Counted.calls == 5
    for s in range(5):
        np.testing.assert_array_equal(block[s], np.random.default_rng(s).standard_normal(40))


@pytest.mark.parametrize("threads", [1, 2])
def test_item_streams_have_no_python_loop_over_the_items(small_chunks, threads):
    """The fills iterate over the items in C: the Python lines a draw runs and the Python
    functions it calls (traced on the calling thread, package code or not) do not grow with
    the number of items (a loop runs a line or more per item: 390 more here; waiting on the
    threads varies by a few dozen lines)."""
    import sys

    rf.set_threads(threads)

    def events(k):
        streams = ItemStreams(np.random.default_rng(s) for s in range(k))
        n = 0

        def trace(frame, event, arg):
            nonlocal n
            n += 1
            return trace
        streams.standard_normal((k, 50))    # the pool started
        sys.settrace(trace)
        try:
            streams.standard_normal((k, 50))
        finally:
            sys.settrace(None)
        return n

    assert events(400) - events(10) < 100


def test_item_streams_pool_is_made_again_after_a_fork(small_chunks, monkeypatch):
    """A forked child inherits the pool's object but not its threads: a pool of another
    process id is replaced, and the draw is the same."""
    from rfl_fast.kernels import streams

    rf.set_threads(2)
    gens = lambda: [np.random.default_rng(s) for s in range(6)]    # noqa: E731
    want = ItemStreams(gens()).standard_normal((6, 20))
    pid, workers, pool = streams._POOL
    monkeypatch.setattr(streams, "_POOL", (pid + 1, workers, pool))
    np.testing.assert_array_equal(ItemStreams(gens()).standard_normal((6, 20)), want)
    assert streams._POOL[0] == pid and streams._POOL[2] is not pool


@pytest.mark.parametrize("kw", [dict(sigma=0.05, clip=0.5),
                                dict(sigma=np.array([0.05, 0.0, 0.02, 0.0]), clip=0.5,
                                     batch_size=3),
                                dict(local="DP-RSVRG", inner_steps=2, sigma=0.05, clip=0.5)],
                         ids=["DP-RSGD", "some-noiseless", "DP-RSVRG"])
def test_a_private_run_is_the_same_on_any_number_of_threads(small_chunks, kw):
    """PriRFed's noise drawn on 1, 2 or 3 threads: the same run, bit for bit."""
    from rfl_fast.algorithms import PriRFed
    from rfl_fast.federation import Full, run

    P = PROBLEMS["KPCA"]
    alg = PriRFed(0.05, 2, **kw)
    got = []
    for threads in (1, 2, 3):
        rf.set_threads(threads)
        got.append(run(P, alg, 2, Full(), seed=4, metrics=False).x)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


def test_client_random_draws_are_each_clients_own():
    """``ClientRandom``'s batched draws (mapped over the generators in C) give client ``j``
    what its generator draws alone, in the same order."""
    idx = np.array([5, 2, 9, 0])
    sizes = [6, 7, 8, 7]
    got = ClientRandom(3, 1, idx)
    got = (got.batches(sizes, 3), got.integers(2, 11), got.random(), got.standard_normal((2, 3)),
           got.batches(sizes, 0))
    for j, i in enumerate(idx):
        g = rf.federation.context.client_rng(3, 1, i)
        np.testing.assert_array_equal(got[0][j], g.choice(sizes[j], 3, replace=False))
        assert got[1][j] == g.integers(2, 11) and got[2][j] == g.random()
        np.testing.assert_array_equal(got[3][j], g.standard_normal((2, 3)))
    assert got[0].dtype == got[1].dtype == np.int64 and got[4].shape == (4, 0)
    assert ClientRandom(3, 1, []).batches([], 2).shape == (0, 2)


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 1, 2**32, 2**64 + 3,
                                  0x9B3D_1A2F_77C0_5E11_0D4B_2A68_F3E9_1C07, 3**200])
@pytest.mark.parametrize("t", [0, 5, 2**33])
@pytest.mark.parametrize("compiled", [True, False])
def test_client_generators_are_numpys_seed_sequences(seed, t, compiled, monkeypatch):
    """The round's generators, their seeds hashed for all clients at once (``spawn_words``) and
    PCG64 seeded from those words (``_core.SpawnedSeed``, or NumPy's own SeedSequence without
    it), are ``client_rng``'s: the same seed words as NumPy's ``SeedSequence``, the same draws,
    the same children from ``spawn``, the same other words; ids of one and two 32-bit words
    mixed, and a client listed twice gets one generator."""
    from rfl_fast.federation.context import ClientContext
    from rfl_fast.kernels import streams

    if compiled:
        assert (streams._spawned_seed() is None) == (streams.load("cpp") is None)
    else:
        monkeypatch.setattr(streams, "_SPAWNED", False)
    ids = np.array([0, 1, 9, 2**32 - 1, 2**32, 5, 2**40 + 3, 2**63 - 1, 9])
    want = np.stack([np.random.SeedSequence(seed, spawn_key=(3, t, int(i))).generate_state(
        4, np.uint64) for i in ids])
    spawn_words = streams.spawn_words
    if hasattr(streams.load("cpp"), "spawn_words"):     # (hashed by the compiled core)
        np.testing.assert_array_equal(spawn_words(seed, (3, t), ids.tolist()), want)
        np.testing.assert_array_equal(spawn_words(seed, (3, t), ids[:0]), want[:0])
    gens = ClientContext.create(seed, t, ids, None).rng.generators()
    assert gens[2] is gens[-1]
    for g, i in zip(gens[:-1], ids[:-1]):
        ref = rf.federation.context.client_rng(seed, t, int(i))
        np.testing.assert_array_equal(g.standard_normal(4), ref.standard_normal(4))
        mine, theirs = g.bit_generator.seed_seq, ref.bit_generator.seed_seq
        for words, dtype in ((3, np.uint32), (4, np.uint32), (2, np.uint64)):
            np.testing.assert_array_equal(mine.generate_state(words, dtype),
                                          theirs.generate_state(words, dtype))
        assert (mine.entropy, mine.spawn_key) == (theirs.entropy, theirs.spawn_key)
        for n in (2, 1):    # (SeedSequence.spawn: Generator.spawn needs NumPy 1.25)
            assert [s.generate_state(2).tolist() for s in mine.spawn(n)] == \
                [s.generate_state(2).tolist() for s in theirs.spawn(n)]
        for copier in (copy.deepcopy, lambda a: pickle.loads(pickle.dumps(a))):
            copied = copier(g)
            np.testing.assert_array_equal(copied.standard_normal(3), ref.standard_normal(3))
            g.standard_normal(3)
            assert copied.bit_generator.seed_seq.n_children_spawned == 3
    for bad in ([-1], [0, -3], [0.5]):
        with pytest.raises(ValueError, match="ids"):
            spawn_words(seed, (3, t), bad)
    with pytest.raises(ValueError, match="seed"):
        spawn_words(-1, (3, t), [0])


def test_spawned_seed_reads_its_words_whatever_their_layout():
    """``_core.SpawnedSeed`` copies its four words (a strided or reversed view reads the same
    words as its copy) and refuses anything but four uint64 words, naming the argument."""
    from rfl_fast.kernels import streams

    cls = streams._spawned_seed()
    if cls is None:
        pytest.skip("no compiled core")
    base = np.arange(8, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for view in (base[::2], base[::-2], base[4:]):
        got = cls(0, (3,), 1, view).generate_state(4, np.uint64)
        np.testing.assert_array_equal(got, view)
        assert not np.shares_memory(got, base)
    for bad in (base[:3], base.astype(np.int64)[:4], base[:4].astype(">u8"), base.reshape(2, 4)):
        with pytest.raises(ValueError, match="words"):
            cls(0, (3,), 1, bad)


def test_option_two_picks_item_j_of_its_own_iterate():
    from rfl_fast.algorithms.pri import _picked

    path = [np.random.default_rng(s).standard_normal((5, 3, 2)) for s in range(4)]
    pick = np.array([3, 0, 3, 1, 0])
    np.testing.assert_array_equal(_picked(path, pick),
                                  np.stack([path[p][j] for j, p in enumerate(pick)]))


@pytest.mark.parametrize("M", [rf.Stiefel(9, 3), rf.Sphere(6), rf.SPD(3), rf.Lorentz(4),
                               rf.Grassmann(9, 3),
                               rf.Product(rf.Stiefel(5, 2), rf.Euclidean(3))], ids=repr)
def test_a_batched_tangent_gaussian_is_each_clients_own_draw(M):
    """``tangent_gaussian`` over k clients with ``ClientRandom.streams`` gives client j the
    noise it draws alone from its stream (a Flower client draws alone): the same normals, then
    the same few-flop map per item, whose stacked and single matrix products may round
    differently (NumPy's stacked matmul, SPD's ``X^1/2 S X^1/2``): within a few eps of the
    entries' scale."""
    idx = np.array([4, 0, 7])
    x = M.random_point(idx.size, rng=2)
    sig = np.array([0.3, 1.0, 2.5])
    batched = M.tangent_gaussian(x, sig, rng=ClientRandom(11, 3, idx).streams())
    lone = ClientRandom(11, 3, idx)
    for j in range(idx.size):
        one = M.tangent_gaussian(x[j], sig[j], rng=lone.generator(j))
        np.testing.assert_allclose(batched[j], one, rtol=0, atol=16 * EPS * np.abs(one).max())
    assert np.all(M.is_tangent(x, batched))   # (Grassmann: horizontal, not Stiefel's tangent)


@pytest.mark.skipif("cpp" not in rf.available_backends(), reason="no compiled core")
@pytest.mark.parametrize("M", [rf.Stiefel(784, 5), rf.Stiefel(40, 12), rf.Sphere(50)], ids=repr)
def test_projected_normal_is_the_tangent_gaussian_in_one_pass(small_chunks, M):
    """Stiefel's and the sphere's tangent Gaussian over a stack's streams take the compiled pass
    (``ItemStreams.projected_normal``: each client's normals, scaled and projected while in
    cache): the numbers of NumPy's draws projected by the stiefel_proj kernel (Stiefel: the
    same bits; the sphere's own projection: to rounding), every stream left where NumPy's draw
    leaves it, on one thread or several, and an item alone equal to its row in a stack."""
    k = 21
    idx = np.arange(k)
    x = M.random_point(k, rng=5)
    sig = np.linspace(0.0, 2.0, k)
    x3 = np.ascontiguousarray(x.reshape(k, x.shape[1], -1))
    # the compiled pass where auto gives the projection to C++ (p < 9), else NumPy's route
    compiled = rf.kernels.auto_order("stiefel_proj", x3.shape)[0] == "cpp"
    assert compiled == (isinstance(M, rf.Sphere) or M.shape[1] < 9)
    drawn = ItemStreams(ClientRandom(2, 1, idx).generators()).projected_normal(x3, sig)
    assert (drawn is not None) == compiled
    gens = ClientRandom(2, 1, idx).generators()
    g = np.stack([gen.standard_normal(x.shape[1:]) for gen in gens])
    want = M.proj(x, g * sig.reshape((k,) + (1,) * M.core_ndim))
    for threads in (1, 3):
        rf.set_threads(threads)
        streams = ClientRandom(2, 1, idx).streams()
        got = M.tangent_gaussian(x, sig, rng=streams)
        if isinstance(M, rf.Stiefel):
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=8 * EPS * np.abs(want).max())
        alone = ClientRandom(2, 1, idx).generators()
        for b in alone:
            b.standard_normal(x.shape[1:])
        assert [a.integers(1 << 62) for a in streams.generators] == \
            [b.integers(1 << 62) for b in alone]
    one = M.tangent_gaussian(x[3:4], sig[3:4], rng=ItemStreams([ClientRandom(2, 1, idx)
                                                                 .generator(3)]))
    np.testing.assert_array_equal(one[0], got[3])
    # what it does not serve, it leaves to NumPy's route (nothing drawn): other shapes of sigma,
    # float32, a backend in force that does not give stiefel_proj to C++
    assert ItemStreams(gens).projected_normal(x3, sig[:, None]) is None
    assert ItemStreams(gens).projected_normal(x3.astype(np.float32), sig) is None
    with rf.backend("numpy"):
        assert ItemStreams(gens).projected_normal(x3, sig) is None
        np.testing.assert_allclose(M.tangent_gaussian(x, sig, rng=ClientRandom(2, 1, idx)
                                                      .streams()), want, rtol=0,
                                   atol=8 * EPS * np.abs(want).max())
    # a client listed twice (one generator for two items): drawn in order, as NumPy would
    g0 = ClientRandom(2, 1, idx).generator(0)
    twice = M.tangent_gaussian(x[:2], sig[1:3], rng=ItemStreams([g0, g0]))
    alone = ClientRandom(2, 1, idx).generator(0)
    first = M.proj(x[0], sig[1] * alone.standard_normal(x.shape[1:]))
    second = M.proj(x[1], sig[2] * alone.standard_normal(x.shape[1:]))
    np.testing.assert_allclose(twice, np.stack([first, second]), rtol=0,
                               atol=8 * EPS * np.abs(second).max())
    # an empty stack: an empty answer
    assert M.tangent_gaussian(x[:0], 1.0, rng=ItemStreams([])).shape == x[:0].shape


def test_a_subclass_with_its_own_projection_keeps_its_noise():
    """A subclass of Stiefel that overrides ``proj`` does not inherit the compiled noise (whose
    projection is Stiefel's), unless it declares ``stiefel_noise`` itself."""
    class Horizontal(rf.Stiefel):
        def proj(self, x, u):
            return u - x @ (np.swapaxes(x, -1, -2) @ u)

    M = Horizontal(12, 3)
    assert not M.stiefel_noise and rf.Stiefel(12, 3).stiefel_noise
    x = M.random_point(4, rng=1)
    v = M.tangent_gaussian(x, 1.0, rng=ClientRandom(3, 0, np.arange(4)).streams())
    np.testing.assert_allclose(np.swapaxes(x, -1, -2) @ v, 0.0, atol=1e-13)


def test_stiefel_exp_is_edelmans_geodesic_with_scipys_expm():
    """The batched Pade-13 exponential in ``Stiefel.exp`` against SciPy's ``expm`` item by item
    on the same formula: both are backward stable scaling-and-squaring methods, so for steps of
    moderate norm (|A|_1 up to a few units, at most two squarings) they agree within a small
    multiple of eps times the result's scale; one item alone gives the bits it gets in a
    batch."""
    import scipy.linalg

    M = rf.Stiefel(12, 4)
    x = M.random_point(30, rng=5)
    u = M.proj(x, np.random.default_rng(6).standard_normal(x.shape))
    u *= np.linspace(1e-6, 3.0, 30)[:, None, None] / np.linalg.norm(u, axis=(-2, -1))[:, None, None]
    got = M.exp(x, u)
    for j in range(x.shape[0]):
        a, s = x[j].T @ u[j], u[j].T @ u[j]
        block = np.block([[a, -s], [np.eye(4), a]])
        want = np.hstack([x[j], u[j]]) @ scipy.linalg.expm(block)[:, :4] @ scipy.linalg.expm(-a)
        np.testing.assert_allclose(got[j], want, rtol=0, atol=1e3 * EPS)
    np.testing.assert_array_equal(M.exp(x[7:8], u[7:8])[0], got[7])
