"""auto's policy is data: the shipped file, a per-machine file planted where ``rfl-fast tune``
writes it (auto's choice follows it), and every way a file from disk can be wrong (corrupt,
foreign, stale, for another thread count): ignored with a message, never trusted."""

import copy
import io
import json
import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rfl_fast as rf
from rfl_fast import kernels
from rfl_fast.kernels import policy
from rfl_fast.kernels.testing import kernel_inputs

NAME, SHAPE = "stiefel_retr_polar", (16, 784, 5)


def shipped_first(name=NAME, shape=SHAPE):
    return kernels.resolve(name, "auto", shape)[0]


def other_first(name=NAME, shape=SHAPE):
    """An order whose first available backend is not the shipped policy's choice."""
    first = shipped_first(name, shape)
    other = next(b for b in rf.available_backends() if b != first)
    return [other] + [b for b in ("cpp", "numba", "numpy") if b != other]


def tuned(order, threads=None, machine=None, name=NAME, at=SHAPE, **point):
    return {"format": policy.FORMAT, "version": policy.VERSION,
            "provenance": {"machine": machine or policy.machine_key(),
                           "threads": threads or rf.get_threads(), "date": "2026-11-25",
                           "command": "a test", "notes": ["planted by tests/test_policy.py"]},
            "rule": {"margin": 1.1, "worst_round": 1.0, "portable": False, "same_calls": {}},
            "kernels": {name: [{"at": list(at), "order": list(order), **point}]}}


def plant(data, threads=None):
    path = policy.tuned_path(threads or rf.get_threads())
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with open(path, "wb") as f:
        f.write(raw)
    kernels.reload_policy()
    return path


def test_a_planted_policy_changes_autos_choice_and_show_config_says_so(policy_cache):
    before = shipped_first()
    order = other_first()
    path = plant(tuned(order))
    assert shipped_first() == order[0] != before
    assert shipped_first(shape=(17,) + SHAPE[1:]) == order[0]  # nearest to the planted point
    notes = kernels.policy_notes()
    assert notes[1].startswith(f"per-machine policy {path}: measured 2026-11-25")
    out = io.StringIO()
    rf.show_config(file=out)
    assert path in out.getvalue()
    # the shipped points of the other kernels and shapes stand
    with open(path, "rb") as f:
        table = policy.effective(policy.parse(f.read(), path))
    assert {e.at: e.order for e in table["sphere_exp"]} == {
        e.at: e.order for e in policy.effective()["sphere_exp"]}


def test_the_environment_can_name_a_policy_file_or_refuse_the_cache(policy_cache, monkeypatch,
                                                                    tmp_path):
    order = other_first()
    plant(tuned(order))
    monkeypatch.setenv(policy.ENV, "shipped")
    kernels.reload_policy()
    assert shipped_first() != order[0]
    assert "not read" in kernels.policy_notes()[1]
    elsewhere = tmp_path / "mine.json"
    elsewhere.write_text(json.dumps(tuned(order)))
    monkeypatch.setenv(policy.ENV, str(elsewhere))
    kernels.reload_policy()
    assert shipped_first() == order[0]


def test_a_policy_is_kept_per_thread_count(policy_cache):
    """auto's choice depends on the threads in force: a file tuned at another thread count is
    not used at this one."""
    before = rf.get_threads()
    other = before + 1
    order = other_first()
    plant(tuned(order, threads=other), threads=other)
    try:
        assert shipped_first() != order[0]
        rf.set_threads(other)
        assert shipped_first() == order[0]
    finally:
        rf.set_threads(before)
    assert shipped_first() != order[0]


def _mutations():
    """(name, a function turning a valid per-machine policy into a bad one, the reason
    expected in the message)."""
    def edit(fn):
        def apply(data):
            data = copy.deepcopy(data)
            fn(data)
            return json.dumps(data).encode()
        return apply

    def set_(path, value):
        def fn(d):
            for k in path[:-1]:
                d = d[k]
            d[path[-1]] = value
        return edit(fn)

    point = ("kernels", NAME, 0)
    return [
        ("not JSON", lambda d: b"{not json", "not JSON"),
        ("empty", lambda d: b"", "not JSON"),
        ("truncated", lambda d: json.dumps(d).encode()[:-40], "not JSON"),
        ("not UTF-8", lambda d: b"\xff\xfe{}", "not JSON"),
        ("nested too deep", lambda d: b"[" * 200_000 + b"]" * 200_000, "bytes, more than|not JSON"),
        ("too large", lambda d: b" " * (policy.MAX_BYTES + 1), "more than a policy's"),
        ("NaN", lambda d: json.dumps(d).replace('"threads": ', '"threads": NaN, "x": ').encode(),
         "not a JSON number"),
        ("a key twice", lambda d: json.dumps(d).replace('"version": 1', '"version": 1, '
                                                        '"version": 1').encode(), "twice"),
        ("a list", lambda d: b"[]", "expected an object"),
        ("format", set_(("format",), "something else"), "format"),
        ("version", set_(("version",), 2), "version"),
        ("version as bool", set_(("version",), True), "version"),
        ("an unknown key", set_(("extra",), 1), "unknown keys"),
        ("no provenance", edit(lambda d: d.pop("provenance")), "missing"),
        ("threads 0", set_(("provenance", "threads"), 0), "threads"),
        ("threads a string", set_(("provenance", "threads"), "2"), "threads"),
        ("a date", set_(("provenance", "date"), "yesterday"), "date"),
        ("a long cpu", set_(("provenance", "machine", "cpu"), "x" * 201), "cpu"),
        ("an unknown kernel", set_(("kernels", "fft"), []), "unknown kernel"),
        ("an unknown backend", set_(point + ("order",), ["gpu", "numpy"]), "order"),
        ("no reference", set_(point + ("order",), ["cpp"]), "including 'numpy'"),
        ("a backend twice", set_(point + ("order",), ["cpp", "cpp", "numpy"]), "distinct"),
        ("a short shape", set_(point + ("at",), [16, 784]), "sizes"),
        ("a size 0", set_(point + ("at",), [0, 784, 5]), "at"),
        ("a float size", set_(point + ("at",), [16.5, 784, 5]), "at"),
        ("n < p", set_(point + ("at",), [16, 4, 5]), "n >= p"),
        ("a huge size", set_(point + ("at",), [16, 2**40, 5]), "at"),
        ("a batch mode", set_(point + ("parallel",), "gpu"), "parallel"),
        ("a speed-up", set_(point + ("speedup",), {"cpp": -1.0}), "speedup"),
        ("two modes", edit(lambda d: d["kernels"][NAME].extend([
            {"at": [1, 784, 32], "order": ["numpy"], "parallel": "items"},
            {"at": [200, 784, 32], "order": ["numpy"], "parallel": "blas"}])), "two batch modes"),
        ("the same shape twice", edit(lambda d: d["kernels"][NAME].append(
            d["kernels"][NAME][0])), "same shape twice"),
        ("a portable file", set_(("rule", "portable"), True), "portable"),
        ("a margin", set_(("rule", "margin"), float("inf")), "not a JSON number|margin"),
    ]


@pytest.mark.parametrize("name,mutate,reason", _mutations(), ids=[m[0] for m in _mutations()])
def test_a_corrupt_policy_file_is_ignored_with_a_message(policy_cache, caplog, name, mutate,
                                                          reason):
    import re

    order = other_first()
    before = shipped_first()
    with caplog.at_level(logging.WARNING, logger="rfl_fast.kernels"):
        path = plant(mutate(tuned(order)))
        assert shipped_first() == before
    note = kernels.policy_notes()[1]
    assert note.startswith(f"per-machine policy {path} ignored: ") and re.search(reason, note)
    assert any(path in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("field,value,reason", [
    ("cpu", "Some Other CPU 9000", "another machine \\(cpu"),
    ("cores", 97, "another machine \\(cores"),
    ("blas", ["mkl 2025.0 skx intel"], "another machine \\(blas"),
    ("package", "0.0.1", "stale: made by rfl_fast 0.0.1"),
])
def test_a_foreign_or_stale_policy_file_is_ignored_with_a_message(policy_cache, caplog, field,
                                                                  value, reason):
    import re

    machine = {**policy.machine_key(), field: value}
    before = shipped_first()
    with caplog.at_level(logging.WARNING, logger="rfl_fast.kernels"):
        plant(tuned(other_first(), machine=machine))
        assert shipped_first() == before
    assert re.search(reason, kernels.policy_notes()[1])
    assert any("ignored" in r.getMessage() for r in caplog.records)


def test_a_file_for_the_wrong_thread_count_under_the_right_name_is_ignored(policy_cache):
    threads = rf.get_threads()
    plant(tuned(other_first(), threads=threads + 3), threads=threads)
    assert "measured with" in kernels.policy_notes()[1]


def test_the_shipped_policy_round_trips_through_its_text():
    shipped = policy.shipped()
    again = policy.parse(policy.dumps(shipped).encode(), "again")
    assert again.kernels == shipped.kernels and again.provenance == shipped.provenance
    assert (again.margin, again.worst_round, again.portable, again.same_calls) == (
        shipped.margin, shipped.worst_round, shipped.portable, shipped.same_calls)


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70)
                     | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _paths(data, prefix=()):
    yield prefix
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _paths(v, prefix + (i,))


_VALID = tuned(["numpy", "cpp", "numba"], threads=2,
               machine={"cpu": "x", "cores": 2, "blas": [], "package": "0"})
_VALID["kernels"]["sym_logm"] = [{"at": [16, 9, 9], "order": ["cpp", "numpy"],
                                  "speedup": {"cpp": 3.5}, "parallel": "items"}]
_PATHS = list(_paths(_VALID))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_PATHS), _json, st.booleans())
def test_parse_accepts_the_format_or_raises_policy_error_fuzzed(path, value, delete):
    """A file from disk, changed anywhere to anything: ``parse`` returns a policy or raises
    ``PolicyError`` naming the field, never another exception."""
    data = copy.deepcopy(_VALID)
    target = data
    for k in path[:-1]:
        target = target[k]
    if path and delete:
        del target[path[-1]]
    elif path:
        target[path[-1]] = value
    else:
        data = value
    try:
        got = policy.parse(json.dumps(data).encode(), "fuzz")
    except policy.PolicyError as exc:
        assert str(exc).startswith("fuzz")
    else:
        assert isinstance(got, policy.Policy)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_parse_of_any_bytes_is_a_policy_or_policy_error(raw):
    with pytest.raises(policy.PolicyError):
        policy.parse(raw, "bytes")


@pytest.mark.skipif("cpp" not in rf.available_backends(), reason="C++ extension not built")
def test_a_batch_mode_in_the_policy_reaches_the_cpp_call_by_core_shape(policy_cache):
    """A point's ``parallel`` is applied to the C++ kernel and its fast lane at the nearest core
    shape, whatever the batch; the two modes give the same results."""
    at = (16, 784, 32)
    plant(tuned(["cpp", "numpy", "numba"], at=at, parallel="blas"))
    for batch in (1, 16, 500):
        name, fn = kernels.resolve(NAME, "auto", (batch,) + at[1:])
        assert name == "cpp" and fn.keywords == {"parallel": "blas"}
    assert kernels.fast_lane(NAME, "auto", at).keywords == {"parallel": "blas"}
    _, far = kernels.resolve(NAME, "auto", (16, 50, 2))  # nearer another core shape: no mode
    assert not hasattr(far, "keywords")
    x, u = (np.ascontiguousarray(a) for a in kernel_inputs(NAME, np.random.default_rng(0), 4,
                                                            784, 32))
    modes = kernels.batch_modes(NAME, (4, 784, 32))
    if modes is not None:
        np.testing.assert_allclose(modes["items"](x, u), modes["blas"](x, u), rtol=0,
                                   atol=1e-13)


def test_without_a_tuned_file_the_machine_key_is_not_even_computed(policy_cache, monkeypatch):
    """The first auto call of a process reads the cache folder's names only, when it holds no
    policy for the thread count in force (the key asks threadpoolctl for the BLAS libraries)."""
    def refuse():
        raise AssertionError("machine_key computed")

    monkeypatch.setattr(policy, "machine_key", refuse)
    tuned, note = policy.load_tuned(rf.get_threads())
    assert tuned is None and "none for" in note and str(policy_cache) in note
