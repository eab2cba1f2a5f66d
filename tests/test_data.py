"""rfl_fast.data: seeded generators, bundled/local data sets, partitions. No network."""

import gzip
import os
import pickle
import struct

import numpy as np
import pytest

from rfl_fast import data as D
from rfl_fast.data import synthetic as S

# --------------------------------------------------------------------------- helpers


def lorentz_inner(x, y):
    return -x[..., 0] * y[..., 0] + np.sum(x[..., 1:] * y[..., 1:], axis=-1)


def spd_dist_to_identity(w):
    ev = np.linalg.eigvalsh(w)
    return np.sqrt(np.sum(np.log(ev) ** 2, axis=-1))


GENERATORS = {
    "gaussian_covariances": lambda rng: S.gaussian_covariances(3, 6, 4, rng=rng),
    "gaussian_gram_spd": lambda rng: S.gaussian_gram_spd(3, 5, rng=rng),
    "eigengap_clients": lambda rng: S.eigengap_clients(3, 12, 8, 0.05, rng=rng),
    "heterogeneous": lambda rng: S.heterogeneous_gaussian_clients(3, 5, 4, rng=rng),
    "wishart_spd": lambda rng: S.wishart_spd(5, 3, rng=rng),
    "wishart_diameter": lambda rng: S.wishart_clients(2, 3, 2, diameter=2.0, rng=rng),
    "brockett": lambda rng: S.brockett_matrices(2, 3, 4, rng=rng),
    "orthonormal": lambda rng: S.random_orthonormal(5, 3, 2, rng=rng),
    "tree": lambda rng: S.hyperbolic_tree(40, rng=rng).points,
    "tree_features": lambda rng: S.hyperbolic_tree(40, rng=rng).features,
}


# --------------------------------------------------------------------------- reproducibility


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_seeded(name):
    gen = GENERATORS[name]
    a, b = gen(7), gen(7)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, gen(np.random.default_rng(7)))
    assert not np.array_equal(a, gen(8))
    assert a.dtype == np.float64 and a.flags.c_contiguous


@pytest.mark.parametrize("bad", [1.5, "0", True, -1, np.random.RandomState(0)])
def test_rng_rejects_bad_seed(bad):
    with pytest.raises((TypeError, ValueError), match="rng"):
        S.brockett_matrices(2, 2, 2, rng=bad)


def test_partitions_seeded():
    X = np.arange(200.0).reshape(100, 2)
    y = np.arange(100) % 5
    for split in (
        lambda r: D.split_equal(X, 7, rng=r),
        lambda r: D.split_dirichlet(X, y, 7, 0.3, rng=r),
        lambda r: D.split_quantity(X, 7, 0.5, rng=r),
    ):
        a, b = split(3), split(3)
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.offsets, b.offsets)


# --------------------------------------------------------------------------- Gaussian covariances


def test_gaussian_covariances_psd_and_samples():
    A, Xs = S.gaussian_covariances(4, 10, 6, return_samples=True, rng=0)
    assert A.shape == (4, 10, 10) and Xs.shape == (4, 6, 10)
    np.testing.assert_array_equal(A, np.swapaxes(A, 1, 2))
    ev = np.linalg.eigvalsh(A)
    assert ev.min() > -1e-10 * ev.max()
    assert np.sum(ev > 1e-8 * ev.max(), axis=1).tolist() == [6] * 4  # rank p < d
    np.testing.assert_allclose(A[2], Xs[2].T @ Xs[2], rtol=1e-13, atol=1e-12)
    Am = S.gaussian_covariances(4, 10, 6, normalize="mean", rng=0)
    np.testing.assert_allclose(Am, A / 6, rtol=1e-14)


def test_gaussian_gram_spd():
    A, C = S.gaussian_gram_spd(3, 20, return_samples=True, rng=1)
    assert C.shape == (3, 20, 20)
    np.testing.assert_array_equal(A, np.swapaxes(A, 1, 2))
    assert np.linalg.eigvalsh(A).min() > 0
    with pytest.raises(ValueError, match="p: expected p >= d"):
        S.gaussian_gram_spd(2, 5, 4)


# --------------------------------------------------------------------------- eigengap construction


def test_eigengap_spectrum_values():
    nu = 0.01
    sig = S.eigengap_spectrum(8, nu, np.array([1.0, -2.0, 0.5]))
    np.testing.assert_allclose(
        sig, [1, 1 - 1.1 * nu, 1 - 1.2 * nu, 1 - 1.3 * nu, 1 - 1.4 * nu, 1 / 8, 2 / 8, 0.5 / 8]
    )


def test_eigengap_clients_intended_spectrum():
    nu, dim = 1e-3, 26
    Z, V, sig = S.eigengap_clients(4, 40, dim, nu, return_basis=True, rng=2)
    assert Z.shape == (4, 40, dim) and V.shape == (dim, dim) and sig.shape == (4, dim)
    np.testing.assert_allclose(V @ V.T, np.eye(dim), atol=1e-13)
    lead = 1 - np.array([0, 1.1, 1.2, 1.3, 1.4]) * nu
    np.testing.assert_array_equal(sig[:, :5], np.broadcast_to(lead, (4, 5)))
    for i in range(4):
        # Z_i' Z_i = V' Sigma_i^2 V exactly (U_i has orthonormal columns since S >= dim)
        np.testing.assert_allclose(Z[i].T @ Z[i], (V.T * sig[i] ** 2) @ V, atol=1e-13)
    # the global second-moment matrix has top eigenvector V[0] and gap (1 - (1-1.1nu)^2)
    M = np.einsum("nsi,nsj->ij", Z, Z) / (4 * 40)
    ev, vec = np.linalg.eigh(M)
    assert abs(abs(vec[:, -1] @ V[0]) - 1) < 1e-9
    np.testing.assert_allclose(ev[-1] - ev[-2], (1 - (1 - 1.1 * nu) ** 2) / 40, rtol=1e-6)


def test_eigengap_few_samples_and_per_client_basis():
    # 003: S = 10 < d + 1 = 26 -> U_i has orthonormal rows
    Z, V, sig = S.eigengap_clients(3, 10, 26, 1e-3, return_basis=True, rng=3)
    U = Z[1] @ V.T / sig[1]
    np.testing.assert_allclose(U @ U.T, np.eye(10), atol=1e-12)
    Z2, V2, _ = S.eigengap_clients(3, 30, 12, 0.1, shared_basis=False, return_basis=True, rng=3)
    assert V2.shape == (3, 12, 12)
    assert not np.allclose(V2[0], V2[1])


@pytest.mark.parametrize("nu", [0.0, -0.1, 1 / 1.4, 2.0, float("nan")])
def test_eigengap_nu_out_of_range(nu):
    with pytest.raises(ValueError, match="nu"):
        S.eigengap_clients(2, 10, 8, nu)


def test_eigengap_bad_types():
    with pytest.raises(TypeError, match="n_samples"):
        S.eigengap_clients(2, 10.0, 8)
    with pytest.raises(TypeError, match="nu"):
        S.eigengap_clients(2, 10, 8, "small")
    with pytest.raises(ValueError, match="dim"):
        S.eigengap_clients(2, 10, 1)


# --------------------------------------------------------------------------- other generators


def test_heterogeneous_variances():
    Z = S.heterogeneous_gaussian_clients(4, 2000, 50, rng=4)
    var = Z.var(axis=(1, 2))
    np.testing.assert_allclose(var, np.arange(1, 5) / 4, rtol=0.03)


def test_wishart_spd_and_mean():
    W = S.wishart_spd(4000, 3, rng=5)
    np.testing.assert_array_equal(W, np.swapaxes(W, 1, 2))
    assert np.linalg.eigvalsh(W).min() > 0
    np.testing.assert_allclose(W.mean(axis=0), np.eye(3), atol=0.06)  # E W(I/d, d) = I
    Ws = S.wishart_spd(3, 2, df=5, scale=np.diag([1.0, 2.0]), rng=5)
    assert np.linalg.eigvalsh(Ws).min() > 0


def test_wishart_clients_diameter():
    Z = S.wishart_clients(6, 10, 2, diameter=1.0, rng=6)
    assert Z.shape == (6, 10, 2, 2)
    assert np.linalg.eigvalsh(Z).min() > 0
    assert spd_dist_to_identity(Z).max() <= 0.5 + 1e-12
    with pytest.raises(ValueError, match="diameter"):
        S.wishart_spd(5, 6, diameter=0.1, max_draws=500, rng=0)


def test_wishart_bad_input():
    with pytest.raises(ValueError, match="df"):
        S.wishart_spd(2, 3, df=2)
    with pytest.raises(ValueError, match="scale"):
        S.wishart_spd(2, 3, scale=np.eye(2))
    with pytest.raises(ValueError, match="scale"):
        S.wishart_spd(2, 2, scale=np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="diameter"):
        S.wishart_spd(2, 2, diameter=0.0)


def test_brockett_symmetric():
    A = S.brockett_matrices(3, 4, 6, rng=7)
    assert A.shape == (3, 4, 6, 6)
    np.testing.assert_array_equal(A, np.swapaxes(A, -1, -2))
    assert np.linalg.eigvalsh(A).min() < 0  # symmetric, not SPD


def test_random_orthonormal():
    Q = S.random_orthonormal(7, 3, 5, rng=8)
    eye = np.broadcast_to(np.eye(3), (5, 3, 3))
    np.testing.assert_allclose(np.swapaxes(Q, 1, 2) @ Q, eye, atol=1e-13)
    W = S.random_orthonormal(3, 7, rng=8)
    np.testing.assert_allclose(W @ W.T, np.eye(3), atol=1e-13)


# --------------------------------------------------------------------------- hyperbolic tree


def test_hyperbolic_tree_on_hyperboloid():
    T = S.hyperbolic_tree(300, rng=9)
    x = T.points
    assert x.shape == (300, 3) and T.features.shape == (300, 3)
    assert (x[:, 0] >= 1).all()
    assert np.abs(lorentz_inner(x, x) + 1).max() < 1e-10
    # larger edge lengths push coordinates out; the constraint holds to rounding relative to x0^2
    T2 = S.hyperbolic_tree(300, edge_length=2.0, rng=9)
    y = T2.points
    assert np.max(np.abs(lorentz_inner(y, y) + 1) / y[:, 0] ** 2) < 1e-14


def test_hyperbolic_tree_geometry():
    T = S.hyperbolic_tree(120, max_children=3, edge_length=1.5, rng=10)
    assert T.parents[0] == -1 and (T.parents[1:] < np.arange(1, 120)).all()
    assert T.edges.shape == (119, 2)
    np.testing.assert_array_equal(T.depths[1:], T.depths[T.parents[1:]] + 1)
    x = T.points
    ip = -np.outer(x[:, 0], x[:, 0]) + x[:, 1:] @ x[:, 1:].T
    dist = np.arccosh(np.maximum(-ip, 1.0))
    # every edge has length edge_length; no pair is farther than its tree path
    np.testing.assert_allclose(dist[T.edges[:, 0], T.edges[:, 1]], 1.5, atol=1e-9)
    G = T.graph_distances()
    off = ~np.eye(120, dtype=bool)  # acosh near 1 amplifies rounding on the diagonal
    assert (dist[off] <= 1.5 * G[off] + 1e-8).all()
    # siblings are separated (Sarkar places children at distinct angles)
    kids = np.flatnonzero(T.parents == 0)
    sib = dist[np.ix_(kids, kids)][~np.eye(len(kids), dtype=bool)]
    assert sib.min() > 0.5


def test_hyperbolic_tree_features():
    T = S.hyperbolic_tree(60, n_features=4, closure=False, rng=11)
    deg = np.bincount(T.edges.ravel(), minlength=60).astype(float)
    # Laplacian eigenmap: D-orthogonal to the constant vector, D-orthonormal
    np.testing.assert_allclose(deg @ T.features, 0, atol=1e-10)
    np.testing.assert_allclose(T.features.T @ (deg[:, None] * T.features), np.eye(4), atol=1e-10)
    with pytest.raises(ValueError, match="n_features"):
        S.hyperbolic_tree(5, n_features=5)
    with pytest.raises(ValueError, match="edge_length"):
        S.hyperbolic_tree(5, edge_length=-1.0)


# --------------------------------------------------------------------------- real data


@pytest.mark.parametrize(
    "loader, shape, n_classes",
    [
        (D.load_iris, (150, 4), 3),
        (D.load_wine, (178, 13), 3),
        (D.load_breast_cancer, (569, 30), 2),
        (D.load_digits, (1797, 64), 10),
    ],
)
def test_real_datasets_standardized(loader, shape, n_classes):
    X, y = loader()
    assert X.shape == shape and X.dtype == np.float64 and y.dtype == np.int64
    assert len(np.unique(y)) == n_classes
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    std = X.std(axis=0)
    np.testing.assert_allclose(std[std > 0], 1, rtol=1e-12)
    raw, _ = loader(normalize="none")
    assert raw.min() >= 0  # the raw data are nonnegative measurements / pixel counts
    Xc, _ = loader(normalize="center", dtype=np.float32)
    assert Xc.dtype == np.float32


def test_real_bad_input():
    with pytest.raises(ValueError, match="normalize"):
        D.load_iris(normalize="zscore")
    with pytest.raises(ValueError, match="name"):
        D.load_sklearn("mnist")
    with pytest.raises(TypeError, match="dtype"):
        D.load_wine(dtype=np.int32)
    with pytest.raises(ValueError, match="X"):
        D.normalize_features(np.array([[1.0, np.nan]]))


# --------------------------------------------------------------------------- MNIST (IDX)


def idx_bytes(arr, type_code=0x08):
    arr = np.asarray(arr)
    head = bytes([0, 0, type_code, arr.ndim]) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_mnist(folder, m_train=5, m_test=3, gz=False, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, m in (("train", m_train), ("t10k", m_test)):
        img = rng.integers(0, 256, (m, 28, 28), dtype=np.uint8)
        lab = rng.integers(0, 10, m, dtype=np.uint8)
        for name, arr in ((f"{split}-images-idx3-ubyte", img), (f"{split}-labels-idx1-ubyte", lab)):
            raw = idx_bytes(arr)
            if gz:
                (folder / (name + ".gz")).write_bytes(gzip.compress(raw))
            else:
                (folder / name).write_bytes(raw)
        out[split] = (img, lab)
    return out


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist(tmp_path, gz):
    ref = write_mnist(tmp_path, gz=gz)
    X, y = D.load_mnist(tmp_path)
    assert X.shape == (5, 784) and X.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(X, ref["train"][0].reshape(5, -1) / 255.0)
    np.testing.assert_array_equal(y, ref["train"][1])
    Xa, ya = D.load_mnist(tmp_path, split="all", normalize="none", dtype=np.uint8, flatten=False)
    assert Xa.shape == (8, 28, 28) and Xa.dtype == np.uint8
    np.testing.assert_array_equal(Xa[5:], ref["t10k"][0])
    np.testing.assert_array_equal(ya[5:], ref["t10k"][1])


def test_load_mnist_from_env(tmp_path, monkeypatch):
    ref = write_mnist(tmp_path / "mnist", gz=True)
    monkeypatch.setenv("RFL_FAST_DATA", str(tmp_path))
    X, y = D.load_mnist(split="test", dtype=np.float32)
    assert X.dtype == np.float32 and X.shape == (3, 784)
    np.testing.assert_array_equal(y, ref["t10k"][1])
    # a data root passed as path also finds the mnist/ subfolder
    _, y2 = D.load_mnist(tmp_path, split="test")
    np.testing.assert_array_equal(y2, y)


def test_mnist_missing_files_message(tmp_path, monkeypatch):
    write_mnist(tmp_path)
    os.remove(tmp_path / "train-labels-idx1-ubyte")
    with pytest.raises(FileNotFoundError) as info:
        D.load_mnist(tmp_path)
    msg = str(info.value)
    assert "train-labels-idx1-ubyte" in msg and "train-images" not in msg.split("(")[0]
    assert "yann.lecun.com/exdb/mnist" in msg and "RFL_FAST_DATA" in msg
    assert str(tmp_path / "mnist") in msg and "never downloads" in msg
    monkeypatch.delenv("RFL_FAST_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="RFL_FAST_DATA is not set"):
        D.load_mnist()


def test_idx_corrupt_magic(tmp_path):
    write_mnist(tmp_path)
    p = tmp_path / "train-images-idx3-ubyte"
    raw = bytearray(p.read_bytes())
    raw[2] = 0x42
    p.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="magic"):
        D.load_mnist(tmp_path)
    p.write_bytes(b"\x08\x03\x00\x00" + bytes(raw[4:]))  # byte-swapped magic
    with pytest.raises(ValueError, match="magic"):
        D.read_idx(p)


def test_idx_truncated(tmp_path):
    write_mnist(tmp_path)
    p = tmp_path / "train-images-idx3-ubyte"
    raw = p.read_bytes()
    p.write_bytes(raw[:-100])
    with pytest.raises(ValueError, match="truncated"):
        D.load_mnist(tmp_path)
    p.write_bytes(raw[:10])
    with pytest.raises(ValueError, match="truncated IDX header"):
        D.read_idx(p)
    p.write_bytes(raw + b"\x00")
    with pytest.raises(ValueError, match="trailing"):
        D.read_idx(p)
    q = tmp_path / "t.gz"
    q.write_bytes(gzip.compress(raw)[:-20])
    with pytest.raises(ValueError, match="gzip"):
        D.read_idx(q)


def test_idx_other_types_and_mismatch(tmp_path):
    a = np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5
    p = tmp_path / "a.idx"
    p.write_bytes(idx_bytes(a, 0x0E))
    np.testing.assert_array_equal(D.read_idx(p), a)
    write_mnist(tmp_path)
    lab = tmp_path / "train-labels-idx1-ubyte"
    lab.write_bytes(idx_bytes(np.zeros(4, dtype=np.uint8)))
    with pytest.raises(ValueError, match="4 labels for 5 images"):
        D.load_mnist(tmp_path)


# --------------------------------------------------------------------------- CIFAR-10 (pickle)


def write_cifar(folder, m=4, seed=0, files=None):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in files or [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (m, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, m).tolist()
        batch = {b"batch_label": name.encode(), b"labels": labels, b"data": data,
                 b"filenames": [b"x.png"] * m}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
        out[name] = (data, labels)
    return out


def test_load_cifar10(tmp_path, monkeypatch):
    ref = write_cifar(tmp_path / "cifar-10-batches-py")
    X, y = D.load_cifar10(tmp_path)
    assert X.shape == (20, 3072) and y.shape == (20,)
    np.testing.assert_array_equal(X[4:8], ref["data_batch_2"][0] / 255.0)
    np.testing.assert_array_equal(y[4:8], ref["data_batch_2"][1])
    monkeypatch.setenv("RFL_FAST_DATA", str(tmp_path))
    Xt, yt = D.load_cifar10(split="test", flatten=False, normalize="none", dtype=np.uint8)
    assert Xt.shape == (4, 3, 32, 32)
    np.testing.assert_array_equal(Xt.reshape(4, -1), ref["test_batch"][0])
    Xs, _ = D.load_cifar10(split="all", normalize="standardize")
    assert Xs.shape == (24, 3072)
    np.testing.assert_allclose(Xs.mean(axis=0), 0, atol=1e-12)


def test_cifar_missing_message(tmp_path):
    write_cifar(tmp_path, files=["data_batch_1", "data_batch_2"])
    with pytest.raises(FileNotFoundError) as info:
        D.load_cifar10(tmp_path)
    msg = str(info.value)
    for name in ("data_batch_3", "data_batch_4", "data_batch_5"):
        assert name in msg
    assert "www.cs.toronto.edu/~kriz/cifar.html" in msg and "cifar-10-python.tar.gz" in msg
    assert "cifar-10-batches-py" in msg and "RFL_FAST_DATA" in msg


def test_cifar_python2_style_pickle(tmp_path):
    # the real batches were pickled by numpy 1.x: globals live in numpy.core.multiarray
    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    raw = pickle.dumps({b"data": data, b"labels": [3, 7]}, protocol=2)
    raw = raw.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"numpy.core.multiarray" in raw
    (tmp_path / "test_batch").write_bytes(raw)
    X, y = D.read_cifar10_batch(tmp_path / "test_batch")
    np.testing.assert_array_equal(X, data)
    np.testing.assert_array_equal(y, [3, 7])


class _Evil:
    def __reduce__(self):
        return (os.getcwd, ())


def test_cifar_corrupt_batches(tmp_path):
    write_cifar(tmp_path)
    p = tmp_path / "data_batch_1"
    raw = p.read_bytes()
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        D.load_cifar10(tmp_path)
    with open(p, "wb") as f:
        pickle.dump({b"data": _Evil(), b"labels": [0]}, f, protocol=2)
    with pytest.raises(ValueError, match="refusing"):
        D.read_cifar10_batch(p)
    with open(p, "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f, protocol=2)
    with pytest.raises(ValueError, match=r"\(m, 3072\)"):
        D.read_cifar10_batch(p)
    with open(p, "wb") as f:
        pickle.dump({"data": np.zeros((2, 3072), np.uint8), "labels": [0]}, f)
    with pytest.raises(ValueError, match="labels"):
        D.read_cifar10_batch(p)


def test_loader_bad_args(tmp_path):
    write_mnist(tmp_path)
    with pytest.raises(ValueError, match="split"):
        D.load_mnist(tmp_path, split="val")
    with pytest.raises(ValueError, match="uint8"):
        D.load_mnist(tmp_path, dtype=np.uint8)
    with pytest.raises(TypeError, match="path"):
        D.load_mnist(3)


# --------------------------------------------------------------------------- partitions


def covers_once(cd, m):
    np.testing.assert_array_equal(np.sort(cd.indices), np.arange(m))


def test_split_equal_covers_and_aligns():
    X = np.random.default_rng(0).standard_normal((103, 3, 2))
    y = np.arange(103) % 4
    cd = D.split_equal(X, 10, labels=y, rng=1)
    covers_once(cd, 103)
    assert cd.n_clients == len(cd) == 10 and cd.sample_shape == (3, 2)
    assert cd.sizes.sum() == 103 and cd.sizes.max() - cd.sizes.min() <= 1
    np.testing.assert_array_equal(cd.data, X[cd.indices])
    np.testing.assert_array_equal(cd.labels, y[cd.indices])
    assert cd.data.flags.c_contiguous
    for i, block in enumerate(cd):
        assert np.shares_memory(block, cd.data)
        rows = cd.indices[cd.offsets[i]:cd.offsets[i + 1]]
        np.testing.assert_array_equal(block, X[rows])
        np.testing.assert_array_equal(cd.client_labels(i), y[rows])
    np.testing.assert_array_equal(cd[-1], cd.client(9))
    np.testing.assert_allclose(cd.weights("size").sum(), 1.0)


def class_purity(cd):
    """Mean over clients of the fraction of the client's samples in its majority class."""
    return np.mean([np.bincount(cd.client_labels(i)).max() / s for i, s in enumerate(cd.sizes)])


def test_split_dirichlet_skew():
    y = np.repeat(np.arange(10), 100)
    X = np.arange(1000.0)[:, None]
    skewed = D.split_dirichlet(X, y, 10, alpha=0.05, rng=2)
    iid = D.split_dirichlet(X, y, 10, alpha=1000.0, rng=2)
    covers_once(skewed, 1000)
    covers_once(iid, 1000)
    np.testing.assert_array_equal(skewed.data[:, 0], skewed.indices)
    assert class_purity(skewed) > 0.6
    assert class_purity(iid) < 0.25
    # extreme skew with almost as many clients as samples: still >= 1 sample each
    tight = D.split_dirichlet(X[:60], y[:60], 50, alpha=1e-3, rng=3)
    assert tight.sizes.min() >= 1 and tight.sizes.sum() == 60
    covers_once(tight, 60)


def test_split_quantity_skew():
    X = np.zeros((1000, 2))
    skew = D.split_quantity(X, 20, alpha=0.2, rng=4)
    flat = D.split_quantity(X, 20, alpha=1e4, rng=4)
    covers_once(skew, 1000)
    assert skew.sizes.min() >= 1 and skew.sizes.sum() == 1000
    assert skew.sizes.max() > 4 * np.median(skew.sizes)
    assert flat.sizes.max() < 1.5 * flat.sizes.min()


def test_take_aligns_targets():
    T = S.hyperbolic_tree(50, rng=12)
    feats = D.split_quantity(T.features, 5, alpha=2.0, rng=1)
    targets = feats.take(T.points)
    np.testing.assert_array_equal(targets.offsets, feats.offsets)
    rows = feats.indices[feats.offsets[3]:feats.offsets[4]]
    np.testing.assert_array_equal(targets.client(3), T.points[rows])
    with pytest.raises(ValueError, match="values"):
        feats.take(T.points[:10])
    with pytest.raises(ValueError, match="indices"):
        D.ClientData(np.ones((2, 1)), [0, 2]).take(np.ones(2))


def test_split_sizes():
    X = np.arange(10.0)
    cd = D.split_sizes(X, [1, 2, 7], shuffle=False)
    np.testing.assert_array_equal(cd.client(2), np.arange(3.0, 10.0))
    with pytest.raises(ValueError, match="sizes"):
        D.split_sizes(X, [0, 10])
    with pytest.raises(ValueError, match="sizes"):
        D.split_sizes(X, [3, 3])


def test_client_data_from_list():
    parts = [np.ones((2, 3)), 2 * np.ones((1, 3)), 3 * np.ones((4, 3))]
    cd = D.ClientData.from_list(parts, labels=[[0, 1], [2], [0, 0, 1, 1]])
    np.testing.assert_array_equal(cd.offsets, [0, 2, 3, 7])
    np.testing.assert_array_equal(cd.sizes, [2, 1, 4])
    np.testing.assert_array_equal(cd.client(1), parts[1])
    np.testing.assert_array_equal(cd.client_labels(2), [0, 0, 1, 1])
    assert [b.shape[0] for b in cd] == [2, 1, 4]
    stacked = D.ClientData.from_list(S.heterogeneous_gaussian_clients(4, 5, 3, rng=0))
    assert stacked.n_clients == 4 and stacked.data.shape == (20, 3)
    assert "n_clients=3" in repr(cd)
    with pytest.raises(AttributeError):
        cd.offsets = None
    with pytest.raises(ValueError):
        cd.offsets[0] = 1  # read-only


def test_client_data_bad_input():
    with pytest.raises(ValueError, match=r"arrays\[1\]"):
        D.ClientData.from_list([np.ones((2, 3)), np.ones((0, 3))])
    with pytest.raises(ValueError, match=r"arrays\[1\]"):
        D.ClientData.from_list([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="offsets"):
        D.ClientData(np.ones((4, 2)), [0, 2, 2, 4])
    with pytest.raises(ValueError, match="offsets"):
        D.ClientData(np.ones((4, 2)), [0, 3])
    with pytest.raises(TypeError, match="offsets"):
        D.ClientData(np.ones((4, 2)), [0.0, 4.0])
    with pytest.raises(ValueError, match="labels"):
        D.ClientData(np.ones((4, 2)), [0, 4], labels=[1, 2])
    with pytest.raises(TypeError, match="data"):
        D.ClientData(np.array(["a", "b"]), [0, 2])
    cd = D.ClientData(np.ones((4, 2)), [0, 1, 4])
    with pytest.raises(IndexError, match="client index 2"):
        cd.client(2)


def test_partition_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match="n_clients"):
        D.split_equal(X, 6)
    with pytest.raises(ValueError, match="n_clients"):
        D.split_dirichlet(X, np.arange(5), 0)
    with pytest.raises(TypeError, match="n_clients"):
        D.split_equal(X, 2.0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="alpha"):
            D.split_dirichlet(X, np.arange(5), 2, alpha=bad)
        with pytest.raises(ValueError, match="alpha"):
            D.split_quantity(X, 2, alpha=bad)
    with pytest.raises(TypeError, match="labels"):
        D.split_dirichlet(X, np.arange(5.0), 2)
    with pytest.raises(ValueError, match="labels"):
        D.split_dirichlet(X, np.arange(4), 2)
    with pytest.raises(TypeError, match="X"):
        D.split_equal(np.array([None] * 5), 2)


def test_public_surface():
    for name in D.__all__:
        assert hasattr(D, name), name
