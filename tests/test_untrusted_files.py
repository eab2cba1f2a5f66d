"""Files from elsewhere (issue 29): a file costs at most a fixed multiple of its size and never
crashes the process; every failure is one clear error of the documented type.

Entry points: the CIFAR-10 readers (python pickles, parsed as data; the binary distribution,
preferred), the ``.npy``/``.npz`` readers (data sources, Flower tasks, checkpoints), the
checkpoints (``CheckpointError`` naming the file), the experiment files (TOML/YAML: bounded
error texts, depth and alias limits, exit code 2 from ``rfl-fast run``); and the durable
writes (``atomic_write`` flushes the folder) and ``new-app``'s refusal of a non-empty folder.

Each parser is fuzzed with hypothesis and with byte-level mutation of valid files **in a
subprocess** (a segfault is a test failure, not a dead test run), a few seconds each; the
workers print how many inputs were accepted and refused.
"""

import io
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.app import cli
from rfl_fast.app.config import ConfigError, read_config, resolve_config
from rfl_fast.data import load_cifar10, read_cifar10_batch, read_cifar10_bin
from rfl_fast.errors import CheckpointError

from subprocess_env import same_package
from tiers import count

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples")


#: Prepended to every worker: ``mutations(seeds, n, seed)`` yields n byte-level mutants of
#: valid files, each 1-4 of flip, insert, delete, duplicate a run, truncate.
MUTATE = textwrap.dedent(r'''
    import random as _random

    def mutations(seeds, n, seed, max_run=16):
        rng = _random.Random(seed)
        for k in range(n):
            b = bytearray(seeds[k % len(seeds)])
            for _ in range(rng.randint(1, 4)):
                op, i = rng.randrange(5), rng.randrange(max(len(b), 1))
                if op == 0 and b:
                    b[i] = rng.randrange(256)
                elif op == 1:
                    b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
                elif op == 2:
                    del b[i:i + rng.randint(1, max_run)]
                elif op == 3:
                    j = rng.randrange(max(len(b), 1))
                    b[i:i] = b[j:j + rng.randint(1, 64)]
                else:
                    del b[i:]
            yield bytes(b)
''')


def _worker(script, *args, timeout=600):
    """Run ``script`` (after :data:`MUTATE`) in a fresh interpreter; returns the two counts
    (accepted, refused) it printed last."""
    out = subprocess.run([sys.executable, "-c", MUTATE + script, *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, **same_package())
    assert out.returncode == 0, (f"exit {out.returncode}", out.stdout[-2000:],
                                 out.stderr[-4000:])
    return [int(v) for v in out.stdout.split()[-2:]]


# ---------------------------------------------------------------------------- CIFAR-10 pickles

def _deep_tuple_key_batch(depth=300_000):
    """A ~300 KB pickle: a dict whose key is a tuple nested ``depth`` deep (TUPLE1 repeated)."""
    return b"\x80\x02})" + b"\x85" * depth + b"K\x01s."


CRASH = textwrap.dedent(r'''
    import sys
    from rfl_fast.data import read_cifar10_batch
    try:
        read_cifar10_batch(sys.argv[1])
    except ValueError as exc:
        print("ValueError", str(exc)[:300])
''')


def test_a_deep_tuple_key_is_refused_not_a_segfault(tmp_path):
    """Before issue 29 this 300 KB batch killed the interpreter (SIGSEGV): the reader hashed
    the key and CPython's tuple hash recurses without a depth check. Keys are scalars now."""
    path = tmp_path / "data_batch_1"
    path.write_bytes(_deep_tuple_key_batch())
    out = subprocess.run([sys.executable, "-c", CRASH, str(path)], capture_output=True,
                         text=True, timeout=120, **same_package())
    assert out.returncode == 0, f"the reader crashed the interpreter ({out.returncode})"
    assert "ValueError" in out.stdout and "dict key of type tuple" in out.stdout


@pytest.mark.parametrize("blob, reason", [
    (b"\x80\x02}]K\x01s.", "dict key of type list"),                       # list key
    (b"\x80\x02(]K\x01d.", "dict key of type list"),                       # DICT opcode
    (b"\x80\x02)" + b"\x85" * 100 + b".", "nested deeper than 32"),         # deep value
    (b"\x80\x02]q\x00h\x00a.", "contains itself"),                          # a cycle
    (b"\x80\x02(q\x00.", "memo of an empty stack or a MARK"),
    (b"\x80\x02c\xff\xfe\nx\n.", "not ASCII"),
])
def test_malformed_pickles_are_value_errors(tmp_path, blob, reason):
    """List keys gave a raw TypeError before issue 29; every malformed batch is a ValueError
    naming the file."""
    path = tmp_path / "test_batch"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=reason) as info:
        read_cifar10_batch(path)
    assert str(path) in str(info.value)


FUZZ_PICKLE = textwrap.dedent(r'''
    import os, pickle, sys, tempfile, warnings
    import numpy as np
    from hypothesis import HealthCheck, example, given, settings, strategies as st
    from rfl_fast.data import read_cifar10_batch

    warnings.simplefilter("ignore")
    n_hyp, n_mut = int(sys.argv[1]), int(sys.argv[2])
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "data_batch_1")
    counts = [0, 0]

    def read(blob):
        with open(path, "wb") as fh:
            fh.write(blob)
        try:
            data, labels = read_cifar10_batch(path)
        except ValueError as exc:
            assert len(str(exc)) < 2000, str(exc)[:300]
            counts[1] += 1
            return
        assert data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072
        assert labels.shape == (data.shape[0],) and labels.dtype == np.int64
        counts[0] += 1

    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    batch = {"batch_label": "testing batch 1 of 1", "labels": [3, 7], "data": data,
             "filenames": ["a.png", "b.png"]}
    seeds = [pickle.dumps(batch, protocol=p) for p in (2, 3, 4, 5)]
    seeds.append(pickle.dumps({b"labels": [1, 2], b"data": [bytes(3072), bytes(3072)]}, 2))
    # opcodes the reader knows and some it must refuse, with plausible arguments
    frags = [b"(", b")", b"]", b"}", b"t", b"l", b"d", b"a", b"e", b"s", b"u", b"\x85", b"\x86",
             b"\x87", b"K\x01", b"J\xff\xff\xff\x7f", b"M\x00\x01", b"\x8a\x02\xff\x7f",
             b"G" + bytes(8), b"N", b"\x88", b"\x89", b"X\x03\x00\x00\x00abc",
             b"X\xff\xff\xff\xff", b"\x8c\x04data", b"\x8c\x06labels", b"C\x03abc",
             b"B\x00\x00\x00\x10", b"q\x00", b"h\x00", b"r\x01\x00\x00\x00", b"j\x05\x00\x00\x00",
             b"\x94", b"\x95" + bytes(8), b"cnumpy\nndarray\n", b"cos\nsystem\n",
             b"c_codecs\nencode\n", b"\x93", b"R", b"b", b"\x80\x02", b"\x80\x09", b".",
             b"i", b"\x81", b"\x82", b"P", b"\x8b", b"\x96" + bytes(8)]

    @settings(max_examples=n_hyp, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @example(b"\x80\x02})" + b"\x85" * 300_000 + b"K\x01s.")     # the issue's 300 KB batch
    @given(st.one_of(
        st.lists(st.one_of(st.sampled_from(frags), st.binary(max_size=6)), max_size=120)
          .map(lambda parts: b"\x80\x02" + b"".join(parts)),
        st.tuples(st.sampled_from([b"(", b"]", b")\x85", b"}("]), st.integers(1, 20_000),
                  st.sampled_from([b"", b"K\x01s", b"t", b"."]))
          .map(lambda t: b"\x80\x02" + t[0] * t[1] + t[2] + b"."),
        # containers as dict keys: nested tuples (hashed recursively), lists, dicts
        st.tuples(st.sampled_from([b"})", b"(}"]), st.integers(0, 20_000),
                  st.sampled_from([b"K\x01s.", b"K\x01d.", b"]K\x01s."]))
          .map(lambda t: b"\x80\x02" + t[0] + b"\x85" * t[1] + t[2]),
        st.binary(max_size=300)))
    def fuzz(blob):
        read(blob)

    fuzz()
    for blob in mutations(seeds, n_mut, 0):
        read(blob)
    print(*counts)
''')


def test_fuzz_the_cifar_pickle_reader():
    """Hypothesis opcode streams (known and refused opcodes, lengths past the end, nesting and
    containers as dict keys up to 20 000 deep, the issue's crashing batch -- a key nested
    300 000 deep --, random bytes) and 600 byte-level mutations (flip, insert, delete,
    duplicate, truncate) of real batches of protocols 2-5: every input is a batch of the
    documented shape or a bounded ValueError; the interpreter survives."""
    n_hyp, n_mut = count(40, 300), count(80, 600)      # the fast tier's counts, the full's
    accepted, refused = _worker(FUZZ_PICKLE, n_hyp, n_mut)
    print(f"CIFAR pickle reader: {accepted} accepted, {refused} refused")
    assert accepted + refused == n_hyp + n_mut + 1 and refused > n_mut and accepted > 0


# ---------------------------------------------------------------------------- CIFAR-10 binary

def _cifar_bin(folder, sizes, labels_hi=9, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]
    out = {}
    os.makedirs(folder, exist_ok=True)
    for name, m in zip(names, sizes):
        labels = rng.integers(0, labels_hi + 1, m).astype(np.uint8)
        pixels = rng.integers(0, 256, (m, 3072)).astype(np.uint8)
        with open(os.path.join(folder, name), "wb") as fh:
            fh.write(np.hstack([labels[:, None], pixels]).tobytes())
        out[name] = (pixels, labels.astype(np.int64))
    return out


def test_the_binary_distribution_is_read_and_preferred(tmp_path):
    """The binary CIFAR-10 (fixed-size records: a label byte, 3072 pixels) is read with one
    size check and is taken over the python batches when both are there."""
    root = tmp_path / "data"
    want = _cifar_bin(root / "cifar-10-batches-bin", [3, 2, 2, 2, 2, 4])
    X, y = load_cifar10(root, split="all", normalize="none", dtype=np.uint8)
    order = [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]
    assert np.array_equal(X, np.vstack([want[n][0] for n in order]))
    assert np.array_equal(y, np.concatenate([want[n][1] for n in order]))
    py = root / "cifar-10-batches-py"                     # a python copy holding other images
    py.mkdir()
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        (py / name).write_bytes(pickle.dumps({"data": np.zeros((1, 3072), np.uint8),
                                              "labels": [0]}, protocol=2))
    X2, _ = load_cifar10(root, split="test", normalize="none", dtype=np.uint8)
    assert np.array_equal(X2, want["test_batch.bin"][0])    # the binary one
    (root / "cifar-10-batches-bin" / "test_batch.bin").unlink()
    X3, _ = load_cifar10(root, split="test", normalize="none", dtype=np.uint8)
    assert X3.shape == (1, 3072) and not X3.any()            # falls back to python


@pytest.mark.parametrize("size, reason", [(0, "not a CIFAR-10 binary batch"),
                                          (3073 * 2 + 1, "not a CIFAR-10 binary batch"),
                                          (3072, "not a CIFAR-10 binary batch")])
def test_binary_batches_of_partial_records_are_refused(tmp_path, size, reason):
    path = tmp_path / "test_batch.bin"
    path.write_bytes(bytes(size))
    with pytest.raises(ValueError, match=reason):
        read_cifar10_bin(path)
    rec = bytearray(3073)
    rec[0] = 10
    path.write_bytes(bytes(rec))
    with pytest.raises(ValueError, match="record 0 has label 10"):
        read_cifar10_bin(path)


FUZZ_IDX = textwrap.dedent(r'''
    import gzip, os, struct, sys, tempfile, warnings
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    from rfl_fast.data import read_idx

    warnings.simplefilter("ignore")
    n_hyp, n_mut = int(sys.argv[1]), int(sys.argv[2])
    path = os.path.join(tempfile.mkdtemp(), "t10k-images-idx3-ubyte")
    counts = [0, 0]

    def check(blob):
        with open(path, "wb") as fh:
            fh.write(blob)
        try:
            a = read_idx(path)
        except ValueError as exc:
            assert len(str(exc)) < 1000, str(exc)[:300]
            counts[1] += 1
            return
        assert a.nbytes <= 1032 * len(blob)
        counts[0] += 1

    def idx(a, code):
        head = bytes([0, 0, code, a.ndim]) + struct.pack(">" + "I" * a.ndim, *a.shape)
        return head + a.astype(a.dtype.newbyteorder(">")).tobytes()

    seeds = [idx(np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28), 8),
             idx(np.arange(5, dtype=np.uint8), 8), idx(np.ones((3, 2), np.float64), 0x0E),
             idx(np.ones(4, np.int32), 0x0C)]
    seeds += [gzip.compress(b) for b in seeds[:2]]

    @settings(max_examples=n_hyp, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 255), st.lists(st.integers(0, 2**32 - 1), max_size=6),
           st.binary(max_size=64), st.booleans())
    def fuzz(code, dims, body, zipped):
        blob = bytes([0, 0, code, len(dims)]) + struct.pack(">" + "I" * len(dims), *dims) + body
        check(gzip.compress(blob) if zipped else blob)

    fuzz()
    for blob in seeds:
        check(blob)
    for blob in mutations(seeds, n_mut, 4):
        check(blob)
    print(*counts)
''')


def test_fuzz_the_idx_reader():
    """Hypothesis IDX headers (any type code and dimension count, dimensions up to 2^32 - 1,
    plain or gzipped) and 400 byte-level mutations of valid MNIST-style files: an array
    within gzip's largest expansion of the file, or a bounded ValueError."""
    n_hyp, n_mut = count(40, 300), count(60, 400)
    accepted, refused = _worker(FUZZ_IDX, n_hyp, n_mut)
    print(f"IDX reader: {accepted} accepted, {refused} refused")
    assert accepted + refused == n_hyp + n_mut + 6 and refused > n_mut and accepted >= 6


# ---------------------------------------------------------------------------- .npy / .npz

def _npy_bytes(arr, shape_text=None):
    b = io.BytesIO()
    np.save(b, arr)
    data = b.getvalue()
    if shape_text is not None:
        data = data.replace(repr(arr.shape).encode(), shape_text.encode(), 1)
    return data


def test_a_source_declaring_a_huge_shape_is_bad_input_exit_2(tmp_path, capsys):
    """Before issue 29 an .npy data source declaring a 2.9 TiB shape gave a raw MemoryError
    and exit code 1; the header is checked against the file before anything is allocated."""
    src = tmp_path / "x.npy"
    src.write_bytes(_npy_bytes(np.zeros((4, 3)), "(400000, 1000000)"))
    exp = tmp_path / "exp.toml"
    exp.write_text(f'rounds = 1\nout = "{(tmp_path / "out").as_posix()}"\n'
                   f'[problem]\ntype = "KPCA"\nr = 2\n'
                   f'[data]\nsource = "npy"\npath = "{src.as_posix()}"\n'
                   f'[[algorithm]]\nname = "RFedAvg"\nstep = 0.1\nlocal_steps = 1\n')
    assert cli.main(["run", str(exp), "-q"]) == 2
    err = capsys.readouterr().err
    assert "data.path" in err and "declares shape (400000, 1000000)" in err
    assert not (tmp_path / "out").exists()


FUZZ_NPY = textwrap.dedent(r'''
    import io, os, resource, sys, tempfile, warnings
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    from rfl_fast._files import npy_from_bytes, read_npy, read_npz

    warnings.simplefilter("ignore")
    n_hyp, n_mut = int(sys.argv[1]), int(sys.argv[2])
    folder = tempfile.mkdtemp()
    counts = [0, 0]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def npy(a, version=None):
        b = io.BytesIO()
        np.lib.format.write_array(b, a, version=version, allow_pickle=True)
        return b.getvalue()

    def check(blob):
        for kind in ("bytes", "npy", "mmap", "npz"):
            path = os.path.join(folder, kind + "." + ("npz" if kind == "npz" else "npy"))
            with open(path, "wb") as fh:
                fh.write(blob)
            try:
                if kind == "bytes":
                    out = {"": npy_from_bytes(blob)}
                elif kind == "npy":
                    out = {"": read_npy(path)}
                elif kind == "mmap":
                    out = {"": read_npy(path, mmap=True)}
                else:
                    out = read_npz(path)
            except ValueError as exc:
                assert len(str(exc)) < 1000, str(exc)[:300]
                counts[1] += 1
                continue
            for a in out.values():
                assert not a.dtype.hasobject and a.nbytes <= 1032 * len(blob) + 1
                if kind == "mmap":                  # the mapped bytes are the file's bytes
                    assert not a.flags.writeable and a.nbytes <= len(blob)
                    assert a.tobytes() == read_npy(path).tobytes()
            counts[0] += 1

    arrays = [np.arange(12.0).reshape(3, 4), np.arange(6, dtype=np.int32), np.zeros((0, 3)),
              np.array(3.5), np.asfortranarray(np.ones((3, 2))), np.array([True, False]),
              np.zeros(4, dtype=[("a", "<f8"), ("b", "<i4")]), np.array(["ab", "c"])]
    seeds = [npy(a) for a in arrays] + [npy(arrays[0], version=(2, 0))]
    for compress in (False, True):
        b = io.BytesIO()
        (np.savez_compressed if compress else np.savez)(b, X=arrays[0], y=arrays[1])
        seeds.append(b.getvalue())
    descrs = st.one_of(st.sampled_from(["<f8", "|u1", ">i4", "|O", "<U3", "|V8", "<c16", "x",
                                        "[('a', '<f8')]", "[('a', '|O')]"]),
                       st.text(max_size=12).map(repr))
    dims = st.one_of(st.integers(-5, 12), st.integers(0, 2**63), st.just(10**30))
    shapes = st.lists(dims, max_size=5).map(lambda d: "(" + "".join(f"{v}, " for v in d) + ")")

    @st.composite
    def headers(draw):
        text = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (
            draw(descrs), draw(st.sampled_from(["False", "True", "0", "'x'"])),
            draw(st.one_of(shapes, st.text(max_size=20))))
        text = text + " " * draw(st.integers(0, 70)) + "\n"
        head = text.encode("latin1", "replace")
        magic = b"\x93NUMPY" + bytes([draw(st.sampled_from([1, 2, 3, 9])), 0])
        size = len(head).to_bytes(2 if magic[6] == 1 else 4, "little")
        return magic + size + head + draw(st.binary(max_size=200))

    @settings(max_examples=n_hyp, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(headers(), st.binary(max_size=300)))
    def fuzz(blob):
        check(blob)

    fuzz()
    for blob in seeds:                       # the valid files themselves
        check(blob)
    for blob in mutations(seeds, n_mut, 1, max_run=12):
        check(blob)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
    assert grew < 256 * 2**20, f"the readers grew the process by {grew / 2**20:.0f} MB"
    print(*counts)
''')


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
def test_fuzz_the_npy_and_npz_readers():
    """Hypothesis .npy headers (any dtype text, object and structured dtypes, negative, huge
    and 10**30 dimensions, bad versions, trailing bytes) and 400 byte-level mutations of
    valid .npy/.npz files (stored and deflated), each read as bytes, as an .npy file (read and
    memory-mapped: the same bytes) and as an .npz file: arrays within 1032x the input's size,
    or a bounded ValueError; the process grows by less than 256 MB in all."""
    n_hyp, n_mut = count(40, 300), count(60, 400)
    accepted, refused = _worker(FUZZ_NPY, n_hyp, n_mut)
    print(f".npy/.npz readers: {accepted} accepted, {refused} refused")
    assert accepted + refused == 4 * (n_hyp + n_mut + 11) and accepted >= 11
    assert refused > 4 * n_mut + n_hyp


# ---------------------------------------------------------------------------- checkpoints

def _checkpoint(tmp_path):
    from rfl_fast.algorithms import RFedSVRG
    from rfl_fast.problems import KPCA

    prob = KPCA(np.random.default_rng(0).standard_normal((3, 10, 4)), 2)
    path = tmp_path / "run.npz"
    rf.federation.run(prob, RFedSVRG(0.05, 2), 2, seed=0, checkpoint=path, metrics=False)
    return prob, path


def _rewrite(path, doc_fn):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    doc = json.loads(str(arrays["__json__"]))
    arrays["__json__"] = np.array(json.dumps(doc_fn(doc)))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.mark.parametrize("damage, reason", [
    ("deep", "RecursionError|nested deeper"),
    ("deep_list", "nested deeper than 64"),
    ("tuple_key", "dict key or set member of type tuple"),
    ("field", "fields .*expected"),
    ("prng", "TypeError|ValueError"),
    ("round", "round 7 of 2"),
    ("state", "the model"),
    ("scalar", "numbers only"),
])
def test_every_bad_checkpoint_is_one_checkpoint_error(tmp_path, damage, reason):
    """Before issue 29 a deeply nested JSON document raised a raw RecursionError, and a
    structurally wrong payload (bad generator state, a model off the manifold) failed later
    inside resume with whatever error its first use raised; every one is now a
    CheckpointError naming the file."""
    prob, path = _checkpoint(tmp_path)
    edits = {
        "deep": lambda d: {**d, "payload": {**d["payload"], "round": json.loads(
            "[" * 100_000 + "]" * 100_000)}},
        "deep_list": lambda d: {**d, "payload": {**d["payload"], "seed": json.loads(
            "[" * 200 + "]" * 200)}},
        "tuple_key": lambda d: {**d, "payload": {**d["payload"], "seed": {"__items__": [
            [{"__tuple__": [1, 2]}, 3]]}}},
        "field": lambda d: {**d, "payload": {**d["payload"], "participation": {
            "__dataclass__": d["payload"]["participation"]["__dataclass__"],
            "fields": {"__class__": 1}}}},
        "prng": lambda d: {**d, "payload": {**d["payload"], "prng": {"__dict__": {
            "bit_generator": "PCG64", "state": {"__dict__": {"state": "x", "inc": 1}},
            "has_uint32": 0, "uinteger": 0}}}},
        "round": lambda d: {**d, "payload": {**d["payload"], "round": 7}},
        "state": lambda d: {**d, "payload": {**d["payload"], "x0": {"__array__": "a0"}}},
        "scalar": lambda d: {**d, "payload": {**d["payload"], "seed": {
            "__scalar__": "x", "dtype": "O"}}},
    }
    if damage == "deep":
        # a JSON text nested past the recursion limit (json.dumps itself would recurse)
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["__json__"] = np.array('{"version": 2, "payload": {"round": '
                                      + "[" * 100_000 + "]" * 100_000 + "}}")
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    elif damage == "state":
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        doc = json.loads(str(arrays["__json__"]))
        key = doc["payload"]["x0"]["__array__"]
        arrays[key] = 2.0 * arrays[key]                      # x0 off the manifold
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
        reason = "x0"
    else:
        _rewrite(path, edits[damage])
    with pytest.raises(CheckpointError, match=reason) as info:
        rf.federation.resume(path, prob)
    assert str(path) in str(info.value) and len(str(info.value)) < 1000


def test_resume_refuses_a_problem_the_ledger_was_not_accounted_for(tmp_path):
    """Before issue 29 resuming a PriRFed run with N_i = 10 instead of 20 kept the original
    eps columns (a silent under-report). The checkpoint records the problem; resume refuses
    another (and PriRFed's ledger checks its N_i itself, for an algorithm passed in)."""
    pytest.importorskip("dp_accounting")
    from rfl_fast.algorithms import PriRFed
    from rfl_fast.problems import KPCA

    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 20, 6))
    first = rf.federation.run(KPCA(data, 2), PriRFed(0.05, 2, sigma=1.0, clip=1.0), 3,
                              seed=0, checkpoint=tmp_path / "c.npz", metrics=False)
    smaller = KPCA(data[:, :10], 2)
    with pytest.raises(ValueError, match=r"sample counts N_i \(client 0\) 10, the run had 20"):
        rf.federation.resume(tmp_path / "c.npz", smaller, 6)
    with pytest.raises(ValueError, match=r"problem: the privacy ledger was accounted "
                                         r"for clients with N_i = \[20, 20, 20, 20\]"):
        first.algorithm.for_run(smaller, rf.federation.Full(), 6, resumed=True)
    more = rf.federation.resume(tmp_path / "c.npz", KPCA(data, 2), 6,      # the same: fine
                                algorithm=first.algorithm.raise_budget(10.0))
    assert len(more.history["eps_rdp"]) == 7


FUZZ_CHECKPOINT = textwrap.dedent(r'''
    import json, os, sys, tempfile, warnings
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    import rfl_fast as rf
    from rfl_fast.algorithms import RFedProj
    from rfl_fast.errors import CheckpointError
    from rfl_fast.federation import checkpoint as ckpt
    from rfl_fast.problems import KPCA

    warnings.simplefilter("ignore")
    n_hyp, n_mut = int(sys.argv[1]), int(sys.argv[2])
    folder = tempfile.mkdtemp()
    prob = KPCA(np.random.default_rng(0).standard_normal((3, 10, 4)), 2)
    good = os.path.join(folder, "good.npz")
    rf.federation.run(prob, RFedProj(0.05, 2), 2, seed=0, checkpoint=good, metrics=False)
    raw = open(good, "rb").read()
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    doc = json.loads(str(arrays.pop("__json__")))
    path = os.path.join(folder, "c.npz")
    counts = [0, 0]

    def check(blob=None, document=None):
        if document is not None:
            with open(path, "wb") as fh:
                np.savez(fh, **arrays, __json__=np.array(document))
        else:
            with open(path, "wb") as fh:
                fh.write(blob)
        try:
            payload = ckpt.read_run(path)
            ckpt.check_state(payload, prob, path)
        except CheckpointError as exc:
            assert path in str(exc) and len(str(exc)) < 1000, str(exc)[:300]
            counts[1] += 1
            return
        counts[0] += 1

    leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                       st.text(max_size=10), st.sampled_from(
                           ["a0", "a1", "rfl_fast.algorithms.proj:RFedProj", "os:system"]))
    values = st.recursive(leaves, lambda c: st.one_of(
        st.lists(c, max_size=3), st.dictionaries(st.sampled_from(
            ["__array__", "__scalar__", "dtype", "__tuple__", "__items__", "__dict__",
             "__dataclass__", "fields", "__frozenset__", "readonly", "x"]), c, max_size=3)),
        max_leaves=12)

    def paths(d, prefix=()):
        yield prefix
        if isinstance(d, dict):
            for k, v in d.items():
                yield from paths(v, prefix + (k,))
        elif isinstance(d, list):
            for i, v in enumerate(d):
                yield from paths(v, prefix + (i,))
    spots = [p for p in paths(doc["payload"]) if p]

    @settings(max_examples=n_hyp, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(spots), values), min_size=1, max_size=3))
    def fuzz(edits):
        d = json.loads(json.dumps(doc))
        for where, value in edits:
            node = d["payload"]
            try:
                for k in where[:-1]:
                    node = node[k]
                node[where[-1]] = value
            except (KeyError, IndexError, TypeError):
                pass
        check(document=json.dumps(d))

    fuzz()
    for blob in mutations([raw], n_mut, 2, max_run=64):
        check(blob)
    print(*counts)
''')


def test_fuzz_checkpoints():
    """Hypothesis rewrites of a real checkpoint's JSON document (any value at any place:
    tagged objects, foreign classes, arrays that do not exist, huge ints) and 600 byte-level
    mutations of the file: each is read and probed as resume does (read_run, check_state),
    accepted or refused with a CheckpointError naming the file; nothing else."""
    n_hyp, n_mut = count(30, 200), count(80, 600)
    accepted, refused = _worker(FUZZ_CHECKPOINT, n_hyp, n_mut)
    print(f"checkpoints: {accepted} accepted, {refused} refused")
    assert accepted + refused == n_hyp + n_mut and refused > 5 * n_mut // 6 and accepted > 0


# ---------------------------------------------------------------------------- experiment files

def _bomb(levels=9):
    """The issue's 347-byte YAML: nine alias levels of nine (9^9 values once expanded)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"rounds: *a{levels - 1}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name, text, reason", [
    ("bomb.yaml", _bomb(), "expands to more than 100000 values"),
    ("deep.yaml", "rounds: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 16"),
    ("deep_map.yaml", "".join("  " * i + f"k{i}:\n" for i in range(500)) + "\n",
     "nested deeper than 16"),
    ("deep.toml", "rounds = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 16"),
    ("cycle.yaml", "a: &a [*a]\nrounds: 1\n", "cycle|expands|not valid YAML"),
    ("big.toml", "name = 'x'\n" + "#" * (2 << 20) + "\n", "more than 1048576 bytes"),
    ("latin1.toml", "name = '\xe9'\n", "not UTF-8"),
])
def test_a_hostile_experiment_file_is_bad_input_exit_2(tmp_path, capsys, name, text, reason):
    """Before issue 29 the 347-byte alias bomb produced a 28 MB error message (and exhausted
    memory at nine levels, exit 1), and deeply nested YAML a RecursionError (exit 1). Now the
    file is measured while and after parsing; the error is short and the exit code 2."""
    path = tmp_path / name
    path.write_bytes(text.encode("latin1" if name.startswith("latin1") else "utf-8"))
    with pytest.raises(ConfigError, match=reason) as info:
        read_config(path)
    assert len(str(info.value)) < 500
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err) < 1000 and not (tmp_path / "out").exists()


def test_error_texts_show_a_bounded_value(tmp_path):
    """A value that fails its check is shown in at most a few hundred characters, however
    large (a 10 MB string, an alias-shared list, an int of 10^5 digits)."""
    big = "x" * 10_000_000 + "!"
    for raw, key in ((dict(name=big), "name"), (dict(rounds=[[1] * 1000] * 1000), "rounds"),
                     (dict(rounds=-10**100_000), "rounds"), (dict(plots=big), "plots"),
                     (dict(seed=-10**5000), "seed")):
        with pytest.raises(ConfigError) as info:
            resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                            "algorithm": {"name": "RFedAvg", "step": 0.1, "local_steps": 1},
                            **raw})
        assert info.value.key == key and len(str(info.value)) < 600


FUZZ_CONFIG = textwrap.dedent(r'''
    import os, random, sys, tempfile, warnings
    from hypothesis import HealthCheck, given, settings, strategies as st
    from rfl_fast.app.config import ConfigError, read_config, resolve_config

    warnings.simplefilter("ignore")
    n_hyp, n_mut, examples = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    folder = tempfile.mkdtemp()
    counts = [0, 0]

    def check(text, ext):
        path = os.path.join(folder, "exp" + ext)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(text)
        try:
            raw, _ = read_config(path)
            resolve_config(raw, name="fuzz")
        except ConfigError as exc:
            assert len(str(exc)) < 2000, str(exc)[:300]
            counts[1] += 1
            return
        except UnicodeEncodeError:
            return                                 # a lone surrogate is not a file's text
        counts[0] += 1

    seeds = [(open(os.path.join(examples, n), encoding="utf-8").read(),
              os.path.splitext(n)[1]) for n in ("config_kpca.toml", "config_spd_mean.yaml")]
    tokens = ["[", "]", "{", "}", ":", ",", "-", "&a", "*a", "&b", "*b", "<<: *a",
              "!!python/object:os.system", "!!binary", "? ", "\n", "  ", "rounds", "problem",
              "type", "KPCA", "data", "source", "wine", "algorithm", "name", "RFedAvg", "step", "1e308", "-1", "nan",
              "'x'", '"', "=", "[[algorithm]]", "[problem]", "0x10", "99999999999999999999"]

    def bomb(levels, width):
        lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                  for i in range(1, levels)]
        return "\n".join(lines) + f"\nrounds: *a{levels - 1}\n"

    texts = st.one_of(
        st.lists(st.one_of(st.sampled_from(tokens), st.text(max_size=5)), max_size=80)
          .map(" ".join),
        st.tuples(st.integers(2, 7), st.integers(2, 9)).map(lambda t: bomb(*t)),  # aliases
        st.tuples(st.sampled_from(["rounds: ", "rounds = ", "a = {b = "]),       # nesting
                  st.integers(1, 5000), st.sampled_from(["[", "{x: "]))
          .map(lambda t: t[0] + t[2] * t[1] + ("]" if t[2] == "[" else "}") * t[1]))

    @settings(max_examples=n_hyp, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(texts, st.sampled_from([".yaml", ".toml"]))
    def fuzz(text, ext):
        check(text, ext)

    fuzz()
    rng = random.Random(3)
    for k in range(n_mut):
        text, ext = seeds[k % 2]
        t = list(text)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(t))
            op = rng.randrange(4)
            if op == 0:
                t[i] = rng.choice("[]{}:,&*-=#\n '\"x0.")
            elif op == 1:
                t[i:i] = rng.choice(tokens)
            elif op == 2:
                del t[i:i + rng.randint(1, 10)]
            else:
                j = rng.randrange(len(t))
                t[i:i] = t[j:j + rng.randint(1, 40)]
        check("".join(t), ext)
    print(*counts)
''')


def test_fuzz_experiment_files():
    """Hypothesis token soups (YAML anchors, aliases, merges, tags, TOML tables, huge numbers),
    alias bombs (up to 7 levels of 9) and brackets nested up to 5000 deep, as .yaml and .toml,
    and 500 character-level mutations of the example files: each is read and resolved, or
    refused with a ConfigError of bounded text; nothing else."""
    n_hyp, n_mut = count(50, 400), count(70, 500)
    accepted, refused = _worker(FUZZ_CONFIG, n_hyp, n_mut, EXAMPLES)
    print(f"experiment files: {accepted} accepted, {refused} refused")
    assert refused > n_mut and accepted > count(5, 10)


# ---------------------------------------------------------------------------- writes

def test_atomic_write_flushes_the_file_then_the_folder(tmp_path, monkeypatch):
    """Before issue 29 the folder was not flushed after the rename: a power loss could roll
    a privacy ledger back to its previous version."""
    import rfl_fast._files as files

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: (events.append(
        ("fsync", "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file")), real_fsync(fd)))
    monkeypatch.setattr(files.os, "replace", lambda a, b: (events.append(("replace",)),
                                                           real_replace(a, b)))
    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write("{}")
    files.atomic_write(tmp_path / "ledger.json", write, fsync=True)
    assert events == [("fsync", "file"), ("replace",), ("fsync", "dir")]
    events.clear()
    files.atomic_write(tmp_path / "plain.txt", write)
    assert events == [("replace",)]


def test_new_app_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    """Before issue 29 ``python -m rfl_fast.flower new-app DIR`` silently overwrote an
    existing pyproject.toml; like ``rfl-fast run`` it now needs --overwrite."""
    from rfl_fast.flower.__main__ import main

    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text("mine")
    assert main(["new-app", str(app), "rounds=3"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (app / "pyproject.toml").read_text() == "mine"
    assert main(["new-app", str(app), "--overwrite", "rounds=3"]) == 0
    assert "rounds = 3" in (app / "pyproject.toml").read_text()
    assert main(["new-app", str(tmp_path / "fresh")]) == 0
