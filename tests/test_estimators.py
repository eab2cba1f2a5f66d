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


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer()
    return X, split_dirichlet(X, y, 5, alpha=0.5, rng=0)


@pytest.fixture(scope="module")
def fitted(cancer):
    X, cd = cancer
    return FederatedPCA(3, random_state=0).fit(cd.to_list()), PCA(3).fit(X)


# ----------------------------------------------------------------------------- PCA

def test_federated_pca_matches_sklearn_pca(cancer, fitted):
    X, _ = cancer
    fed, ref = fitted
    assert subspace_angles(fed.components_.T, ref.components_.T).max() < 1e-7
    # same order and sign convention, so the components themselves agree
    np.testing.assert_allclose(fed.components_, ref.components_, atol=1e-7)
    np.testing.assert_allclose(fed.explained_variance_, ref.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(fed.explained_variance_ratio_, ref.explained_variance_ratio_,
                               rtol=1e-10)
    np.testing.assert_allclose(fed.singular_values_, ref.singular_values_, rtol=1e-10)
    np.testing.assert_allclose(fed.mean_, ref.mean_, atol=1e-12)
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


def test_frechet_mean_matches_the_centralized_mean(wishart):
    est = FederatedFrechetMean(random_state=0).fit(list(wishart))
    exact = SPDMean(wishart).solution()
    assert float(rf.SPD(3).dist(exact, est.mean_)) < 1e-8
    assert est.n_clients_ == 4 and est.n_samples_ == 60 and est.n_iter_ < est.rounds
    assert est.history_["grad_norm"][-1] <= 1e-10
    flat = wishart.reshape(-1, 3, 3)
    again = FederatedFrechetMean(random_state=0).fit(flat, clients=np.repeat(np.arange(4), 15))
    np.testing.assert_allclose(again.mean_, est.mean_, atol=1e-12)


def test_frechet_mean_of_commuting_matrices_is_the_geometric_mean():
    rng = np.random.default_rng(0)
    d = np.exp(rng.normal(size=(3, 10, 4)))           # diagonal SPD matrices, 3 clients
    mats = np.einsum("cmi,ij->cmij", d, np.eye(4))
    est = FederatedFrechetMean(random_state=0).fit(list(mats))
    np.testing.assert_allclose(np.diag(est.mean_), np.exp(np.log(d).mean(axis=(0, 1))),
                               rtol=1e-9)


def test_tangent_coordinates(wishart):
    est = FederatedFrechetMean(random_state=0).fit(list(wishart))
    T = est.transform(wishart[1])
    assert T.shape == (15, 6)
    np.testing.assert_allclose(np.linalg.norm(T, axis=1),
                               rf.SPD(3).dist(est.mean_, wishart[1]), rtol=1e-9)
    np.testing.assert_allclose(est.inverse_transform(T), wishart[1], rtol=1e-9, atol=1e-12)
    # at the mean the coordinates average to zero (first-order optimality)
    assert np.abs(est.transform(wishart.reshape(-1, 3, 3)).mean(axis=0)).max() < 1e-9


def test_frechet_bad_input(wishart):
    with pytest.raises(NotFittedError):
        FederatedFrechetMean().transform(wishart[0])
    bad = wishart[0].copy()
    bad[0] = -np.eye(3)
    with pytest.raises(ValueError, match="positive definite"):
        FederatedFrechetMean(rounds=2).fit([bad])
    with pytest.raises(ValueError, match="shape"):
        FederatedFrechetMean(rounds=2).fit(np.ones((4, 3)))


FRECHET_API_CHECKS = ["check_estimator_cloneable", "check_estimator_repr",
                      "check_no_attributes_set_in_init", "check_get_params_invariance",
                      "check_set_params", "check_parameters_default_constructible",
                      "check_do_not_raise_errors_in_init_or_set_params",
                      "check_valid_tag_types", "check_estimator_tags_renamed"]


@pytest.mark.parametrize("name", FRECHET_API_CHECKS)
def test_frechet_mean_api_checks(name):
    getattr(estimator_checks, name)("FederatedFrechetMean", FederatedFrechetMean())
