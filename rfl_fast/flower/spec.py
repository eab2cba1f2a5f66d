"""The run configuration of a federation: what the server and every client agree on.

Flower hands the same *run config* (``[tool.flwr.app.config]`` of the app, overridden by
``flwr run --run-config``) to the ServerApp and to every ClientApp, so both sides rebuild the
same algorithm, task and seed from it. Its author is whoever starts the run, and a SuperNode
does not trust it: it names algorithms, participation models and tasks only by their
registered names (:mod:`rfl_fast.app.names`, or names the app's own code registers with
``client_app(algorithms=..., tasks=...)``), never by an import path -- nothing is imported or
called because a run config or a message says so -- and every key is read through its
declared type and bounds (:data:`RUN_CONFIG`, with :class:`~rfl_fast.flower.schema.Field`);
JSON values are at most :data:`MAX_JSON` characters and :data:`MAX_JSON_DEPTH` levels. Keys
(values are TOML scalars; structured values are JSON strings):

=====================  ===========================================================  ==========
key                    meaning                                                      default
=====================  ===========================================================  ==========
``algorithm``          a name of :data:`rfl_fast.app.names.ALGORITHMS`             required
                       (``"RFedSVRG"``) or of the app's own ``algorithms``
``algorithm-kwargs``   JSON object of its arguments; a step schedule is            ``"{}"``
                       ``{"Decaying": {"a0": 0.1}}`` or ``{"Constant": {...}}``
``participation``      ``"Full"``, ``"Uniform(3)"``, ``"Bernoulli(0.5)"`` or JSON    ``"Full"``
                       ``{"Bernoulli": {"p": [...]}}``
``rounds``             communication rounds                                         required
``seed``               root seed (the same as ``rfl_fast.federation.run``'s)        ``0``
``num-clients``        n; client ids ``0..n-1`` come from each SuperNode's          required
                       ``partition-id``
``weighting``          ``"uniform"`` or ``"samples"`` (client weights ``w_i``)      ``"uniform"``
``task``               a name of :data:`rfl_fast.app.names.TASKS`                   required
                       (``"kpca_from_file"``) or of the app's own ``tasks``;
                       it builds a client's local problem (:mod:`.tasks`)
``task-kwargs``        JSON object passed to the task                               ``"{}"``
``timeout``            seconds the server waits for the replies of one exchange    ``120``
``node-wait``          seconds the server waits for all n SuperNodes at start       ``120``
``atol``               tolerance of the on-manifold / tangent arrival checks        ``1e-7``
``output-dir``         where the ServerApp writes ``result.npz``/``history.json``   ``""``
``server-metrics``     evaluate ``problem.metrics`` on the server with the task's   ``false``
                       ``full`` problem (demos and tests: the server has no data)
``fault``              fault injection for tests: ``"drop:3@2,3;corrupt:1@3"``      ``""``
                       (client 3 fails in rounds 2 and 3, client 1 uploads NaN in
                       round 3; ``offmanifold:i@t`` uploads points off the manifold
                       / vectors off the tangent space; rounds 1-based)
=====================  ===========================================================  ==========
"""

import json
import re
from dataclasses import dataclass, field

from ..algorithms.participation import Participation
from ..app import names
from .._validation import brief
from .schema import MAX_CLIENTS, MAX_ROUNDS, NAME, Field, Refused

__all__ = ["FederationConfig", "AppNames", "build_algorithm", "build_participation",
           "parse_faults", "APP_CONFIG_DEFAULTS", "RUN_CONFIG", "MAX_JSON", "MAX_JSON_DEPTH"]

#: Defaults of the run config keys (those marked required are given placeholders).
APP_CONFIG_DEFAULTS = {
    "algorithm": "RFedAvg",
    "algorithm-kwargs": '{"step": 0.1, "local_steps": 3}',
    "participation": "Full",
    "rounds": 3,
    "seed": 0,
    "num-clients": 3,
    "weighting": "uniform",
    "task": "synthetic_kpca",
    "task-kwargs": '{"n_clients": 3, "samples": 40, "d": 6, "r": 2, "seed": 1}',
    "timeout": 120.0,
    "node-wait": 120.0,
    "atol": 1e-7,
    "output-dir": "",
    "server-metrics": False,
    "fault": "",
}

#: Longest JSON value of a run config, and its deepest nesting.
MAX_JSON, MAX_JSON_DEPTH = 65536, 8
_TEXT = Field(str, max_len=MAX_JSON)
_NAME = Field(str, pattern=NAME, hint="a registered name: a run config names algorithms and "
              "tasks of rfl_fast.app.names or of the app's own code, never an import path")
#: Every run config key: its type and bounds (a missing key takes its default).
RUN_CONFIG = {
    "algorithm": _NAME,
    "algorithm-kwargs": _TEXT,
    "participation": Field(str, max_len=MAX_JSON),
    "rounds": Field(int, 0, MAX_ROUNDS),
    "seed": Field(int, 0, 2**63 - 1),
    "num-clients": Field(int, 1, MAX_CLIENTS),
    "weighting": Field(str, choices=("uniform", "samples")),
    "task": _NAME,
    "task-kwargs": _TEXT,
    "timeout": Field(float, 1e-3, 1e7),
    "node-wait": Field(float, 0.0, 1e7),
    "atol": Field(float, 0.0, 1.0),
    "output-dir": Field(str, max_len=4096),
    "server-metrics": Field(bool),
    "fault": Field(str, max_len=4096),
}
_REQUIRED = ("algorithm", "rounds", "num-clients", "task")


def _json_depth_ok(text):
    """Whether the brackets of JSON ``text`` nest at most :data:`MAX_JSON_DEPTH` deep (counted
    outside strings, before parsing: the parser recurses)."""
    depth, in_str, escaped = 0, False, False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def json_object(text, key):
    """The JSON object ``text`` (a run config value) as a dict with string keys; ``ValueError``
    naming ``key`` when it is not one (bounded in size and depth)."""
    if isinstance(text, dict):
        return dict(text)
    if not isinstance(text, str) or len(text) > MAX_JSON or not _json_depth_ok(text):
        raise ValueError(f"run config {key}: expected a JSON object of at most {MAX_JSON} "
                         f"characters and {MAX_JSON_DEPTH} levels, got {brief(text)}")
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise ValueError(f"run config {key}: not JSON ({str(exc)[:120]})") from None
    if not isinstance(value, dict):
        raise ValueError(f"run config {key}: expected a JSON object, got "
                         f"{type(value).__name__}")
    return value


class AppNames:
    """The names a run config may use: :mod:`rfl_fast.app.names`' registry plus what the app's
    own code registers (the Flower app module, ``client_app(algorithms=..., tasks=...)``:
    code a SuperNode installed or verified, unlike a run config).

    Parameters
    ----------
    algorithms : dict of str to type, optional
        Extra algorithm classes by name (subclasses of ``FederatedAlgorithm``).
    tasks : dict of str to callable, optional
        Extra tasks by name (:mod:`.tasks`).

    A name is registered once: an extra name that is already a built-in one raises.
    """

    def __init__(self, algorithms=None, tasks=None):
        self.extra = {"algorithm": dict(algorithms or {}), "task": dict(tasks or {})}
        for kind, table in self.extra.items():
            for name in table:
                if not (isinstance(name, str) and NAME.fullmatch(name)):
                    raise ValueError(f"{kind} name {brief(name)}: use letters, digits and _")
                try:
                    names.canonical(kind, name)
                except names.UnknownName:
                    continue
                raise ValueError(f"{kind} {name!r} is already a registered name of "
                                 f"rfl_fast.app.names; choose another")

    def get(self, kind, name):
        """The object registered as ``name`` of ``kind`` (``"algorithm"`` or ``"task"``).

        Raises
        ------
        ValueError
            Not a plain name (an import path, say) or not registered; the message lists the
            known names.
        """
        if not (isinstance(name, str) and NAME.fullmatch(name)):
            raise ValueError(f"{kind}: {brief(name)} is not a registered name; a run config "
                             f"names {kind}s of rfl_fast.app.names or of the app's own code "
                             f"(client_app({kind}s=...)), never an import path")
        if name in self.extra[kind]:
            return self.extra[kind][name]
        try:
            return names.get(kind, name)
        except names.UnknownName as exc:
            known = (*exc.known, *self.extra[kind])
            raise ValueError(f"{kind}: unknown {brief(name)}; known: {', '.join(known)}") \
                from None


_BUILTIN = AppNames()


def build_algorithm(name, kwargs, app_names=None):
    """The algorithm registered as ``name`` built with ``kwargs`` (dict, or its JSON text);
    a ``step`` is read by :func:`rfl_fast.app.names.build_step`.

    Parameters
    ----------
    name : str
        A registered name (:class:`AppNames`); never an import path.
    kwargs : dict or str
    app_names : AppNames, optional
        The app's extra names (default: the registry's only).
    """
    cls = (app_names or _BUILTIN).get("algorithm", name)
    kwargs = json_object(kwargs, "algorithm-kwargs")
    if kwargs.get("step") is not None:
        kwargs = {**kwargs, "step": names.build_step(kwargs["step"])}
    return cls(**kwargs)


_CALL = re.compile(r"\s*([A-Za-z]+)\s*(?:\((.{0,4096})\))?\s*")


def build_participation(spec):
    """``"Full"``, ``"Uniform(3)"``, ``"Bernoulli(0.5)"`` or a JSON object
    ``{"Uniform": {"k": 3}}`` / ``{"Bernoulli": {"p": [...]}}`` (names of
    :data:`rfl_fast.app.names.PARTICIPATIONS`, any case)."""
    if isinstance(spec, Participation):
        return spec
    if isinstance(spec, str) and spec.strip().startswith("{"):
        spec = json_object(spec, "participation")
    if isinstance(spec, dict):
        if len(spec) != 1 or not isinstance(next(iter(spec.values())), dict):
            raise ValueError(f"participation: expected {{name: {{arguments}}}}, got "
                             f"{brief(spec)}")
        (name, args), = spec.items()
        return names.build("participation", name, **args)
    m = _CALL.fullmatch(spec) if isinstance(spec, str) else None
    if m is None:
        raise ValueError(f"participation: expected 'Full', 'Uniform(k)', 'Bernoulli(p)' or "
                         f"JSON, got {brief(spec)}")
    name, arg = m.group(1), m.group(2)
    cls = names.get("participation", name)
    if arg:
        value = json_object(f'{{"a": {arg}}}', "participation")["a"]
        return cls(value)
    if names.REQUIRED in names.parameters(cls).values():
        raise ValueError(f"participation: {name} needs an argument, e.g. {name}(3)")
    return cls()


_FAULT = re.compile(r"(drop|corrupt|offmanifold):(\d{1,9})@([\d,\s]{1,200})")


def parse_faults(text):
    """``"drop:3@2,3;corrupt:1@3"`` -> ``{("drop", 3): {2, 3}, ("corrupt", 1): {3}}``."""
    out = {}
    for part in filter(None, (p.strip() for p in str(text or "").split(";"))):
        m = _FAULT.fullmatch(part)
        if m is None:
            raise ValueError(f"fault: cannot read {brief(part)}; expected "
                             f"'drop:<client>@<rounds>' or 'corrupt:<client>@<rounds>' (rounds "
                             f"1-based, comma separated), joined by ';'")
        rounds = {int(r) for r in m.group(3).split(",") if r.strip()}
        out.setdefault((m.group(1), int(m.group(2))), set()).update(rounds)
    return out


def _read(cfg, key):
    """Run config ``key`` through its :data:`RUN_CONFIG` field (its default when absent or
    empty; ``ValueError`` naming the key when required or malformed)."""
    value = cfg.get(key)
    if value is None or value == "":
        if key in _REQUIRED:
            raise ValueError(f"run config: missing required key {key!r}")
        value = APP_CONFIG_DEFAULTS[key]
        if value == "":
            return None
    try:
        return RUN_CONFIG[key].read(f"run config {key}", value)
    except Refused as exc:
        raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class FederationConfig:
    """The parsed run config (see the module docstring for the keys)."""

    algorithm: str
    algorithm_kwargs: dict
    participation: object
    rounds: int
    seed: int
    num_clients: int
    task: str
    task_kwargs: dict = field(default_factory=dict)
    weighting: str = "uniform"
    timeout: float = 120.0
    node_wait: float = 120.0
    atol: float = 1e-7
    output_dir: str = None
    server_metrics: bool = False
    faults: dict = field(default_factory=dict)

    @classmethod
    def from_run_config(cls, cfg):
        """Parse Flower's ``context.run_config`` (a mapping of TOML scalars), every key
        through :data:`RUN_CONFIG`.

        Raises
        ------
        ValueError
            A key missing, of the wrong type, out of its bounds, or a name that is not one.
        """
        cfg = dict(cfg)
        return cls(
            algorithm=_read(cfg, "algorithm"),
            algorithm_kwargs=json_object(_read(cfg, "algorithm-kwargs") or "{}",
                                         "algorithm-kwargs"),
            participation=build_participation(_read(cfg, "participation")),
            rounds=_read(cfg, "rounds"),
            seed=_read(cfg, "seed"),
            num_clients=_read(cfg, "num-clients"),
            task=_read(cfg, "task"),
            task_kwargs=json_object(_read(cfg, "task-kwargs") or "{}", "task-kwargs"),
            weighting=_read(cfg, "weighting"),
            timeout=_read(cfg, "timeout"),
            node_wait=_read(cfg, "node-wait"),
            atol=_read(cfg, "atol"),
            output_dir=_read(cfg, "output-dir"),
            server_metrics=_read(cfg, "server-metrics"),
            faults=parse_faults(_read(cfg, "fault")),
        )

    def algorithm_class(self, app_names=None):
        """The registered class of ``algorithm`` (nothing built yet)."""
        return (app_names or _BUILTIN).get("algorithm", self.algorithm)

    def build_algorithm(self, app_names=None):
        return build_algorithm(self.algorithm, self.algorithm_kwargs, app_names)

    def load_task(self, app_names=None):
        """The registered task function of ``task``."""
        return (app_names or _BUILTIN).get("task", self.task)
