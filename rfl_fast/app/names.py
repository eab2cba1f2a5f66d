"""Every name an application accepts, registered once: name -> object.

The experiment files (:mod:`~rfl_fast.app.config`, hence ``rfl-fast run``), the estimators
(:mod:`~rfl_fast.app.estimators`) and the Flower run config (:mod:`rfl_fast.flower.spec`) look
names up here, and only here: no front end imports a ``module:attribute`` a user wrote. So a
name added to a table is known to all of them, and a typo is a :class:`UnknownName` listing
the known names. Names match case-insensitively; the spelling in
the table is the canonical one. Each entry names its object as ``"module:attribute"``,
imported on first use (the tables cost nothing to read), except :data:`ALGORITHMS`: the
algorithms are registered in :data:`rfl_fast.algorithms.ALGORITHMS`, which reading this table
imports.

A step size is read by :func:`build_step` alone: a number, a
:class:`~rfl_fast.algorithms.schedules.Schedule`, an experiment file's
``{schedule = "decaying", a0 = ...}`` or a Flower run config's ``{"Decaying": {"a0": ...}}``.
"""

import dataclasses
import importlib
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

from .._validation import brief
from ..errors import InvalidParameterError, ParameterError

__all__ = ["Entry", "UnknownName", "REQUIRED", "ALGORITHMS", "PARTICIPATIONS", "SCHEDULES",
           "PROBLEMS", "DATA_SOURCES", "TASKS", "TABLES", "canonical", "get", "build",
           "parameters", "build_step", "step_config"]

#: Marks a key without a default in :attr:`Entry.keys`.
REQUIRED = object()


@dataclass(frozen=True)
class Entry:
    """One registered name.

    Attributes
    ----------
    ref : str
        ``"module:attribute"`` of the object (a class, or a data source's loader).
    keys : dict
        Keys an experiment file may set, with defaults (:data:`REQUIRED`: none). Problems and
        data sources only; the others take the fields of their dataclass.
    data : tuple of str
        Data kinds: those a problem accepts, or the one a data source yields.
    obj : object, optional
        The object itself, where a derived table holds it already (:data:`ALGORITHMS`).
    """

    ref: str
    keys: dict = dataclasses.field(default_factory=dict)
    data: tuple = ()
    obj: object = None

    def load(self):
        """The registered object (imported now)."""
        if self.obj is not None:
            return self.obj
        module, attr = self.ref.split(":")
        return getattr(importlib.import_module(module), attr)


_ALG = "rfl_fast.algorithms."


class _Derived(Mapping):
    """A read-only table of :class:`Entry` derived from a lower floor's registry
    ``{name: object}`` (``"module:attribute"``), read on every use: a name registered there is
    known here, and is registered only there."""

    def __init__(self, ref):
        self.ref = ref

    def _registry(self):
        return Entry(self.ref).load()

    def __getitem__(self, name):
        obj = self._registry()[name]
        return Entry(f"{obj.__module__}:{obj.__qualname__}", obj=obj)

    def __iter__(self):
        return iter(self._registry())

    def __len__(self):
        return len(self._registry())


#: Federated algorithms: :data:`rfl_fast.algorithms.ALGORITHMS`, where they are registered.
ALGORITHMS = _Derived(_ALG[:-1] + ":ALGORITHMS")

#: Which clients answer in a round.
PARTICIPATIONS = {
    "full": Entry(_ALG + "participation:Full"),
    "uniform": Entry(_ALG + "participation:Uniform"),
    "bernoulli": Entry(_ALG + "participation:Bernoulli"),
}

#: Step-size schedules (see :func:`build_step`).
SCHEDULES = {
    "constant": Entry(_ALG + "schedules:Constant"),
    "decaying": Entry(_ALG + "schedules:Decaying"),
}

_ROWS = ("rows", "client_rows", "covariances")
#: Problems: their keys besides the data, and the data kinds they accept.
PROBLEMS = {
    "KPCA": Entry("rfl_fast.problems:KPCA", {"r": REQUIRED, "weighting": "uniform"}, _ROWS),
    "SpherePCA": Entry("rfl_fast.problems:SpherePCA", {"weighting": "uniform"}, _ROWS),
    "Brockett": Entry("rfl_fast.problems:Brockett", {"p": REQUIRED, "weighting": "uniform"},
                      ("symmetric", "spd")),
    "SPDMean": Entry("rfl_fast.problems:SPDMean", {"weighting": "uniform"}, ("spd",)),
}

_STD = {"normalize": "standardize"}
_IMAGES = {"path": None, "split": "train", "normalize": "unit", "limit": None}
_CLIENTS = {"n_clients": 10, "n_samples": 20, "d": 10}
#: Data sources of experiment files: the loader (called with the keys; generators also with
#: ``rng=seed``), its keys with defaults and the kind of data it yields. Sample rows
#: (``"rows"``: the loader returns ``(X, y)``) are split into clients by the file's partition.
DATA_SOURCES = {
    "iris": Entry("rfl_fast.data:load_iris", _STD, ("rows",)),
    "wine": Entry("rfl_fast.data:load_wine", _STD, ("rows",)),
    "breast_cancer": Entry("rfl_fast.data:load_breast_cancer", _STD, ("rows",)),
    "digits": Entry("rfl_fast.data:load_digits", _STD, ("rows",)),
    "mnist": Entry("rfl_fast.data:load_mnist", _IMAGES, ("rows",)),
    "cifar10": Entry("rfl_fast.data:load_cifar10", _IMAGES, ("rows",)),
    "npy": Entry("rfl_fast.app.sources:load_npy",
                 {"path": REQUIRED, "labels": None, "normalize": "none", "limit": None}, ("rows",)),
    "heterogeneous_gaussian": Entry("rfl_fast.data:heterogeneous_gaussian_clients",
                                    {**_CLIENTS, "n_samples": 100}, ("client_rows",)),
    "gaussian_covariances": Entry("rfl_fast.data:gaussian_covariances",
                                  {"n_clients": 10, "d": 10, "p": 100, "normalize": "mean"},
                                  ("covariances",)),
    "wishart": Entry("rfl_fast.data:wishart_clients", {**_CLIENTS, "d": 2}, ("spd",)),
    "brockett": Entry("rfl_fast.data:brockett_matrices", _CLIENTS, ("symmetric",)),
}

#: Tasks of a Flower deployment: how a SuperNode builds its one-client problem from its own
#: data (:mod:`rfl_fast.flower.tasks`); a run config names one of these, never an import path.
TASKS = {
    "synthetic_kpca": Entry("rfl_fast.flower.tasks:synthetic_kpca"),
    "kpca_from_file": Entry("rfl_fast.flower.tasks:kpca_from_file"),
}

#: Kind of name -> its table (the kind is how messages call it).
TABLES = {"algorithm": ALGORITHMS, "participation": PARTICIPATIONS, "schedule": SCHEDULES,
          "problem": PROBLEMS, "data source": DATA_SOURCES, "task": TASKS}


class UnknownName(ValueError):
    """A name that is not in its table.

    Attributes
    ----------
    kind : str
        A key of :data:`TABLES`.
    name : object
        The name asked for.
    known : tuple of str
        The table's names.
    """

    def __init__(self, kind, name, known):
        self.kind, self.name, self.known = kind, name, tuple(known)
        super().__init__(f"{kind}: unknown {brief(name)}; known: {', '.join(self.known)}")


def canonical(kind, name):
    """``name``'s spelling in the table of ``kind`` (matched case-insensitively).

    Parameters
    ----------
    kind : str
        A key of :data:`TABLES`.
    name : str

    Returns
    -------
    str

    Raises
    ------
    UnknownName
        Not registered; the message lists the known names.
    """
    table = TABLES[kind]
    if isinstance(name, str):
        if name in table:
            return name
        match = [n for n in table if n.lower() == name.lower()]
        if len(match) == 1:
            return match[0]
    raise UnknownName(kind, name, table)


def get(kind, name):
    """The object registered as ``name`` (see :func:`canonical`).

    Parameters
    ----------
    kind : str
        A key of :data:`TABLES`.
    name : str

    Returns
    -------
    object
        A class (algorithms, participation, schedules, problems) or a loader (data sources).
    """
    return TABLES[kind][canonical(kind, name)].load()


def build(kind, name, /, **params):
    """``get(kind, name)(**params)``.

    Parameters
    ----------
    kind : str
        A key of :data:`TABLES`.
    name : str
    **params
        Its arguments.

    Returns
    -------
    object
    """
    return get(kind, name)(**params)


def parameters(cls):
    """``{name: default or REQUIRED}`` of the fields of a dataclass a user may set (the
    library-set ``ledger`` of PriRFed is not one).

    Parameters
    ----------
    cls : type
        A registered dataclass (algorithm, participation, schedule).

    Returns
    -------
    dict
    """
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name == "ledger":
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = REQUIRED
    return out


def build_step(step, name="step"):
    """A step size in any of its written forms, checked.

    Parameters
    ----------
    step : float, Schedule or dict
        A number > 0, a :class:`~rfl_fast.algorithms.schedules.Schedule`,
        ``{"schedule": "decaying", "a0": 0.1, ...}`` (experiment files) or
        ``{"Decaying": {"a0": 0.1, ...}}`` (Flower run configs).
    name : str
        How messages call it (``"algorithm[0].step"``); a bad key of a schedule is reported
        as ``"<name>.<key>: ..."``, an unknown schedule as ``"<name>.schedule"``.

    Returns
    -------
    float or Schedule
        A number stays a number (algorithms take it as a constant step).

    Raises
    ------
    UnknownName
        An unknown schedule (``kind`` is ``"schedule"``).
    rfl_fast.errors.ParameterError
        A bad value, an unknown or missing key (``param``: ``"<name>.<key>"``).
    """
    schedules = importlib.import_module(_ALG + "schedules")
    if isinstance(step, schedules.Schedule):
        return step
    if not isinstance(step, dict):
        return schedules.as_schedule(step, name).value  # a number, checked > 0
    if "schedule" in step:
        kind, params = step["schedule"], {k: v for k, v in step.items() if k != "schedule"}
    elif len(step) == 1 and isinstance(next(iter(step.values())), dict):
        (kind, params), = step.items()
    else:
        raise InvalidParameterError(name, expected="a number or {schedule = ..., ...}",
                                    got=brief(step))
    cls = get("schedule", kind)
    fields = parameters(cls)
    for key in params:
        if key not in fields:
            raise InvalidParameterError(f"{name}.{key}", f"unknown key; allowed: schedule, "
                                        f"{', '.join(fields)}")
    for key, default in fields.items():
        if default is REQUIRED and key not in params:
            raise InvalidParameterError(f"{name}.{key}", "missing (required)")
    try:
        return cls(**params)
    except ParameterError as exc:  # "Decaying: a0: ..." -> "<name>.a0: ..."
        raise type(exc)(f"{name}.{exc.param}", exc.reason, None, exc.expected, exc.got) from None


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def step_config(step):
    """The experiment-file form of a step from :func:`build_step` (JSON-able).

    Parameters
    ----------
    step : float or Schedule

    Returns
    -------
    float or dict
        ``{"schedule": name, **fields}`` for a registered schedule.
    """
    if _is_number(step):
        return float(step)
    kind = next(n for n, e in SCHEDULES.items() if e.load() is type(step))
    return {"schedule": kind, **dataclasses.asdict(step)}
