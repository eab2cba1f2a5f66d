"""rfl_fast.privacy.rdp: dp-accounting's sampled-Gaussian RDP (without replacement) and its
epsilon conversion, ported to vectorized NumPy, checked against dp-accounting itself.

Tolerances. The port evaluates the same formulas with NumPy's vectorized ``exp``/``log1p``
(where dp-accounting calls ``math``'s one value at a time) and ``math.lgamma`` (where it calls
SciPy's ``gammaln``): each a few ulps apart. Theorem 27's forward differences of ``exp(cgf)``
cancel, and the cancellation amplifies those ulps; with the noise multiplier ``z <= 5``
(the regime of private training) or a small sampling rate the amplification stays below
``1e-10`` relative (measured on a grid, 3e-11 at worst), hence ``rtol = 1e-9``. With a large
``z`` and a large sampling rate the differences of order up to 256 lose every digit in
*both* implementations (against a 400-digit mpmath evaluation, ``z = 20``: log errors of 200
in each); there the two agree only where the bound does not rest on them, checked below.
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from rfl_fast.privacy import rdp
from rfl_fast.privacy.accounting import DPSettings, _rdp_round_computed, _step_event

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.rdp import rdp_privacy_accountant as R  # noqa: E402

RTOL = 1e-9
RATES = (1e-6, 1e-3, 1 / 60, 10 / 60, 0.5, 0.9)
WELL_CONDITIONED = [(q, z) for q in RATES for z in (0.05, 0.3, 0.5, 1.0, 2.0, 5.0)] + \
    [(q, z) for q in (1e-3, 1 / 60) for z in (20.0, 1e3, 1e5)]


def test_the_orders_are_dp_accountings():
    np.testing.assert_array_equal(rdp.ORDERS, np.asarray(R.DEFAULT_RDP_ORDERS, float))
    assert not rdp.ORDERS.flags.writeable


@pytest.mark.parametrize("q,z", WELL_CONDITIONED)
def test_sampled_gaussian_is_dp_accountings(q, z):
    want = R._compute_rdp_sample_wor_gaussian(q, z, R.DEFAULT_RDP_ORDERS)
    got = rdp.sampled_gaussian(q, z)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0)


@pytest.mark.parametrize("q", (1 / 6, 0.5, 0.9))
@pytest.mark.parametrize("z", (10.0, 20.0, 1e3))
def test_large_noise_at_a_large_rate_agrees_at_the_conditioned_orders(q, z):
    """Orders up to 20 agree; above, the forward differences have no digits left in either
    implementation (module docstring): nothing to compare, both stay finite."""
    want = R._compute_rdp_sample_wor_gaussian(q, z, R.DEFAULT_RDP_ORDERS)
    got = rdp.sampled_gaussian(q, z)
    low = rdp.ORDERS <= 20
    np.testing.assert_allclose(got[low], want[low], rtol=RTOL, atol=0)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("orders", ([1.5, 2.0, 2.5, 7.0, 300.0, 1024.0], [2.0, np.inf], [3.0]))
def test_any_orders_and_the_edges(orders):
    for q, z in ((0.1, 1.0), (0.0, 1.0), (1.0, 2.0)):
        want = R._compute_rdp_sample_wor_gaussian(q, z, orders)
        np.testing.assert_allclose(rdp.sampled_gaussian(q, z, orders), want, rtol=RTOL, atol=0)


@pytest.mark.parametrize("q", (1 / 60, 0.5))
def test_it_refuses_where_dp_accounting_leaves_its_domain(q):
    with pytest.raises(ValueError):
        R._compute_rdp_sample_wor_gaussian(q, 1e9, R.DEFAULT_RDP_ORDERS)
    with pytest.raises(ValueError, match="domain"):
        rdp.sampled_gaussian(q, 1e9)


def test_epsilon_is_dp_accountings():
    rng = np.random.default_rng(7)
    orders = rdp.ORDERS
    curves = [rng.exponential(s, orders.size) * orders for s in (1e-6, 1e-3, 0.1, 1.0, 30.0)]
    curves += [np.zeros(orders.size), np.full(orders.size, np.inf),
               np.where(orders > 5, np.inf, 0.01 * orders), -1e-3 * np.ones(orders.size)]
    for curve in curves:
        for delta in (1e-10, 1e-5, 0.1, 0.9):
            want = R.compute_epsilon(orders, curve, delta)[0]
            got = rdp.epsilon(orders, curve, delta)
            assert got == pytest.approx(want, rel=1e-12, abs=0), (curve[:3], delta)
        assert rdp.epsilon(orders, curve, 0.0) == R.compute_epsilon(orders, curve, 0.0)[0]
    with pytest.raises(ValueError, match="rdp"):
        rdp.epsilon(orders, np.zeros(3), 1e-5)


def _rdp_round_by_dp_accounting(sigma, st):
    """The round's RDP the way the package computed it before the port: dp-accounting's
    accountant composing the step events."""
    acc = R.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SelfComposedDpEvent(_step_event(sigma, st, "without_replacement"),
                                        st.steps_per_round))
    out = np.asarray(acc.rdp, float)
    rho = st.client_rate
    if rho < 1.0:
        out = np.logaddexp(math.log1p(-rho), math.log(rho) + (acc.orders - 1) * out) \
            / (acc.orders - 1)
    return out


@pytest.mark.parametrize("trainer,batch", (("dp-rsgd", 10), ("dp-rsgd", 1), ("dp-rsgd", None),
                                           ("dp-rsvrg", None)))
@pytest.mark.parametrize("sigma", (0.05, 0.5, 1.0))   # z = 10 sigma / 2 <= 5 at b = 10
def test_a_rounds_rdp_is_what_dp_accounting_composes(trainer, batch, sigma):
    st = DPSettings(n_samples=60, local_steps=5, batch_size=batch, trainer=trainer,
                    inner_steps=3, tau=1.0, rounds=10, clients_per_round=3, n_clients=10)
    orders, got = _rdp_round_computed(sigma, st)
    np.testing.assert_array_equal(orders, rdp.ORDERS)
    np.testing.assert_allclose(got, _rdp_round_by_dp_accounting(sigma, st), rtol=RTOL, atol=0)


def test_the_rdp_accountant_runs_without_importing_dp_accounting():
    """A private Flower client recomputes its ledger's curve in every fresh ClientApp
    process: dp-accounting is neither imported nor needed for it."""
    code = (
        "import sys\n"
        "sys.modules['dp_accounting'] = None   # as if not installed: importing it fails\n"
        "from rfl_fast.privacy import Accountant, DPSettings, epsilon_rdp\n"
        "st = DPSettings(n_samples=60, local_steps=5, batch_size=10, rounds=3)\n"
        "eps = Accountant('rdp').charge(0.5, st, rounds=3).epsilon(1e-5)\n"
        "assert 0 < eps < float('inf') and eps == epsilon_rdp(0.5, 1e-5, st), eps\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr[-2000:]
