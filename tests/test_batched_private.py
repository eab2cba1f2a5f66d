"""The private local steps batched over the clients: ``Problem.clipped_rgrad_sum`` (one call for
all participants) against the per-client default it replaces, and the per-item random streams
that give a batch of clients the draws of each client alone."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast._validation import ItemStreams
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


@pytest.mark.parametrize("M", [rf.Stiefel(9, 3), rf.Sphere(6), rf.SPD(3), rf.Lorentz(4),
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
