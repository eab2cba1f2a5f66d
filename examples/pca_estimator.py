"""
FederatedPCA against scikit-learn's PCA
=======================================

FederatedPCA is a scikit-learn transformer. Five clients hold label-skewed parts of the
breast cancer data (d = 30); FederatedPCA finds the top 3 components by a federated run
(RFedSVRG) and matches the centralized PCA.

Run it as ``python examples/pca_estimator.py [--small]``.
"""

import argparse
import os

import numpy as np
from scipy.linalg import subspace_angles
from sklearn.decomposition import PCA

from rfl_fast.data import load_breast_cancer, split_dirichlet
from rfl_fast.app.estimators import FederatedPCA

DESCRIPTION = "FederatedPCA against scikit-learn's PCA"


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--small", action="store_true", help="(runs in about a second anyway)")
    args = parser.parse_args()
    small = args.small or os.environ.get("RFL_FAST_EXAMPLE_SMALL") == "1"

    X, y = load_breast_cancer()                           # (569, 30) standardized
    clients = split_dirichlet(X, y, n_clients=5, alpha=0.5, rng=0)
    parts = clients.to_list()                              # 5 arrays (m_i, 30)

    fed = FederatedPCA(n_components=3, rounds=150 if small else 300, random_state=0).fit(parts)
    ref = PCA(n_components=3).fit(X)

    angle = subspace_angles(fed.components_.T, ref.components_.T).max()
    print(f"rounds run: {fed.n_iter_} (stopped at tol)")
    print(f"explained variance ratio: {np.round(fed.explained_variance_ratio_, 4)}")
    print(f"largest principal angle to sklearn PCA: {angle:.1e}")
    print(f"max |transform - PCA.transform|: {np.abs(fed.transform(X) - ref.transform(X)).max():.1e}")
    print(f"uploaded: {fed.history_.totals()['bytes_up'] / 1e3:.0f} kB in total")


if __name__ == "__main__":
    main()
