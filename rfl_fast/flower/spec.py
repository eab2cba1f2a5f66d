"""The run configuration of a federation: what the server and every client agree on.

Flower hands the same *run config* (``[tool.flwr.app.config]`` of the app, overridden by
``flwr run --run-config``) to the ServerApp and to every ClientApp, so both sides rebuild the
same algorithm, task and seed from it; nothing executable travels in messages. Keys (values
are TOML scalars; structured values are JSON strings):

=====================  ===========================================================  ==========
key                    meaning                                                      default
=====================  ===========================================================  ==========
``algorithm``          a name of :data:`rfl_fast.app.names.ALGORITHMS`           required
                       (``"RFedSVRG"``) or ``"module:Class"``
``algorithm-kwargs``   JSON object of its arguments; a step schedule is            ``"{}"``
                       ``{"Decaying": {"a0": 0.1}}`` or ``{"Constant": {...}}``
``participation``      ``"Full"``, ``"Uniform(3)"``, ``"Bernoulli(0.5)"`` or JSON    ``"Full"``
                       ``{"Bernoulli": {"p": [...]}}``
``rounds``             communication rounds                                         required
``seed``               root seed (the same as ``rfl_fast.federation.run``'s)        ``0``
``num-clients``        n; client ids ``0..n-1`` come from each SuperNode's          required
                       ``partition-id``
``weighting``          ``"uniform"`` or ``"samples"`` (client weights ``w_i``)      ``"uniform"``
``task``               ``"module:function"`` building a client's local problem      required
                       (see :mod:`rfl_fast.flower.tasks`)
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

import importlib
import json
import re
from dataclasses import dataclass, field

from ..algorithms.participation import Participation
from ..app import names

__all__ = ["FederationConfig", "build_algorithm", "build_participation", "load_ref",
           "parse_faults", "APP_CONFIG_DEFAULTS"]

#: Defaults of the run config keys (those marked required are given placeholders).
APP_CONFIG_DEFAULTS = {
    "algorithm": "RFedAvg",
    "algorithm-kwargs": '{"step": 0.1, "local_steps": 3}',
    "participation": "Full",
    "rounds": 3,
    "seed": 0,
    "num-clients": 3,
    "weighting": "uniform",
    "task": "rfl_fast.flower.tasks:synthetic_kpca",
    "task-kwargs": '{"n_clients": 3, "samples": 40, "d": 6, "r": 2, "seed": 1}',
    "timeout": 120.0,
    "node-wait": 120.0,
    "atol": 1e-7,
    "output-dir": "",
    "server-metrics": False,
    "fault": "",
}


def load_ref(ref, what):
    """The object named by ``"package.module:attribute"``."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ValueError(f"{what}: expected 'module:attribute', got {ref!r}")
    mod, attr = ref.split(":", 1)
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def build_algorithm(name, kwargs):
    """The algorithm ``name`` (a name of :data:`rfl_fast.app.names.ALGORITHMS` or
    ``"module:Class"``) built with ``kwargs`` (dict, or its JSON text); a ``step`` is read by
    :func:`rfl_fast.app.names.build_step`."""
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs or "{}")
    if ":" in str(name):
        cls = load_ref(name, "algorithm")
    else:
        try:
            cls = names.get("algorithm", name)
        except names.UnknownName as exc:
            raise ValueError(f"{exc} or 'module:Class'") from None
    if kwargs.get("step") is not None:
        kwargs = {**kwargs, "step": names.build_step(kwargs["step"])}
    return cls(**kwargs)


_CALL = re.compile(r"^\s*([A-Za-z]+)\s*(?:\((.*)\))?\s*$")


def build_participation(spec):
    """``"Full"``, ``"Uniform(3)"``, ``"Bernoulli(0.5)"`` or a JSON object
    ``{"Uniform": {"k": 3}}`` / ``{"Bernoulli": {"p": [...]}}`` (names of
    :data:`rfl_fast.app.names.PARTICIPATIONS`, any case)."""
    if isinstance(spec, Participation):
        return spec
    if isinstance(spec, str) and spec.strip().startswith("{"):
        spec = json.loads(spec)
    if isinstance(spec, dict):
        (name, args), = spec.items()
        return names.build("participation", name, **args)
    m = _CALL.match(str(spec))
    if m is None:
        raise ValueError(f"participation: expected 'Full', 'Uniform(k)', 'Bernoulli(p)' or "
                         f"JSON, got {spec!r}")
    name, arg = m.group(1), m.group(2)
    cls = names.get("participation", name)
    if arg:
        return cls(json.loads(arg))
    if names.REQUIRED in names.parameters(cls).values():
        raise ValueError(f"participation: {name} needs an argument, e.g. {name}(3)")
    return cls()


def parse_faults(text):
    """``"drop:3@2,3;corrupt:1@3"`` -> ``{("drop", 3): {2, 3}, ("corrupt", 1): {3}}``."""
    out = {}
    for part in filter(None, (p.strip() for p in str(text or "").split(";"))):
        m = re.match(r"^(drop|corrupt|offmanifold):(\d+)@([\d,\s]+)$", part)
        if m is None:
            raise ValueError(f"fault: cannot read {part!r}; expected 'drop:<client>@<rounds>' "
                             f"or 'corrupt:<client>@<rounds>' (rounds 1-based, comma "
                             f"separated), joined by ';'")
        rounds = {int(r) for r in m.group(3).split(",") if r.strip()}
        out.setdefault((m.group(1), int(m.group(2))), set()).update(rounds)
    return out


def _get(cfg, key, cast, required=False):
    if key in cfg and cfg[key] not in (None, ""):
        return cast(cfg[key])
    if required:
        raise ValueError(f"run config: missing required key {key!r}")
    return cast(APP_CONFIG_DEFAULTS[key]) if APP_CONFIG_DEFAULTS[key] != "" else None


def _bool(v):
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


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
        """Parse Flower's ``context.run_config`` (a mapping of TOML scalars)."""
        cfg = dict(cfg)
        return cls(
            algorithm=_get(cfg, "algorithm", str, True),
            algorithm_kwargs=json.loads(_get(cfg, "algorithm-kwargs", str) or "{}"),
            participation=build_participation(_get(cfg, "participation", str)),
            rounds=_get(cfg, "rounds", int, True),
            seed=_get(cfg, "seed", int),
            num_clients=_get(cfg, "num-clients", int, True),
            task=_get(cfg, "task", str, True),
            task_kwargs=json.loads(_get(cfg, "task-kwargs", str) or "{}"),
            weighting=_get(cfg, "weighting", str),
            timeout=_get(cfg, "timeout", float),
            node_wait=_get(cfg, "node-wait", float),
            atol=_get(cfg, "atol", float),
            output_dir=_get(cfg, "output-dir", str),
            server_metrics=_get(cfg, "server-metrics", _bool),
            faults=parse_faults(cfg.get("fault", "")),
        )

    def build_algorithm(self):
        return build_algorithm(self.algorithm, self.algorithm_kwargs)

    def load_task(self):
        return load_ref(self.task, "task")
