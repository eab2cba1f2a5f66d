"""One validator dialect (issue 16): the argument dataclasses of algorithms, participation,
schedules and privacy declare their field constraints in ``CHECKS`` (checked once by
``rfl_fast._validation.Checked``), every constrained field refuses a wrong type, range, NaN or
bool with an error naming the class and the field, and no module outside ``_validation`` keeps
its own scalar checks."""

import ast
import dataclasses
import functools
import inspect
import math
import pathlib
import re
import sys

import numpy as np
import pytest

import rfl_fast
from rfl_fast import _validation as V
from rfl_fast import errors as E
from rfl_fast.algorithms import ALGORITHMS, PriRFed, RFedAvg, ags, base, consensus
from rfl_fast.algorithms.schedules import as_schedule
from rfl_fast.app import names
from rfl_fast.privacy import accounting, clipping, ledger, noise

#: The argument dataclasses of the registries (every algorithm, participation and schedule) and
#: the privacy settings.
ARGUMENTS = (*ALGORITHMS.values(),
             *(names.get("participation", n) for n in names.PARTICIPATIONS),
             *(names.get("schedule", n) for n in names.SCHEDULES), accounting.DPSettings)
#: Their modules and the other modules of the floors that hold argument dataclasses.
MODULES = tuple(dict.fromkeys([*(sys.modules[c.__module__] for c in ARGUMENTS), base,
                               consensus, accounting, clipping, ledger, noise]))

#: Dataclasses that are results, not arguments (nothing to check); the algorithms' server states
#: are found by running each registered algorithm (``_server_states``).
RESULTS = {"KarcherResult", "PrivacyLedger", "PrivacyBudget"}

#: Argument fields without a field constraint, and where they are checked instead.
UNCHECKED = {
    "retraction": "against the manifold in validate (inverse_pair / M.retractions)",
    "transport": "against the manifold in validate (transport_name)",
    "batch_size": "PriRFed only: an int, a fraction or one int per client (__post_init__)",
    "target": "PriRFed: the pair (eps, delta), each by _validation (__post_init__)",
    "accountant": "PriRFed: a name or a tuple of names, each by check_choice (__post_init__)",
    "dp_options": "PriRFed: the keys against DPSettings' options (__post_init__)",
    "ledger": "PriRFed: set by for_run, never passed",
}

#: Values for the fields without a default, or whose default alone is not a valid construction
#: (RFedSVRG2BBS's eta range, PriRFed's sigma or target); an algorithm's step and local steps,
#: where it has them, are set for every algorithm.
NEEDS = {
    "RFedProx": dict(mu=0.1),
    "RFedSVRG2BBS": dict(eta_min=0.01, eta_max=0.5),
    "PriRFed": dict(sigma=0.1),
    "Uniform": dict(k=2),
    "Bernoulli": dict(p=0.5),
    "Constant": dict(value=0.1),
    "Decaying": dict(a0=0.1),
    "DPSettings": dict(n_samples=10),
}


def _valid(cls):
    fields = {f.name for f in dataclasses.fields(cls)} if cls in ALGORITHMS.values() else ()
    steps = {k: v for k, v in dict(step=0.1, local_steps=2).items() if k in fields}
    return {**steps, **NEEDS.get(cls.__name__, {})}


#: A valid construction of every argument dataclass.
VALID = {cls: _valid(cls) for cls in ARGUMENTS}


@functools.cache
def _server_states():
    """The class names of the server states of every registered algorithm (0 rounds of each on
    a small kPCA problem, which every algorithm runs)."""
    from rfl_fast.data import eigengap_clients
    from rfl_fast.federation import run
    from rfl_fast.problems import KPCA

    problem = KPCA(eigengap_clients(3, 20, 6, rng=0), 2)
    return {type(run(problem, cls(**VALID[cls]), 0, metrics=False).state).__name__
            for cls in ALGORITHMS.values()}


def _argument_dataclasses():
    states = RESULTS | _server_states()
    seen = {}
    for mod in MODULES:
        for name, cls in vars(mod).items():
            if (inspect.isclass(cls) and dataclasses.is_dataclass(cls) and not name.startswith("_")
                    and cls.__module__ == mod.__name__ and name not in states):
                seen[name] = cls
    return sorted(seen.values(), key=lambda c: c.__name__)


def test_every_argument_dataclass_declares_its_constraints():
    classes = _argument_dataclasses()
    assert set(classes) == set(VALID), "register the new dataclass (or, a result, add it to RESULTS)"
    for cls in classes:
        assert issubclass(cls, V.Checked), cls
        fields = [f.name for f in dataclasses.fields(cls)]
        assert set(cls.CHECKS) <= set(fields), (cls, set(cls.CHECKS) - set(fields))
        missing = [f for f in fields if f not in cls.CHECKS and f not in UNCHECKED]
        assert not missing, (cls, missing)
        assert all(callable(c) for c in cls.CHECKS.values()), cls
        cls(**VALID[cls])


def _bad_values(check):
    """Values ``check`` must refuse (never ``None``)."""
    if isinstance(check, V.Optional):
        return _bad_values(check.inner)
    if isinstance(check, V.Int):
        out = [True, np.bool_(False), 2.5, 3.0, "3", math.nan]
        out += [check.min - 1] if check.min is not None else []
        return out + ([check.max + 1] if check.max is not None else [])
    if isinstance(check, V.Real):
        kw = check.kw
        out = [True, "1", math.nan, None if kw["allow_inf"] else math.inf]
        if kw["low"] is not None:
            out.append(kw["low"] if kw["low_open"] else kw["low"] - 1)
        if kw["high"] is not None:
            out.append(kw["high"] if kw["high_open"] else kw["high"] + 1)
        return [v for v in out if v is not None]
    if isinstance(check, V.Reals):
        kw = check.kw
        out = [True, "a", math.nan, [0.5, math.nan], [[0.5]]]
        if kw["low"] is not None:
            out.append([kw["low"] - 1])
        if kw["high"] is not None:
            out.append([kw["high"] + 1])
        return out
    if isinstance(check, V.Choice):
        return ["no-such-option", True, 1.5]
    if isinstance(check, V.Bool):
        return [1, "yes", 0.0]
    if check is as_schedule or check is getattr(ags, "_probabilities", None):
        return [True, "x", math.nan, 0, -1.0] if check is as_schedule else [True, 0.0, [1.5]]
    raise AssertionError(f"no bad values known for {check!r}")


CASES = [(cls, field, bad) for cls in sorted(VALID, key=lambda c: c.__name__)
         for field, check in cls.CHECKS.items() for bad in _bad_values(check)]


@pytest.mark.parametrize("cls, field, bad", CASES,
                         ids=[f"{c.__name__}.{f}={b!r}" for c, f, b in CASES])
def test_a_bad_field_raises_naming_it(cls, field, bad):
    with pytest.raises((TypeError, ValueError), match=rf"^{cls.__name__}: {field}: expected ") \
            as info:
        cls(**{**VALID[cls], field: bad})
    assert isinstance(info.value, E.ParameterError)              # the parts, as attributes
    assert (info.value.owner, info.value.param) == (cls.__name__, field)
    assert str(info.value) == f"{cls.__name__}: {field}: expected {info.value.expected}, " \
                              f"got {info.value.got}"


def test_parameter_errors_carry_their_parts_and_survive_pickling():
    """(issue 31) scikit-learn's InvalidParameterError is the model: the text is formatted from
    the attributes, so a reader maps an error to its own key without a regex."""
    import pickle

    with pytest.raises(E.InvalidParameterError) as info:
        RFedAvg(step=-1.0, local_steps=2)
    e = info.value
    assert isinstance(e, ValueError) and not isinstance(e, TypeError)
    assert (e.owner, e.param, e.expected, e.got) == ("RFedAvg", "step", "a value > 0", "-1")
    assert str(e) == "RFedAvg: step: expected a value > 0, got -1"
    with pytest.raises(E.ParameterTypeError) as info:
        RFedAvg(step=0.1, local_steps=2.0)
    assert isinstance(info.value, TypeError) and info.value.param == "local_steps"
    for err in (e, info.value, E.InvalidParameterError("k", "free text")):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)
        assert vars(again) == vars(err)
    moved = E.InvalidParameterError("p", "3 entries").within("Bernoulli")
    assert (moved.owner, moved.param, str(moved)) == ("Bernoulli", "p", "Bernoulli: p: 3 entries")


def test_one_rule_for_scalars():
    assert V.check_int(np.int64(3), "n") == 3 and type(V.check_int(np.int64(3), "n")) is int
    assert V.check_real(np.float32(0.5), "x") == 0.5
    for bad in (True, np.bool_(True), 2.0, "2"):
        with pytest.raises(TypeError, match=r"^n: expected an int, got "):
            V.check_int(bad, "n")
    for bad in (True, "0.5", None):
        with pytest.raises(TypeError, match=r"^x: expected a real number, got "):
            V.check_real(bad, "x")
    with pytest.raises(ValueError, match=r"^x: expected a finite number, got nan"):
        V.check_real(math.nan, "x", allow_inf=True)
    assert V.check_float(math.inf, "tau", low=0, low_open=True, allow_inf=True) == math.inf
    with pytest.raises(ValueError, match=r"^x: expected a value in \(0, 1\], got 0$"):
        V.check_float(0, "x", low=0, high=1, low_open=True)
    with pytest.raises(ValueError, match=r"^x: expected a value > 0, got -1$"):
        V.check_positive(-1, "x")
    with pytest.raises(ValueError, match=r"^o: expected one of 1, 2, got True$"):
        V.check_choice(True, "o", (1, 2))
    assert V.check_choice(np.int64(2), "o", (1, 2)) == 2


def test_privacy_functions_use_the_same_rule():
    for bad in (True, "0.5"):
        with pytest.raises(TypeError, match="delta: expected a real number"):
            accounting.gaussian_mechanism_sigma(1.0, bad)
    with pytest.raises(TypeError, match="n_samples: expected an int"):
        accounting.dp_rsgd_sigma(1.0, 1e-5, n_samples=10.0, local_steps=1)
    with pytest.raises(ValueError, match=r"delta: expected a value in \(0, 1\), got 1"):
        accounting.gaussian_mechanism_sigma(1.0, 1.0)
    with pytest.raises(ValueError, match="tau: expected a finite number, got nan"):
        clipping.clip_factors(np.ones(2), math.nan)
    with pytest.raises(ValueError, match=r"PriRFed: target: delta: expected a value in \(0, 1\)"):
        PriRFed(0.1, 2, target=(1.0, 1.5))


# ---------------------------------------------------------------------------- one place

#: Names of scalar-check helpers (the dialect lives in _validation only).
HELPER = re.compile(r"^(_?check_\w+|_(is_int|is_real|int|real|float|choice|str|bool|positive|"
                    r"nonnegative|probabilities))$")

#: The domain checks allowed outside _validation (module, function): each checks something
#: the scalar constraints cannot (arrays, manifolds, files, cross-argument bounds).
ALLOWED = {
    ("federation/driver.py", "check_point_arg"): "one point of a manifold",
    ("algorithms/base.py", "check_problem"): "a Problem with a manifold",
    ("algorithms/base.py", "_check_batch"): "batch_size against the clients' data",
    ("algorithms/ags.py", "_probabilities"): "_validation.check_reals + the size n",
    ("privacy/accounting.py", "_check_pld_batch"): "the PLD accountant's sampling",
    ("manifolds/base.py", "check_point"): "on-manifold check (public API)",
    ("manifolds/base.py", "check_tangent"): "tangent check (public API)",
    ("manifolds/base.py", "_check_point"): "per-manifold point check",
    ("manifolds/base.py", "_check_tangent"): "per-manifold tangent check",
    ("manifolds/spd.py", "_check_point"): "per-manifold point check",
    ("manifolds/spd.py", "_check_tangent"): "per-manifold tangent check",
    ("manifolds/sphere.py", "_check_point"): "per-manifold point check",
    ("manifolds/lorentz.py", "_check_point"): "per-manifold point check",
    ("manifolds/stiefel.py", "_check_point"): "per-manifold point check",
    ("manifolds/grassmann.py", "_check_point"): "per-manifold point check",
    ("manifolds/product.py", "_check_point"): "per-manifold point check",
    ("manifolds/product.py", "_check_tangent"): "per-manifold tangent check",
    ("problems/kpca.py", "_check_r"): "check_int + the bound r <= d",
    ("problems/spd_mean.py", "_check_spectrum"): "eigenvalues of a congruence",
    ("problems/_quadratic.py", "check_covariances"): "symmetric client matrices",
    ("problems/_quadratic.py", "_check_no_overflow"): "covariance overflow",
    ("problems/_clients.py", "check_sample_index"): "mini-batch indices",
    ("federation/arrival.py", "check_upload"): "arrival checks of uploads",
    ("federation/checkpoint.py", "check_problem_matches"): "a resumed problem against the run's",
    ("federation/checkpoint.py", "check_state"): "a checkpointed state against the problem",
    ("federation/checkpoint.py", "_is_int"): "a type predicate of a checkpoint's structure",
    ("federation/checkpoint.py", "_check_history"): "a checkpointed history against the run's",
    ("privacy/ledger.py", "check_rebuilt"): "a stored privacy ledger against its rebuild",
    ("privacy/ledger.py", "_check_sizes"): "a ledger's N_i against the problem's",
    ("_files.py", "_check_directory"): "a zip directory against its file's size",
    ("kernels/__init__.py", "_check_cores"): "a kernel's arguments against its declared core shapes",
    ("kernels/fused.py", "_check_transport"): "the fused steps' transport against their terms",
    ("_files.py", "_check_dtype"): "an .npy header's dtype against the one asked for",
    ("algorithms/fedavg_prox.py", "check_fused_steps"): "fused iterates that left the manifold",
    ("data/_pickle.py", "_check_nesting"): "the nesting and cycles of a parsed pickle",
    ("app/config.py", "_check_size"): "an experiment file's depth and expanded size",
    ("flower/schema.py", "check_arrays"): "arrival checks of Flower arrays",
    ("kernels/_dispatch.py", "check_choice"): "backend names (floor 0, env-driven)",
    ("kernels/_dispatch.py", "_check_backend"): "backend names",
    ("kernels/_numba/_runtime.py", "_check_layer"): "Numba threading layer",
    ("data/partition.py", "_check_index"): "client index of ClientData",
    ("app/runner.py", "_check_out"): "the results folder",
    ("linalg.py", "_positive"): "SPD results of an eigen-decomposition",
    ("app/config.py", "_int"): "_validation.check_int raising ConfigError",
    ("app/config.py", "_real"): "_validation.check_float raising ConfigError",
    ("app/config.py", "_choice"): "config names, case-insensitive, ConfigError with the list",
    ("app/config.py", "_str"): "a non-empty string in a config file",
    ("app/config.py", "_is_int"): "a type predicate picking a config form",
    ("app/config.py", "_is_real"): "a type predicate picking a config form",
    ("app/estimators.py", "_is_int"): "a type predicate picking a participation form",
}


def _helpers():
    root = pathlib.Path(rfl_fast.__file__).parent
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "_validation.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and HELPER.match(node.name):
                yield rel, node.name


def test_no_scalar_check_helpers_outside_validation():
    found = set(_helpers())
    assert found - set(ALLOWED) == set(), "use rfl_fast._validation (or allow a domain check)"
    assert set(ALLOWED) - found == set(), "a listed domain check is gone: drop it from ALLOWED"
