"""Reproductions of the source papers' experiments E1..E8, one module per experiment (the
papers: :data:`PAPERS`, named by authors and year as :data:`CITES`; which experiment
reproduces which: :data:`SOURCES`).

Every experiment module exposes ``run(small=False, seed=0, out=None) -> dict`` and
``table_rows(result) -> list`` (its results table's rows ``(setting, quantity, ours, paper,
verdict)``, which :mod:`rfl_fast.app.experiments.tables` lays out):

* ``small=True`` is a fast version (seconds) with the same qualitative outcome, used by the
  tests; ``small=False`` the papers' setting (or the largest that runs in minutes; the result
  says which in ``settings`` and ``notes``).
* ``seed`` roots every random draw (data splits, initial points, participation, mini-batches).
* ``out`` (a folder, created if needed): the results are written there as ``<id>.json`` plus
  one CSV per run history (``<id>_<label>.csv``), listed in the result's ``files``.

The returned dict (JSON-able) has the keys ``experiment``, ``title``, ``source``, ``small``,
``seed``, ``settings``, ``results``, ``paper`` (the papers' reported numbers or claims, for a
side-by-side reading), ``notes`` (deviations, skipped parts with their reason),
``elapsed_s`` (wall seconds), ``cpu_s`` (the process's CPU seconds) and ``runs``
(``declared``: every ``<setting>_<algorithm>`` run, ``skipped``).

Nothing is dropped silently: every run is declared before it starts, and a declared run that
produced no history makes the experiment raise
:class:`~rfl_fast.app.experiments._common.ExperimentError` (``rfl-fast reproduce`` exits 1 with
the reason), unless it is a documented skip of missing local data (MNIST files).
``run_experiment(..., progress=fn)`` reports each finished run; :func:`expected_seconds`
gives the measured run time (``tests/test_experiments.py`` fails when a small form's time is
off by more than 2x); :mod:`rfl_fast.app.experiments.tables` turns a result into the
results table (ours next to the paper's, with verdicts; ``reproduce ID --table``, ``ID.md``).

The registry maps ids to module names and imports a module only when it is asked for, so an
experiment whose module is missing is a clear error at call time, never an import-time crash::

    from rfl_fast.app.experiments import run_experiment
    res = run_experiment("E3", small=True, out="results/")
"""

import importlib

__all__ = ["EXPERIMENTS", "PAPERS", "CITES", "SOURCES", "run_experiment", "get_experiment",
           "available_experiments", "expected_seconds"]

#: Experiment id -> module of :mod:`rfl_fast.app.experiments` (imported lazily).
EXPERIMENTS = {
    "E1": "e1",   # Li & Ma 2022, Table 1: tangent-space vs Karcher consensus on the sphere
    "E2": "e2",   # Li & Ma 2022, Fig. 2-4: synthetic PCA / kPCA, RFedSVRG vs RFedAvg, RFedProx
    "E3": "e3",   # Li & Ma 2022, Fig. 5-7, Xiao et al. 2024, Fig. 3-6: kPCA on real data
    "E4": "e4",   # Xiao et al. 2024, Fig. 1-2: SPD Karcher mean (RFedSVRG-2BB/2BBS)
    "E5": "e5",   # Huang et al. 2025, Table 1, Fig. 2: RFedAGS on sphere, SPD, Brockett
    "E6": "e6",   # Huang et al. 2025, Fig. 4-7: arbitrary participation, AGS-AP vs AGS-RS
    "E7": "e7",   # Huang et al. 2024: differential privacy (PriRFed)
    "E8": "e8",   # Zhang et al. 2024 poster: kPCA comparisons, batch size (RFedProj)
}

#: The five source papers, keyed by their number in ``docs/references`` (the only place the
#: numbers are shown; everything a user reads names a paper by :data:`CITES`).
PAPERS = {
    "000": "Zhang, Hu, So, Johansson: Nonconvex Federated Learning on Compact Smooth "
           "Submanifolds With Heterogeneous Data (NeurIPS 2024, poster)",
    "001": "Li, Ma: Federated Learning on Riemannian Manifolds",
    "002": "Huang, Huang, Jawanpuria, Mishra: Federated Learning on Riemannian Manifolds with "
           "Differential Privacy (talk, 2024)",
    "003": "Huang, Huang, Jawanpuria, Mishra: Riemannian Federated Learning via Averaging "
           "Gradient Streams with Partial Participation (talk, 2025)",
    "004": "Xiao, Yan, Wang: Riemannian SVRG Using Barzilai-Borwein Method as Second-Order "
           "Approximation for Federated Learning (Symmetry 16(9):1101, 2024)",
}

#: How results, tables, plots and notes name each paper: authors and year.
CITES = {"000": "Zhang et al. 2024", "001": "Li & Ma 2022", "002": "Huang et al. 2024",
         "003": "Huang et al. 2025", "004": "Xiao et al. 2024"}

#: Experiment id -> the papers (keys of :data:`PAPERS`) whose results it reproduces.
SOURCES = {"E1": ("001",), "E2": ("001",), "E3": ("001", "004"), "E4": ("004",),
           "E5": ("003",), "E6": ("003",), "E7": ("002",), "E8": ("000",)}


def _normalize_id(exp_id):
    if not isinstance(exp_id, str):
        raise TypeError(f"experiment id: expected a string such as 'E1', got "
                        f"{type(exp_id).__name__}")
    key = exp_id.strip().upper()
    if key not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {exp_id!r}; known: {', '.join(EXPERIMENTS)}")
    return key


def get_experiment(exp_id):
    """The module of experiment ``exp_id`` (``"E1"`` .. ``"E8"``, case-insensitive).

    Parameters
    ----------
    exp_id : str

    Returns
    -------
    module
        With ``run(small=False, seed=0, out=None) -> dict`` and ``table_rows(result)``.

    Raises
    ------
    ValueError
        Unknown id.
    ImportError
        The experiment's module is not (yet) part of this installation, or lacks one of the
        two; the message names it.
    """
    key = _normalize_id(exp_id)
    name = f"{__name__}.{EXPERIMENTS[key]}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ImportError(f"experiment {key} is registered but its module {name} is not "
                          f"available in this installation") from None
    for fn, signature in (("run", "run(small, seed, out)"), ("table_rows", "table_rows(result)")):
        if not callable(getattr(module, fn, None)):
            raise ImportError(f"experiment {key}: module {name} has no {signature}")
    return module


def available_experiments():
    """Ids whose module imports, in registry order (imports every module once)."""
    ids = []
    for key in EXPERIMENTS:
        try:
            get_experiment(key)
        except ImportError:
            continue
        ids.append(key)
    return ids


def run_experiment(exp_id, small=False, seed=0, out=None, progress=None):
    """Run experiment ``exp_id`` and return its results dict (see the module docstring).

    Parameters
    ----------
    exp_id : str
        ``"E1"`` .. ``"E8"`` (case-insensitive).
    small : bool
        Fast version (the tests' size) instead of the papers' setting.
    seed : int
        Root seed (>= 0).
    out : str or os.PathLike, optional
        Folder for ``<id>.json`` and the per-run history CSVs.
    progress : callable, optional
        ``progress(exp_id, done, total, label, elapsed_s)`` after each declared run.

    Returns
    -------
    dict
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed!r}")
    from ._common import set_progress
    module = get_experiment(exp_id)
    old = set_progress(progress)
    try:
        return module.run(small=bool(small), seed=seed, out=out)
    finally:
        set_progress(old)


def expected_seconds(exp_id, small=False):
    """Measured time of ``exp_id``'s runs (seconds, seed 0, idle 2-core machine), or ``None``.

    The small forms' times are checked by ``tests/test_experiments.py``, which fails when one
    is off by more than 2x from the CPU time the test measures; the full forms' times were
    measured once (``EXPECTED_S`` of each module says when) and are not re-timed by the tests.

    Parameters
    ----------
    exp_id : str
        ``"E1"`` .. ``"E8"`` (case-insensitive).
    small : bool
        The fast version's time instead of the full one.

    Returns
    -------
    float or None
    """
    t = getattr(get_experiment(exp_id), "EXPECTED_S", None)
    return None if t is None else t[0 if small else 1]     # a full time may be None too
