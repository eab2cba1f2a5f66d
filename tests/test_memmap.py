"""Memory-mapped client data (issue 37): ``read_npy(path, mmap=True)`` maps an untrusted
``.npy`` file after the bounded reader's own checks, ``rfl_fast.data.map_npy`` hands it to the
problems, and ``pack_clients`` takes the stacked map without a copy, checking it in bounded
chunks (tracemalloc: O(n), not O(data))."""

import io
import mmap
import tracemalloc

import numpy as np
import pytest

from rfl_fast import _files
from rfl_fast._files import npy_from_bytes, read_npy
from rfl_fast.algorithms import RFedAvg
from rfl_fast.data import ClientData, map_npy
from rfl_fast.federation import run
from rfl_fast.problems import KPCA
from rfl_fast.problems._clients import CHECK_CHUNK_BYTES, all_finite, pack_clients


def _npy(arr, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version, allow_pickle=True)
    return b.getvalue()


def _header(descr, shape, fortran=False, pad=0, body=b""):
    """A hand-made version 1.0 ``.npy`` file: ``pad`` spaces shift the data's offset."""
    text = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    text += " " * ((63 - (10 + len(text)) % 64) + pad) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode() + body


def _write(tmp_path, blob, name="f.npy"):
    path = tmp_path / name
    path.write_bytes(blob)
    return path


# ---------------------------------------------------------------------------- the mapped reader

def test_a_mapped_file_is_a_read_only_view_of_its_bytes(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    path = _write(tmp_path, _npy(a))
    m = read_npy(path, mmap=True)
    assert m.shape == a.shape and m.dtype == a.dtype and (m == a).all()
    assert not m.flags.writeable and not m.flags.owndata and m.flags.c_contiguous
    base = m
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base.obj if isinstance(base, memoryview) else base, mmap.mmap)                  # the file's pages, not a copy
    with pytest.raises(ValueError, match="read-only"):
        m[0, 0, 0] = 1.0
    assert (read_npy(path, mmap=False) == a).all()      # the reader is unchanged


@pytest.mark.parametrize("arr", [np.zeros((0, 3)), np.array(2.5), np.arange(5, dtype=np.int32),
                                 np.asfortranarray(np.ones((4, 1))), np.array([True, False])])
def test_what_numpy_writes_maps_as_it_reads(tmp_path, arr):
    path = _write(tmp_path, _npy(arr))
    m = read_npy(path, mmap=True)
    assert m.shape == arr.shape and m.dtype == arr.dtype and (m == arr).all()
    assert not m.flags.writeable


HOSTILE = [
    # (file bytes, keyword arguments, words of the error)
    (_header("'<f8'", "(400000, 1000000)", body=b"\0" * 96), {}, "declares shape (400000, 1000000)"),
    (_header("'<f8'", "(2**62, 2**62)", body=b"\0" * 8), {}, "malformed"),   # no arithmetic
    (_header("'<f8'", "(1000000000000000000000000000000,)", body=b"\0" * 8), {}, "declares shape"),
    (_npy(np.zeros((4, 3)))[:-8], {}, "truncated"),                      # one float short
    (_npy(np.zeros((4, 3))) + b"\0" * 8, {}, "trailing bytes"),
    (_npy(np.array([None, 1], dtype=object)), {}, "object dtype"),
    (_header("[('a', '|O')]", "(2,)", body=b"\0" * 16), {}, "object dtype"),
    (_header("'|V0'", "(1000000000000, 1000000)"), {}, "zero bytes"),    # 0 x anything = 0
    (_header("[]", "(1000000000000,)"), {}, "zero bytes"),
    (_header("'<f8'", "(-1, 2)"), {}, "negative"),
    (_header("'<f8'", "(3, 0, 1000000000)"), {}, "an axis longer"),
    (_npy(np.ones((3, 2), order="F")), {}, "Fortran order"),
    (_header("'<f8'", "(2,)", pad=3, body=b"\0" * 16), {}, "alignment"),  # data at byte 131
    (_npy(np.ones(3, dtype=">f8")), {"dtype": np.float64}, "dtype: expected <f8"),
    (_npy(np.ones(3, dtype=np.float32)), {"dtype": np.float64}, "dtype: expected <f8"),
    (_npy(np.ones(3)).replace(b"\x93NUMPY\x01", b"\x93NUMPY\x03"), {}, "format version 3"),
    (b"\x93NUMPY\x01\x00\xff\xff" + b" " * 100, {}, "expected 65535 bytes got 100"),
    (b"PK\x03\x04" + b"\0" * 60, {}, "magic string is not correct"),
    (b"", {}, "EOF: reading magic string"),
]


@pytest.mark.parametrize("blob, kwargs, words", HOSTILE,
                         ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_files_are_refused_before_anything_is_mapped(tmp_path, monkeypatch, blob,
                                                             kwargs, words):
    """The reader's checks apply unchanged (a huge claimed shape, a truncated file, trailing
    bytes, pickles, zero-byte dtypes that no file size bounds), and mapping adds its own: C
    order, aligned data, the dtype asked for. Nothing is mapped before they pass."""
    path = _write(tmp_path, blob)
    mapped = []
    monkeypatch.setattr(_files._mmap, "mmap", lambda *a, **k: mapped.append(a) or 1 / 0)
    with pytest.raises(ValueError) as info:
        read_npy(path, mmap=True, **kwargs)
    assert words in str(info.value) and len(str(info.value)) < 400 and not mapped


def test_a_file_that_changes_between_its_check_and_its_map_is_refused(tmp_path, monkeypatch):
    path = _write(tmp_path, _npy(np.ones((4, 3))))
    real = mmap.mmap

    def grown(fileno, length, **kwargs):
        with open(path, "ab") as fh:                    # another writer appends meanwhile
            fh.write(b"\0" * 8)
        return real(fileno, length, **kwargs)

    monkeypatch.setattr(_files._mmap, "mmap", grown)
    with pytest.raises(ValueError, match="changed while it was mapped"):
        read_npy(path, mmap=True)


def test_zero_byte_dtypes_are_refused_by_every_reader():
    """count x 0 bytes matched any declared shape: '[]' read as a 10^12-element array and
    '|V0' with 10^30 elements escaped as an OverflowError instead of a ValueError."""
    for blob in (_header("[]", "(1000000000000,)"),
                 _header("'|V0'", "(1000000000000000000000000000000,)")):
        with pytest.raises(ValueError, match="zero bytes"):
            npy_from_bytes(blob)


# ---------------------------------------------------------------------------- map_npy, problems

def test_map_npy_names_the_file_and_what_it_expects(tmp_path):
    good = _write(tmp_path, _npy(np.ones((2, 3, 4))), "good.npy")
    assert map_npy(good, ndim=3).shape == (2, 3, 4)
    with pytest.raises(ValueError, match=r"good\.npy.*4 axes \(ndim\).*\(2, 3, 4\)"):
        map_npy(good, ndim=4)
    ints = _write(tmp_path, _npy(np.ones((2, 3, 4), dtype=np.int64)), "ints.npy")
    with pytest.raises(ValueError, match=r"ints\.npy': dtype: expected <f8 \(float64"):
        map_npy(ints)
    with pytest.raises(FileNotFoundError):
        map_npy(tmp_path / "absent.npy")


def _stacked(tmp_path, n, m=20, d=100, seed=0):
    path = tmp_path / "clients.npy"
    np.save(path, np.random.default_rng(seed).standard_normal((n, m, d)))
    return path


def test_kpca_takes_a_mapped_stacked_array_without_a_copy_in_bounded_memory(tmp_path):
    """Building KPCA from a mapped (n, m, d) file allocates O(n) (sizes, weights, offsets)
    and one check chunk, not O(data): before issue 37 ``np.isfinite(flat).all()`` made a
    boolean array of an eighth of the data."""
    n = 2000                                              # 32 MB of samples
    z = map_npy(_stacked(tmp_path, n), ndim=3)
    KPCA(z, 5)                                            # imports, caches
    tracemalloc.start()
    try:
        problem = KPCA(z, 5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.shares_memory(problem._flat, z) and not problem._flat.flags.writeable
    assert peak < CHECK_CHUNK_BYTES // 8 + 64 * n + 2**17, (peak, z.nbytes)
    assert peak < z.nbytes / 100


def test_a_federation_runs_on_mapped_data_as_on_the_same_array_in_memory(tmp_path):
    path = _stacked(tmp_path, 40, m=10, d=12)
    alg = RFedAvg(step=0.01, local_steps=3)
    mapped = run(KPCA(map_npy(path), 3), alg, 3, seed=1)
    memory = run(KPCA(np.load(path), 3), alg, 3, seed=1)
    np.testing.assert_array_equal(mapped.x, memory.x)


def test_clients_of_different_sizes_map_as_rows_and_offsets(tmp_path):
    """A mapped (M, d) file of rows with ClientData's offsets: no copy either."""
    path = tmp_path / "rows.npy"
    np.save(path, np.random.default_rng(1).standard_normal((60, 8)))
    rows = map_npy(path, ndim=2)
    problem = KPCA(ClientData(rows, [0, 5, 25, 60]), 2)
    assert np.shares_memory(problem._flat, rows) and problem.sizes.tolist() == [5, 20, 35]


@pytest.mark.parametrize("where", [0, -1])
def test_a_nan_anywhere_in_a_mapped_file_is_found(tmp_path, where):
    z = np.random.default_rng(0).standard_normal((300, 20, 30))   # 1.4 MB: two check chunks
    z.reshape(-1)[where] = np.nan
    path = tmp_path / "nan.npy"
    np.save(path, z)
    with pytest.raises(ValueError, match="data: contains NaN or inf"):
        KPCA(map_npy(path), 2)


def test_all_finite_agrees_with_numpy_on_every_layout():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((CHECK_CHUNK_BYTES // 8 // 50 * 3 + 7, 50))   # several chunks
    views = [a, a.T, a[:, ::3], a[::-1], np.asfortranarray(a), a[:0], a[0, 0]]
    for v in views:
        assert all_finite(v) is True
    for i, j in [(0, 0), (-1, -1), (a.shape[0] // 2, 17)]:
        b = a.copy()
        b[i, j] = np.inf
        for v in (b, b.T, b[:, j % 50:j % 50 + 1], np.asfortranarray(b)):
            assert all_finite(v) is bool(np.isfinite(v).all()) is False
    assert all_finite(np.arange(10)) and all_finite(np.array([True]))


def test_pack_clients_keeps_a_read_only_stacked_array_in_place():
    z = np.random.default_rng(0).standard_normal((5, 4, 3))
    z.setflags(write=False)
    flat, offsets = pack_clients(z, 1)
    assert np.shares_memory(flat, z) and flat.shape == (20, 3)
    assert offsets.tolist() == [0, 4, 8, 12, 16, 20]
