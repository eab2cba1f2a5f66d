"""Experiment files for ``rfl-fast run``: reading, validating and building a run plan.

An experiment file (TOML, or YAML when PyYAML is installed) describes one run: a problem, its
data and how the data is split into clients, one or more algorithms, the participation model,
the number of rounds, the seed and the output folder::

    name = "kpca_wine"
    rounds = 100
    seed = 0
    out = "runs/kpca_wine"          # the run's folder (relative to the working directory)

    [problem]
    type = "KPCA"
    r = 3

    [data]
    source = "wine"                 # a bundled set, a generator or a local file

    [partition]
    method = "dirichlet"
    n_clients = 10
    alpha = 0.5

    [participation]
    type = "uniform"
    k = 5

    [[algorithm]]
    name = "RFedSVRG"
    step = 0.02
    local_steps = 5

    [[algorithm]]
    name = "RFedAGS"
    step = { schedule = "decaying", a0 = 0.05, beta = 1.0, dec = 50 }
    local_steps = 5

:func:`load_plan` reads and checks the whole file and builds every object (data, problem,
participation, and each algorithm fixed for the run: PriRFed's noise calibrated, its privacy
ledger planned) before anything is written, so a bad file never leaves a folder behind; the
run uses those objects (built once, checked once). Every problem found is a
:class:`ConfigError` naming the key (``data.source``, ``algorithm[1].step``) and, where there
is a list, the allowed values; a library object's error carries the argument it is about
(:class:`rfl_fast.errors.ParameterError`), which names the key. ``SCHEMA_HELP``
documents every key.
"""

import numbers
import os
import re
from dataclasses import dataclass, field

import numpy as np

from .._validation import brief, check_float, check_int
from ..errors import ParameterError
from ..federation.driver import specialize
from . import names as R
from .names import DATA_SOURCES, PARTICIPATIONS, PROBLEMS, REQUIRED

__all__ = ["ConfigError", "RunPlan", "read_config", "resolve_config", "build_plan", "load_plan",
           "PARTITIONS", "PLOT_METRICS", "algorithm_names", "SCHEMA_HELP"]


class ConfigError(ValueError):
    """A bad experiment file or command-line value.

    Attributes
    ----------
    key : str
        Dotted path of the offending key (``"algorithm[0].step"``), or ``"(file)"``.
    allowed : tuple of str or None
        The allowed values, when there is a fixed list.
    expected, got : str or None
        The constraint in words and the value as given, when a library object's
        :class:`~rfl_fast.errors.ParameterError` about this key said them.
    """

    def __init__(self, key, message, allowed=None, expected=None, got=None):
        self.key, self.message, self.expected, self.got = key, message, expected, got
        self.allowed = tuple(allowed) if allowed is not None else None
        text = message if key == "(file)" else f"{key}: {message}"
        if self.allowed:
            text += "; allowed: " + ", ".join(str(a) for a in self.allowed)
        super().__init__(text)

    @classmethod
    def at(cls, key, exc):
        """The :class:`~rfl_fast.errors.ParameterError` ``exc`` as an error at ``key``: its
        reason, constraint and value."""
        return cls(key, exc.reason, expected=exc.expected, got=exc.got)


# ------------------------------------------------------------------------------ vocabulary

# Problems, data sources, participation, schedules and algorithms: rfl_fast.app.names
_WEIGHTINGS = ("uniform", "samples")
_KIND_TEXT = {"rows": "sample rows (m, d)", "client_rows": "per-client sample rows",
              "covariances": "client covariance matrices", "spd": "SPD matrices",
              "symmetric": "symmetric matrices"}
_NORMALIZATIONS = ("standardize", "center", "unit", "none")

#: Partition method -> keys with defaults (used for sample rows only).
PARTITIONS = {
    "equal": {"n_clients": 10},
    "dirichlet": {"n_clients": 10, "alpha": 0.5},
    "quantity": {"n_clients": 10, "alpha": 1.0},
}
#: History columns that can be plotted.
PLOT_METRICS = ("grad_norm", "angle", "f_gap", "dist")
_TOP_KEYS = ("name", "rounds", "seed", "out", "metrics_every", "plots", "problem", "data",
             "partition", "participation", "algorithm")
_LABEL = re.compile(r"^[A-Za-z0-9_.+-]+$")

SCHEMA_HELP = f"""\
top level : name (str, default: the file name), rounds (int >= 0, default 100),
            seed (int >= 0, default 0), out (folder, default rfl_fast_runs/<name>),
            metrics_every (int >= 1, default 1), plots (list of {', '.join(PLOT_METRICS)})
[problem] : type = {' | '.join(PROBLEMS)}; {'; '.join(
    f"{n}: {', '.join(k for k, v in e.keys.items() if v is REQUIRED)}"
    for n, e in PROBLEMS.items() if REQUIRED in e.keys.values())}; all: weighting
[data]    : source = {' | '.join(list(DATA_SOURCES)[:7])}
            | {' | '.join(list(DATA_SOURCES)[7:])}; seed (default: the run's seed)
[partition]     : method = {' | '.join(PARTITIONS)}, n_clients, alpha (sample rows only)
[participation] : type = {' | '.join(PARTICIPATIONS)}; uniform: k; bernoulli: p
[[algorithm]]   : name = {' | '.join(list(R.ALGORITHMS)[:5])}
                  | {' | '.join(list(R.ALGORITHMS)[5:])}; label (optional) and its parameters;
                  step = number or {{ schedule = {' | '.join(f'"{s}"' for s in R.SCHEDULES)}, ... }}"""


def algorithm_names():
    """Names of the federated algorithms an experiment file may use (the registry's)."""
    return tuple(R.ALGORITHMS)


# ------------------------------------------------------------------------------ reading

#: Largest experiment file read (bytes); real ones are a few hundred.
MAX_FILE_BYTES = 1 << 20
#: Deepest nesting of tables and lists an experiment file may hold.
MAX_DEPTH = 16
#: Most values (every table, list and scalar, aliases counted each time they are used) an
#: experiment file may expand to.
MAX_VALUES = 100_000


class _TooDeep(Exception):
    """Raised by the YAML composer past :data:`MAX_DEPTH` (before recursing further)."""


def _yaml_load(text):
    """``yaml.safe_load`` whose composer stops at :data:`MAX_DEPTH` levels (PyYAML composes
    nested nodes recursively: a deeply nested file would end in ``RecursionError``)."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _TooDeep
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _check_size(raw):
    """Refuse a value deeper than :data:`MAX_DEPTH` or expanding to more than
    :data:`MAX_VALUES` values (a YAML alias counts every time it is used: nine levels of nine
    aliases are 9^9 values in 300 bytes), measured without recursion and without expanding:
    each shared table or list is sized once (memoized by identity)."""
    sizes = {}                       # id -> (values, height) of a finished container
    stack = [(raw, iter(_items(raw)), 1, 0)]
    while stack:
        obj, it, count, height = stack[-1]
        child = next(it, _items)
        if child is _items:                         # obj finished
            stack.pop()
            sizes[id(obj)] = (count, height + 1)
            if stack:
                p, pit, pc, ph = stack[-1]
                stack[-1] = (p, pit, pc + count, max(ph, height + 1))
        elif not isinstance(child, (dict, list)):
            stack[-1] = (obj, it, count + 1, max(height, 1))
        elif id(child) in sizes:
            c, h = sizes[id(child)]
            stack[-1] = (obj, it, count + c, max(height, h))
        elif any(child is o for o, _, _, _ in stack):
            raise ConfigError("(file)", "a YAML alias refers to a table holding it (a cycle)")
        elif len(stack) >= MAX_DEPTH:
            raise ConfigError("(file)", f"tables and lists nested deeper than {MAX_DEPTH} "
                              f"levels")
        else:
            stack.append((child, iter(_items(child)), 1, 0))
        if sum(frame[2] for frame in stack) > MAX_VALUES:   # the values counted so far
            raise ConfigError("(file)", f"the file expands to more than {MAX_VALUES} values "
                              f"(YAML aliases count every time they are used)")


def _items(v):
    if isinstance(v, dict):
        return list(v.keys()) + list(v.values())
    return v if isinstance(v, list) else ()


def read_config(path):
    """Read an experiment file.

    The file is untrusted input read at a bounded cost: at most :data:`MAX_FILE_BYTES`,
    :data:`MAX_DEPTH` levels of nesting (checked while parsing, never a ``RecursionError``) and
    :data:`MAX_VALUES` values once YAML aliases are expanded (measured without expanding
    them). Every error text shows values through :func:`rfl_fast._validation.brief`, bounded.

    Parameters
    ----------
    path : str or os.PathLike
        ``.toml`` (read with :mod:`tomllib`), ``.yaml``/``.yml`` (needs PyYAML).

    Returns
    -------
    raw : dict
        The file's content.
    text : str
        The file as given (written to the run folder).

    Raises
    ------
    ConfigError
        Missing, unreadable or too large a file, unknown extension, syntax error, nesting or
        expansion past the limits, missing YAML support.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".toml", ".yaml", ".yml"):
        raise ConfigError("(file)", f"{path!r}: unknown experiment file type {ext or '(none)'!r}",
                          allowed=(".toml", ".yaml", ".yml"))
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError("(file)", f"cannot read {path!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError("(file)", f"{path!r}: more than {MAX_FILE_BYTES} bytes; an experiment "
                          f"file is a few hundred")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("(file)", f"{path!r}: not UTF-8 text (byte {exc.start})") from None
    if ext == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib
            except ImportError:
                raise ConfigError("(file)", "reading TOML on Python 3.10 needs the tomli package "
                                  "(pip install tomli), or use Python >= 3.11") from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("(file)", f"{path!r} is not valid TOML: {str(exc)[:300]}") from None
        except RecursionError:      # tomllib parses nested arrays and inline tables recursively
            raise ConfigError("(file)", f"{path!r}: tables and lists nested deeper than "
                              f"{MAX_DEPTH} levels") from None
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigError("(file)", f"{path!r}: reading YAML needs PyYAML (pip install "
                              f"pyyaml); or write the experiment as TOML") from None
        try:
            raw = _yaml_load(text)
        except _TooDeep:
            raise ConfigError("(file)", f"{path!r}: tables and lists nested deeper than "
                              f"{MAX_DEPTH} levels") from None
        except yaml.YAMLError as exc:
            raise ConfigError("(file)", f"{path!r} is not valid YAML: {str(exc)[:300]}") from None
        if raw is None:
            raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("(file)", f"{path!r}: expected a mapping of keys at the top level, "
                          f"got {type(raw).__name__}")
    _check_size(raw)
    return raw, text


# ------------------------------------------------------------------------------ checking

def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _checked(check, v, key, **kw):
    """``check(v, key, **kw)`` (a :mod:`rfl_fast._validation` check) raising ``ConfigError``."""
    try:
        return check(v, key, **kw)
    except ParameterError as exc:
        raise ConfigError.at(key, exc) from None


def _int(v, key, lo=None):
    return _checked(check_int, v, key, min_value=lo)


def _real(v, key, positive=False, lo=None, hi=None):
    return _checked(check_float, v, key, low=0 if positive else lo, high=hi, low_open=positive)


def _str(v, key):
    if not isinstance(v, str) or not v:
        raise ConfigError(key, f"expected a non-empty string, got {brief(v)}")
    return v


def _choice(v, key, choices):
    if not isinstance(v, str) or v not in choices:
        # accept a case-insensitive match, reported in its canonical spelling
        if isinstance(v, str):
            match = [c for c in choices if c.lower() == v.lower()]
            if len(match) == 1:
                return match[0]
        raise ConfigError(key, f"got {brief(v)}", allowed=choices)
    return v


def _name(kind, v, key):
    """``v``'s canonical spelling in the registry's table of ``kind``."""
    try:
        return R.canonical(kind, v)
    except R.UnknownName as exc:
        raise ConfigError(key, f"got {brief(v)}", allowed=exc.known) from None


def _table(raw, key, required=False):
    if key not in raw or raw[key] is None:
        if required:
            raise ConfigError(key, f"missing; add a [{key}] table")
        return {}
    value = raw[key]
    if not isinstance(value, dict):
        raise ConfigError(key, f"expected a table (mapping of keys), got {type(value).__name__}")
    return value


def _fill(tbl, prefix, spec, skip=()):
    """Defaults of ``spec`` filled into ``tbl``; unknown keys and missing required keys are
    errors."""
    unknown = [k for k in tbl if k not in spec and k not in skip]
    if unknown:
        raise ConfigError(f"{prefix}.{unknown[0]}", "unknown key",
                          allowed=tuple(spec) + tuple(skip))
    out = {}
    for k, default in spec.items():
        if k in tbl and tbl[k] is not None:
            out[k] = tbl[k]
        elif default is REQUIRED:
            raise ConfigError(f"{prefix}.{k}", "missing (required)")
        else:
            out[k] = default
    return out


def _step(v, key):
    """A step: a number > 0 or ``{schedule = ..., ...}`` (resolved to a plain dict)."""
    try:
        return R.step_config(R.build_step(v, key))
    except R.UnknownName as exc:
        raise ConfigError(f"{key}.schedule", f"got {brief(exc.name)}", allowed=exc.known) from None
    except ParameterError as exc:
        raise ConfigError.at(exc.param, exc) from None
    except (TypeError, ValueError) as exc:       # none known; still bad input, at the step
        raise ConfigError(key, str(exc)) from None


def _plain(v):
    """A parameter value for an algorithm: lists become tuples (frozen dataclasses)."""
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    return v


def resolve_config(raw, *, name=None, overrides=None):
    """Check an experiment dict and fill in every default.

    Parameters
    ----------
    raw : dict
        As read by :func:`read_config` (or written in Python).
    name : str, optional
        Default run name (the file's stem).
    overrides : dict, optional
        Top-level values that replace the file's (``out``, ``rounds``, ``seed``), e.g. from
        the command line.

    Returns
    -------
    dict
        The resolved configuration (JSON-able): every key present, defaults filled in.

    Raises
    ------
    ConfigError
        The first problem found, naming its key.
    """
    if not isinstance(raw, dict):
        raise ConfigError("(file)", f"expected a mapping, got {type(raw).__name__}")
    raw = dict(raw)
    for k, v in (overrides or {}).items():
        if v is not None:
            raw[k] = v
    unknown = [k for k in raw if k not in _TOP_KEYS]
    if unknown:
        raise ConfigError(unknown[0], "unknown top-level key (tables must be written as "
                          "[problem], [data], ...)", allowed=_TOP_KEYS)
    res = {}
    res["name"] = _str(raw.get("name", name or "run"), "name")
    if not _LABEL.match(res["name"]):
        raise ConfigError("name", f"{brief(res['name'])}: use letters, digits and _ . + - only")
    res["rounds"] = _int(raw.get("rounds", 100), "rounds", lo=0)
    res["seed"] = _int(raw.get("seed", 0), "seed", lo=0)
    res["out"] = _str(raw.get("out", os.path.join("rfl_fast_runs", res["name"])), "out")
    res["metrics_every"] = _int(raw.get("metrics_every", 1), "metrics_every", lo=1)
    plots = raw.get("plots", ["grad_norm", "angle", "f_gap"])
    if not isinstance(plots, list):
        raise ConfigError("plots", f"expected a list of metric names, got {brief(plots)}",
                          allowed=PLOT_METRICS)
    res["plots"] = [_choice(p, f"plots[{i}]", PLOT_METRICS) for i, p in enumerate(plots)]

    # problem
    ptbl = _table(raw, "problem", required=True)
    ptype = _name("problem", ptbl.get("type"), "problem.type")
    kinds = PROBLEMS[ptype].data
    prob = {"type": ptype, **_fill(ptbl, "problem", PROBLEMS[ptype].keys, skip=("type",))}
    for k in ("r", "p"):
        if k in prob:
            prob[k] = _int(prob[k], f"problem.{k}", lo=1)
    prob["weighting"] = _choice(prob["weighting"], "problem.weighting", _WEIGHTINGS)
    res["problem"] = prob

    # data
    dtbl = _table(raw, "data", required=True)
    source = _name("data source", dtbl.get("source"), "data.source")
    (kind,) = DATA_SOURCES[source].data
    data = {"source": source, **_fill(dtbl, "data", {**DATA_SOURCES[source].keys,
                                                     "seed": res["seed"]}, skip=("source",))}
    data["seed"] = _int(data["seed"], "data.seed", lo=0)
    for k in ("n_clients", "n_samples", "d", "p"):
        if k in data:
            data[k] = _int(data[k], f"data.{k}", lo=1)
    if data.get("limit") is not None:
        data["limit"] = _int(data["limit"], "data.limit", lo=1)
    for k in ("path", "labels"):
        if data.get(k) is not None:
            data[k] = _str(data[k], f"data.{k}")
    if "normalize" in data:
        allowed = ("sum", "mean") if source == "gaussian_covariances" else _NORMALIZATIONS
        data["normalize"] = _choice(data["normalize"], "data.normalize", allowed)
    if "split" in data:
        data["split"] = _choice(data["split"], "data.split", ("train", "test", "all"))
    if kind not in kinds:
        fitting = [s for s, e in DATA_SOURCES.items() if e.data[0] in kinds]
        raise ConfigError("data.source", f"{brief(source)} gives {_KIND_TEXT[kind]}, "
                          f"which problem.type = {brief(ptype)} cannot use", allowed=fitting)
    data["kind"] = kind
    res["data"] = data

    # partition (sample rows only)
    if kind == "rows":
        stbl = _table(raw, "partition")
        method = _choice(stbl.get("method", "equal"), "partition.method", tuple(PARTITIONS))
        part = {"method": method, **_fill(stbl, "partition", PARTITIONS[method],
                                          skip=("method",))}
        part["n_clients"] = _int(part["n_clients"], "partition.n_clients", lo=1)
        if "alpha" in part:
            part["alpha"] = _real(part["alpha"], "partition.alpha", positive=True)
        res["partition"] = part
    else:
        if raw.get("partition"):
            raise ConfigError("partition", f"not used with data.source = {brief(source)} (the data "
                              f"comes split into data.n_clients clients); remove the "
                              f"[partition] table")
        res["partition"] = None

    # participation
    qtbl = _table(raw, "participation")
    qtype = _name("participation", qtbl.get("type", "full"), "participation.type")
    part = {"type": qtype, **_fill(qtbl, "participation",
                                   R.parameters(R.get("participation", qtype)), skip=("type",))}
    if qtype == "uniform":
        part["k"] = _int(part["k"], "participation.k", lo=1)
    if qtype == "bernoulli":
        p = part["p"]
        if isinstance(p, list):
            part["p"] = [_real(v, f"participation.p[{i}]", lo=0.0, hi=1.0)
                         for i, v in enumerate(p)]
        else:
            part["p"] = _real(p, "participation.p", lo=0.0, hi=1.0)
    res["participation"] = part

    # algorithms
    algs = raw.get("algorithm")
    if algs is None:
        raise ConfigError("algorithm", "missing; add one [[algorithm]] table per algorithm "
                          "(name = ..., step = ..., local_steps = ...)", allowed=algorithm_names())
    if isinstance(algs, dict):
        algs = [algs]
    if not isinstance(algs, list) or not algs:
        raise ConfigError("algorithm", "expected one or more [[algorithm]] tables")
    resolved, labels = [], set()
    for i, a in enumerate(algs):
        key = f"algorithm[{i}]"
        if not isinstance(a, dict):
            raise ConfigError(key, f"expected a table, got {type(a).__name__}")
        aname = _name("algorithm", a.get("name"), f"{key}.name")
        fields = R.parameters(R.get("algorithm", aname))
        params = _fill(a, key, fields, skip=("name", "label"))
        if "step" in params and params["step"] is not None:
            params["step"] = _step(params["step"], f"{key}.step")
        label = a.get("label")
        if label is None:
            label, j = aname, 2
            while label in labels:
                label, j = f"{aname}-{j}", j + 1
        label = _str(label, f"{key}.label")
        if not _LABEL.match(label):
            raise ConfigError(f"{key}.label",
                              f"{brief(label)}: use letters, digits and _ . + - only")
        if label in labels:
            raise ConfigError(f"{key}.label", f"{brief(label)} is used twice; labels name the "
                              f"result files and must be unique")
        labels.add(label)
        resolved.append({"name": aname, "label": label, **params})
    res["algorithm"] = resolved
    return res


# ------------------------------------------------------------------------------ building

@dataclass
class RunPlan:
    """Everything a run needs, built and checked.

    Attributes
    ----------
    config : dict
        The resolved configuration (:func:`resolve_config`).
    problem : rfl_fast.problems.Problem
    algorithms : list of (str, FederatedAlgorithm)
        ``(label, algorithm)`` in file order, each fixed for the run
        (:func:`rfl_fast.federation.driver.specialize`), which runs it as it is.
    participation : rfl_fast.federation.Participation
    data_info : dict
        Description of the loaded data (clients, sizes, shape).
    text : str or None
        The experiment file as given.
    source : str or None
        Its path.
    """

    config: dict
    problem: object
    algorithms: list
    participation: object
    data_info: dict = field(default_factory=dict)
    text: str = None
    source: str = None

    @property
    def out(self):
        return self.config["out"]

    @property
    def rounds(self):
        return self.config["rounds"]

    @property
    def seed(self):
        return self.config["seed"]


def _config_error(exc, prefix, known):
    """A library object's error as a :class:`ConfigError`: at ``prefix.<param>`` with its
    reason when it is about one of the ``known`` keys (its attributes say so: a
    :class:`~rfl_fast.errors.ParameterError`), else at ``prefix`` with its whole text."""
    if isinstance(exc, ParameterError) and exc.param in known:
        return ConfigError.at(f"{prefix}.{exc.param}", exc)
    return ConfigError(prefix, str(exc))


def _build_data(cfg):
    """Client data for the problem: ``(payload, form, info)`` with ``form`` one of
    ``"clients"`` (list/stack/ClientData of per-client samples) or ``"covariances"``."""
    from .. import data as D

    data, seed = cfg["data"], cfg["data"]["seed"]
    entry = DATA_SOURCES[data["source"]]
    load = entry.load()
    params = {k: data[k] for k in entry.keys if k != "limit"}
    if data["kind"] != "rows":  # generated already split into clients
        payload = load(**params, rng=seed)
        form = "covariances" if data["kind"] == "covariances" else "clients"
        return payload, form, {"shape": list(payload.shape)}
    X, y = load(**params)
    if data.get("limit") is not None:
        X = X[:data["limit"]]
        y = None if y is None else y[:data["limit"]]
    part = cfg["partition"]
    n = part["n_clients"]
    if n > X.shape[0]:
        raise ConfigError("partition.n_clients", f"{n} clients but the data has only "
                          f"{X.shape[0]} samples")
    if part["method"] == "dirichlet":
        if y is None:
            raise ConfigError("partition.method", "'dirichlet' splits by label but the data "
                              "has no labels", allowed=("equal", "quantity"))
        cd = D.split_dirichlet(X, np.asarray(y).astype(np.int64), n, alpha=part["alpha"],
                               rng=seed)
    elif part["method"] == "quantity":
        cd = D.split_quantity(X, n, alpha=part["alpha"], rng=seed)
    else:
        cd = D.split_equal(X, n, rng=seed)
    info = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
            "client_sizes": cd.sizes.tolist()}
    return cd, "clients", info


def _build_problem(cfg, payload, form):
    p = cfg["problem"]
    cls = R.get("problem", p["type"])
    params = {k: p[k] for k in PROBLEMS[p["type"]].keys}
    if form == "covariances":
        if p["weighting"] != "uniform":
            raise ConfigError("problem.weighting", "covariance data has one 'sample' per "
                              "client; only 'uniform' applies", allowed=("uniform",))
        return cls.from_covariances(payload, **params)
    return cls(payload, **params)


def _build_algorithm(spec):
    params = {k: _plain(v) for k, v in spec.items() if k not in ("name", "label")}
    if params.get("step") is not None:
        params["step"] = R.build_step(params["step"])
    return R.build("algorithm", spec["name"], **params)


def _build_participation(spec):
    return R.build("participation", spec["type"], **{k: v for k, v in spec.items()
                                                      if k != "type"})


def build_plan(cfg, *, text=None, source=None):
    """Build and check every object of a resolved configuration (nothing is written).

    Parameters
    ----------
    cfg : dict
        From :func:`resolve_config`.
    text, source : str, optional
        The experiment file as given and its path (kept in the plan).

    Returns
    -------
    RunPlan

    Raises
    ------
    ConfigError
        Data that cannot be loaded, a problem or algorithm that rejects its parameters, a
        participation model or algorithm that does not fit the problem.
    """
    try:
        payload, form, info = _build_data(cfg)
    except ConfigError:
        raise
    except OSError as exc:
        raise ConfigError("data.path" if "path" in cfg["data"] else "data", str(exc)) from None
    except (ValueError, TypeError, ImportError) as exc:
        raise _config_error(exc, "data", cfg["data"]) from None
    try:
        problem = _build_problem(cfg, payload, form)
    except ConfigError:
        raise
    except (ValueError, TypeError) as exc:
        raise _config_error(exc, "problem", cfg["problem"]) from None
    info["n_clients"] = int(problem.n_clients)
    try:
        participation = _build_participation(cfg["participation"])
        participation.validate(problem.n_clients)
    except (ValueError, TypeError) as exc:
        raise _config_error(exc, "participation", cfg["participation"]) from None
    algorithms = []
    for i, spec in enumerate(cfg["algorithm"]):
        try:         # the engine's own set-up, done once here: the run uses what it returns
            alg = specialize(problem, _build_algorithm(spec), participation, cfg["rounds"])
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise _config_error(exc, f"algorithm[{i}]", spec) from None
        algorithms.append((spec["label"], alg))
    return RunPlan(config=cfg, problem=problem, algorithms=algorithms,
                   participation=participation, data_info=info, text=text, source=source)


def load_plan(path, overrides=None):
    """Read, check and build an experiment file: :func:`read_config`, :func:`resolve_config`,
    :func:`build_plan`.

    Parameters
    ----------
    path : str or os.PathLike
    overrides : dict, optional
        Top-level values replacing the file's (``out``, ``rounds``, ``seed``).

    Returns
    -------
    RunPlan
    """
    raw, text = read_config(path)
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", stem) or "run"
    cfg = resolve_config(raw, name=name, overrides=overrides)
    return build_plan(cfg, text=text, source=os.fspath(path))
