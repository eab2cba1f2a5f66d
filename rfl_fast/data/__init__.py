"""Data for rfl_fast: the papers' synthetic generators, bundled and local data sets, partitions.

* :mod:`~rfl_fast.data.synthetic`: seeded generators of the source papers (Gaussian covariances,
  eigengap construction, heterogeneous Gaussians, Wishart SPD, Brockett matrices, a random
  tree embedded in the hyperbolic plane).
* :mod:`~rfl_fast.data.real`: iris, wine, breast cancer, digits (shipped with scikit-learn).
* :mod:`~rfl_fast.data.loaders`: MNIST (IDX) and CIFAR-10 (pickle batches) from local files,
  and :func:`~rfl_fast.data.map_npy` (an ``.npy`` file of samples memory-mapped, used in
  place); nothing is ever downloaded.
* :mod:`~rfl_fast.data.partition`: :class:`ClientData` (one contiguous array + offsets) and
  the partitioners (equal, Dirichlet label skew, quantity skew).
"""

from .loaders import (
    CIFAR10_URL,
    ENV_VAR,
    MNIST_URLS,
    cifar10_files,
    load_cifar10,
    load_mnist,
    map_npy,
    mnist_files,
    read_cifar10_batch,
    read_cifar10_bin,
    read_idx,
)
from .partition import ClientData, split_dirichlet, split_equal, split_quantity, split_sizes
from .real import (
    NORMALIZATIONS,
    load_breast_cancer,
    load_digits,
    load_iris,
    load_sklearn,
    load_wine,
    normalize_features,
)
from .synthetic import (
    HyperbolicTree,
    brockett_matrices,
    eigengap_clients,
    eigengap_spectrum,
    gaussian_covariances,
    gaussian_gram_spd,
    heterogeneous_gaussian_clients,
    hyperbolic_tree,
    random_orthonormal,
    random_tree,
    wishart_clients,
    wishart_spd,
)

__all__ = [
    # synthetic
    "gaussian_covariances",
    "gaussian_gram_spd",
    "eigengap_spectrum",
    "eigengap_clients",
    "heterogeneous_gaussian_clients",
    "wishart_spd",
    "wishart_clients",
    "brockett_matrices",
    "random_orthonormal",
    "random_tree",
    "HyperbolicTree",
    "hyperbolic_tree",
    # real (scikit-learn bundled)
    "NORMALIZATIONS",
    "normalize_features",
    "load_sklearn",
    "load_iris",
    "load_wine",
    "load_breast_cancer",
    "load_digits",
    # local files
    "ENV_VAR",
    "MNIST_URLS",
    "CIFAR10_URL",
    "mnist_files",
    "cifar10_files",
    "read_idx",
    "read_cifar10_batch",
    "read_cifar10_bin",
    "load_mnist",
    "load_cifar10",
    "map_npy",
    # partitions
    "ClientData",
    "split_sizes",
    "split_equal",
    "split_dirichlet",
    "split_quantity",
]
