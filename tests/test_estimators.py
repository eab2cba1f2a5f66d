"""The scikit-learn style estimators: FederatedPCA against sklearn's PCA, FederatedFrechetMean
against the centralized Frechet mean, and scikit-learn's estimator checks.

Skipped scikit-learn checks (and why):

* FederatedPCA passes every check of ``check_estimator`` that applies; the only one skipped
  is ``check_array_api_input``, which scikit-learn itself skips unless the environment sets
  ``SCIPY_ARRAY_API=1`` (FederatedPCA works on NumPy arrays only). Checks needing pandas or
  polars are skipped by scikit-learn when those are not installed.
* FederatedFrechetMean takes stacks of SPD matrices ``(m, n, n)``, not the 2-d tables every
  fitting check generates, so only the API checks that never fit run on it
  (``FRECHET_API_CHECKS``): cloning, repr, get/set_params, default construction, no
  validation in ``__init__``, tags.
"""

import numpy as np
import pytest
import sklearn
from scipy.linalg import subspace_angles
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import rfl_fast as rf
from rfl_fast.algorithms import RFedAvg
from rfl_fast.data import load_breast_cancer, load_wine, split_dirichlet, wishart_clients
from rfl_fast.app.estimators import FederatedFrechetMean, FederatedPCA
from rfl_fast.federation import History
from rfl_fast.problems import SPDMean

EPS = np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    return X, split_dirichlet(X, y, 5, alpha=0.5, rng=0)


@pytest.fixture(scope="module")
def fitted(cancer):
    X, cd = cancer
    # the reference by LAPACK's full SVD: scikit-learn < 1.5 chose a randomized solver here
    return FederatedPCA(3, random_state=0).fit(cd.to_list()), PCA(3, svd_solver="full").fit(X)


# ----------------------------------------------------------------------------- PCA

def _pca_bounds(fed, X):
    """What the fit guarantees, from its last gradient norm g (the run stops at
    g <= tol tr(C), or after ``rounds``): for the kPCA objective -tr(B'CB) on St(d, r), C the
    pooled covariance (ddof 0), g = 2 |R|_F with the residual R = (I - BB')CB of the basis B.
    With the eigenvalues l_1 >= ... of C:

    * subspace angles <= |R| / (l_r - l_{r+1})        (Davis-Kahan sin-theta);
    * each Ritz value within |R|^2 / d_i of l_i, d_i its gap to the rest of the spectrum
      (the quadratic residual bound), and each Ritz vector within angle |R| / d_i;
    * plus rounding: both sides decompose a matrix of norm l_1 backward stably, d eps l_1
      on every eigenvalue and d eps l_1 / d_i on every vector (for the subspace: / gap).

    Returns (subspace angle, per-component angle (r,), relative variance error (r,)).
    """
    Z = X - X.mean(axis=0)
    lam = np.linalg.eigvalsh(Z.T @ Z / len(Z))[::-1]
    r, d = fed.n_components_, X.shape[1]
    res = fed.history_["grad_norm"][-1] / 2
    rnd = d * np.finfo(np.float64).eps * lam[0]
    gap = lam[r - 1] - lam[r]
    d_i = np.array([min(abs(lam[i] - lam[j]) for j in range(d) if j != i) for i in range(r)])
    return ((res + rnd) / gap, (res + rnd) / d_i, (res ** 2 / d_i + rnd) / lam[:r])


def test_federated_pca_matches_sklearn_pca(cancer, fitted):
    """Tolerances from the fit's own stopping point (_pca_bounds), never a fixed 1e-7 / 1e-10:
    a run that stops a little earlier on another machine gets the bound that point gives."""
    X, _ = cancer
    fed, ref = fitted
    theta, angles, rel_var = _pca_bounds(fed, X)
    assert subspace_angles(fed.components_.T, ref.components_.T).max() <= theta
    # same order and sign convention, so the components themselves agree: a unit vector at
    # angle a from another differs from it by at most 2 sin(a / 2) <= a in every entry
    assert np.all(np.abs(fed.components_ - ref.components_).max(axis=1) <= angles)
    np.testing.assert_array_less(np.abs(fed.explained_variance_ / ref.explained_variance_ - 1),
                                 rel_var)
    # ratio: both sides divide by the total variance (a sum of d terms, rounded to d eps)
    np.testing.assert_array_less(
        np.abs(fed.explained_variance_ratio_ / ref.explained_variance_ratio_ - 1),
        rel_var + 2 * X.shape[1] * np.finfo(np.float64).eps)
    # singular values: sqrt(l m), half the relative error of l
    np.testing.assert_array_less(np.abs(fed.singular_values_ / ref.singular_values_ - 1),
                                 rel_var)
    # the means: one pass of m additions each (m eps |x|_max)
    np.testing.assert_allclose(fed.mean_, ref.mean_, rtol=0,
                               atol=len(X) * np.finfo(np.float64).eps * np.abs(X).max())
    np.testing.assert_allclose(fed.transform(X), ref.transform(X), atol=1e-6)
    np.testing.assert_allclose(fed.inverse_transform(fed.transform(X)),
                               ref.inverse_transform(ref.transform(X)), atol=1e-6)
    assert fed.components_.shape == (3, 30) and fed.n_features_in_ == 30
    assert fed.n_clients_ == 5 and fed.n_samples_ == 569
    assert list(fed.get_feature_names_out()) == ["federatedpca0", "federatedpca1",
                                                 "federatedpca2"]


def test_history_and_tolerance(fitted):
    fed, _ = fitted
    h = fed.history_
    assert isinstance(h, History) and len(h) == fed.n_iter_ + 1
    assert fed.n_iter_ < fed.rounds                     # stopped at tol
    assert h["angle"][-1] < 1e-7 and h["bytes_up"].sum() > 0
    assert type(fed.algorithm_).__name__ == "RFedSVRG"


def test_client_ids_and_list_give_the_same_fit(cancer, fitted):
    _, cd = cancer
    ids = np.repeat(np.array(["a", "b", "c", "d", "e"]), cd.sizes)
    again = FederatedPCA(3, random_state=0).fit(cd.data, clients=ids)
    np.testing.assert_array_equal(again.components_, fitted[0].components_)


def test_plain_x_options_and_other_algorithms():
    X, _ = load_wine()
    ref = PCA(2).fit(X)
    one = FederatedPCA(2, random_state=1).fit(X)                  # one client
    assert one.n_clients_ == 1
    split = FederatedPCA(2, n_clients=4, participation=2, random_state=1).fit(X)
    assert split.n_clients_ == 4 and set(split.history_["n_participants"][1:]) == {2}
    for est in (one, split):
        assert subspace_angles(est.components_.T, ref.components_.T).max() < 1e-6
    inst = FederatedPCA(2, algorithm=RFedAvg(step=0.02, local_steps=3), rounds=5,
                        tol=0).fit(X)
    assert inst.n_iter_ == 5 and isinstance(inst.algorithm_, RFedAvg)
    prox = FederatedPCA(2, algorithm="RFedProx", rounds=5, algorithm_params={"mu": 0.5},
                        random_state=0).fit(X)
    assert prox.algorithm_.mu == 0.5
    assert clone(prox).get_params()["algorithm_params"] == {"mu": 0.5}


@pytest.mark.parametrize("kwargs, fit_kw, match", [
    ({"n_components": 14}, {}, "n_features=13"),
    ({"algorithm": "FedAvg"}, {}, "RFedSVRG"),
    ({"step": "fast"}, {}, "auto"),
    ({"participation": "half"}, {}, "participation"),
    ({"n_clients": 500}, {}, "n_samples=178"),
    ({}, {"clients": np.zeros(5)}, "clients"),
])
def test_pca_bad_input_is_a_clear_error(kwargs, fit_kw, match):
    X, _ = load_wine()
    with pytest.raises(ValueError, match=match):
        FederatedPCA(**{"rounds": 2, **kwargs}).fit(X, **fit_kw)


def test_pca_unfitted_and_wrong_width():
    X, _ = load_wine()
    with pytest.raises(NotFittedError):
        FederatedPCA().transform(X)
    est = FederatedPCA(2, rounds=3).fit(X)
    with pytest.raises(ValueError, match="13 features"):
        est.transform(X[:, :5])
    with pytest.raises(ValueError, match="2 components"):
        est.inverse_transform(np.ones((3, 4)))


@parametrize_with_checks([FederatedPCA(rounds=40)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ----------------------------------------------------------------------------- SPD mean

@pytest.fixture(scope="module")
def wishart():
    return wishart_clients(4, 15, 3, rng=0)            # (4, 15, 3, 3)


def _frechet_radius(g, x, samples):
    """Distance to the Frechet mean guaranteed at ``x`` by its computed gradient norm g: f =
    mean of dist^2 is 2-strongly geodesically convex on SPD (nonpositive curvature: Hess
    dist^2/2 >= I), so dist(x, x*) <= |grad f(x)| / 2. The computed g is off by rounding: grad
    = -2 mean_i Log_x(X_i), whose norm is that of -2 mean_i logm(M_i), M_i = L^-1 X_i L^-T
    (x = L L'); a backward-stable eigensolver finds M_i's eigenvalues to n eps lambda_max, so
    each log eigenvalue to n eps cond(M_i), and |grad| is computed to 2 n eps mean_i cond(M_i)."""
    samples = np.asarray(samples).reshape((-1,) + np.shape(x))
    n = np.shape(x)[-1]
    Li = np.linalg.inv(np.linalg.cholesky(x))
    lam = np.linalg.eigvalsh(Li @ samples @ Li.T)
    rounding = 2 * n * EPS * float(np.mean(lam[:, -1] / lam[:, 0]))
    return (g + rounding) / 2


def test_frechet_mean_matches_the_centralized_mean(wishart):
    est = FederatedFrechetMean(random_state=0).fit(list(wishart))
    problem = SPDMean(wishart)
    exact = problem.solution()
    g = est.history_["grad_norm"][-1]
    # both are within their stopping points' radius of the mean (plus 10 n eps for dist
    # itself: logm of a matrix within ~1e-10 of I)
    assert float(rf.SPD(3).dist(exact, est.mean_)) <= (
        _frechet_radius(g, est.mean_, wishart)
        + _frechet_radius(problem.solver_info["grad_norm"], exact, wishart) + 30 * EPS)
    assert est.n_clients_ == 4 and est.n_samples_ == 60 and est.n_iter_ < est.rounds
    assert g <= 1e-10                                   # the stopping rule, tol = 1e-10
    flat = wishart.reshape(-1, 3, 3)
    again = FederatedFrechetMean(random_state=0).fit(flat, clients=np.repeat(np.arange(4), 15))
    assert float(rf.SPD(3).dist(again.mean_, est.mean_)) <= (
        _frechet_radius(g, est.mean_, wishart)
        + _frechet_radius(again.history_["grad_norm"][-1], again.mean_, wishart) + 30 * EPS)


def test_frechet_mean_of_commuting_matrices_is_the_geometric_mean():
    rng = np.random.default_rng(0)
    d = np.exp(rng.normal(size=(3, 10, 4)))           # diagonal SPD matrices, 3 clients
    mats = np.einsum("cmi,ij->cmij", d, np.eye(4))
    est = FederatedFrechetMean(random_state=0).fit(list(mats))
    want = np.diag(np.exp(np.log(d).mean(axis=(0, 1))))   # rounded to ~4 eps relative
    assert float(rf.SPD(4).dist(est.mean_, want)) <= (
        _frechet_radius(est.history_["grad_norm"][-1], est.mean_, mats) + 40 * EPS)


def test_tangent_coordinates(wishart):
    est = FederatedFrechetMean(random_state=0).fit(list(wishart))
    T = est.transform(wishart[1])
    assert T.shape == (15, 6)
    np.testing.assert_allclose(np.linalg.norm(T, axis=1),
                               rf.SPD(3).dist(est.mean_, wishart[1]), rtol=1e-9)
    np.testing.assert_allclose(est.inverse_transform(T), wishart[1], rtol=1e-9, atol=1e-12)
    # at the mean the coordinates average to zero (first-order optimality): their mean is
    # -grad f / 2 in isometric coordinates, and the fit stopped at |grad f| <= tol, so its norm
    # is at most tol / 2, up to the rounding of the Logs (each within 4 n eps cond(mean) |Log|)
    assert est.n_iter_ < est.rounds                      # stopped by the rule, not the count
    coords = est.transform(wishart.reshape(-1, 3, 3))
    rounding = 4 * 3 * EPS * np.linalg.cond(est.mean_) * np.abs(coords).max()
    assert np.linalg.norm(coords.mean(axis=0)) <= est.tol / 2 + rounding


def test_frechet_bad_input(wishart):
    with pytest.raises(NotFittedError):
        FederatedFrechetMean().transform(wishart[0])
    bad = wishart[0].copy()
    bad[0] = -np.eye(3)
    with pytest.raises(ValueError, match="positive definite"):
        FederatedFrechetMean(rounds=2).fit([bad])
    with pytest.raises(ValueError, match="shape"):
        FederatedFrechetMean(rounds=2).fit(np.ones((4, 3)))
    fitted = FederatedFrechetMean(rounds=2).fit(list(wishart))
    with pytest.raises(ValueError, match="X: matrices must be symmetric positive definite"):
        fitted.transform(np.stack([np.eye(3), np.diag([1.0, 1.0, -1.0])]))


FRECHET_API_CHECKS = ["check_estimator_cloneable", "check_estimator_repr",
                      "check_no_attributes_set_in_init", "check_get_params_invariance",
                      "check_set_params", "check_parameters_default_constructible",
                      "check_do_not_raise_errors_in_init_or_set_params",
                      "check_valid_tag_types", "check_estimator_tags_renamed"]


@pytest.mark.parametrize("name", FRECHET_API_CHECKS)
def test_frechet_mean_api_checks(name):
    if not hasattr(estimator_checks, name):  # added in scikit-learn 1.6 (the floor is 1.3)
        pytest.skip(f"scikit-learn {sklearn.__version__} has no {name}")
    getattr(estimator_checks, name)("FederatedFrechetMean", FederatedFrechetMean())


def test_random_state_gives_the_engine_an_int_seed():
    """None: fresh entropy (not numpy's global RandomState); an int >= 0 is the seed itself; a
    RandomState (through sklearn's check_random_state) or a Generator draws one; anything else,
    bool included, is refused naming ``random_state``."""
    from rfl_fast.app.estimators import _seed

    top = np.iinfo(np.int32).max
    assert _seed(None) is None and _seed(7) == 7 and _seed(np.int64(7)) == 7
    assert _seed(np.random.RandomState(3)) == np.random.RandomState(3).randint(top)
    assert _seed(np.random.default_rng(3)) == np.random.default_rng(3).integers(top)
    for bad in (-1, True, 1.5, "3", [3]):
        with pytest.raises(ValueError, match="random_state: expected"):
            _seed(bad)
