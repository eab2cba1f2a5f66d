"""``auto``'s policy: which backend runs a kernel at a shape, as data measured on a machine.

A policy is a JSON file (format below), never code. Two take part:

* the **shipped** policy, ``rfl_fast/kernels/auto_policy.json`` (read with
  ``importlib.resources``), measured by the shape sweep (``rfl-fast bench --sweep
  --write-auto``) on the machine its ``provenance`` names. It is *portable*: its ``rule`` lists
  the routes whose advantage there rests on that machine's BLAS and threads
  (``same_calls``), and ``auto`` puts the reference before them wherever it runs;
* a **per-machine** policy written by ``rfl-fast tune`` into the user's cache folder
  (:func:`cache_dir`), one file per machine key (:func:`machine_key`: CPU model, core count,
  BLAS libraries, package version) and C++ thread count. It was measured here, so its orders are
  taken as measured; its points replace the shipped ones at the same shapes. A file that does
  not parse, does not follow the format, or was made for another machine key (foreign) or
  package version (stale) is ignored with a message (the ``rfl_fast.kernels`` logger), never
  trusted.

``RFL_FAST_POLICY`` chooses: unset, the shipped policy and this machine's tuned file if any;
``shipped``, the shipped policy alone; a path, that file as the per-machine policy (checked the
same way).

Format (``version`` 1)::

    {"format": "rfl_fast auto policy", "version": 1,
     "provenance": {"machine": {"cpu": str, "cores": int, "blas": [str, ...], "package": str},
                    "threads": int, "date": "YYYY-MM-DD", "command": str, "notes": [str, ...]},
     "rule": {"margin": 1.1, "worst_round": 1.0, "portable": bool,
              "same_calls": {kernel: {backend: size from which its route makes the
                                                reference's BLAS calls}}},
     "kernels": {kernel: [{"at": [items, *core dims of the first argument],
                           "order": [backend, ...],           # as measured, "numpy" included
                           "speedup": {backend: float},       # optional: median t_ref / t
                           "parallel": "items" | "blas"},     # optional: the C++ batch mode
                          ...]}}

``margin`` and ``worst_round`` record the measured rule the orders follow (a compiled backend
before the reference only where it was ``margin`` times faster in the median round and
``worst_round`` times in every round); ``threads`` is the C++ kernels' thread count during the
measurement.
"""

import datetime
import glob
import hashlib
import importlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from importlib import resources

from .._validation import check_float, check_int
from .registry import REGISTRY

__all__ = ["FORMAT", "VERSION", "ENV", "PolicyError", "Point", "Policy", "parse", "dumps",
           "shipped", "cpu_model", "machine_key", "cache_dir", "tuned_path", "load_tuned", "write",
           "effective", "modes", "PARALLEL"]

FORMAT = "rfl_fast auto policy"
VERSION = 1
ENV = "RFL_FAST_POLICY"
SHIPPED = "auto_policy.json"
#: A policy file larger than this is refused before it is parsed.
MAX_BYTES = 4 * 2**20
#: The C++ batch modes a point may fix (``_core``'s ``parallel`` argument).
PARALLEL = ("items", "blas")
_BACKENDS = ("cpp", "numba", "numpy")
_MAX_DIM = 2**31 - 1
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_log = logging.getLogger("rfl_fast.kernels")


class PolicyError(ValueError):
    """A policy file that cannot be used: the message names the file and the field."""


@dataclass(frozen=True)
class Point:
    """One measured point: ``at``, the first argument's shape ``(items, *core)``; ``order``, the
    backends as measured (fastest admitted first, the reference included); ``speedup``, each
    backend's median speed-up over the reference where recorded; ``parallel``, the C++ batch
    mode measured best there (``None``: the C++ default)."""

    at: tuple
    order: tuple
    speedup: tuple = ()     # ((backend, ratio), ...)
    parallel: str | None = None


@dataclass(frozen=True)
class Policy:
    """A checked policy file (see the module docstring); ``source``: ``"shipped"`` or its path."""

    provenance: dict
    margin: float
    worst_round: float
    portable: bool
    same_calls: dict            # kernel -> {backend: size}
    kernels: dict               # kernel -> (Point, ...)
    source: str = "shipped"
    points: int = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "points", sum(map(len, self.kernels.values())))

    def order(self, kernel, point):
        """``point``'s order as ``auto`` takes it: in a portable policy, a backend whose route
        makes the reference's BLAS calls at this size (``same_calls``) goes after the
        reference."""
        order = point.order
        if not self.portable:
            return order
        size = point.at[-1]
        late = [b for b, start in self.same_calls.get(kernel, {}).items() if size >= start]
        if not late:
            return order
        ref = order.index("numpy")
        moved = [b for b in order[:ref] if b in late]
        return tuple(b for b in order[:ref] if b not in late) + ("numpy",) + tuple(moved) \
            + order[ref + 1:]

    def describe(self):
        """One line: what the policy was measured on, and how auto takes it."""
        p = self.provenance
        m = p["machine"]
        blas = "; ".join(m["blas"]) or "no BLAS found"
        what = "portable" if self.portable else "as measured"
        return (f"measured {p['date']} on {m['cpu']} ({m['cores']} cores, {p['threads']} C++ "
                f"threads, BLAS {blas}, rfl_fast {m['package']}), {self.points} points, {what}")


# ---------------------------------------------------------------- strict parsing


def _fail(where, what):
    raise PolicyError(f"{where}: {what}")


def _dict(value, where, required, optional=()):
    if not isinstance(value, dict):
        _fail(where, f"expected an object, got {type(value).__name__}")
    missing = [k for k in required if k not in value]
    extra = [k for k in value if k not in required and k not in optional]
    if missing or extra:
        _fail(where, (f"missing {missing}" if missing else "")
              + ("; " if missing and extra else "") + (f"unknown keys {extra}" if extra else ""))
    return value


def _int(value, where, lo, hi):
    """_validation.check_int, raising PolicyError."""
    try:
        return check_int(value, where, min_value=lo, max_value=hi)
    except (TypeError, ValueError) as exc:
        raise PolicyError(str(exc)[:200]) from None


def _float(value, where, lo, hi):
    """_validation.check_float, raising PolicyError."""
    try:
        return check_float(value, where, low=lo, high=hi)
    except (TypeError, ValueError) as exc:
        raise PolicyError(str(exc)[:200]) from None


def _str(value, where, longest):
    if not isinstance(value, str) or len(value) > longest:
        _fail(where, f"expected a string of at most {longest} characters")
    return value


def _list(value, where, longest):
    if not isinstance(value, list) or len(value) > longest:
        _fail(where, f"expected a list of at most {longest} entries")
    return value


def _machine(value, where):
    _dict(value, where, ("cpu", "cores", "blas", "package"))
    return {"cpu": _str(value["cpu"], f"{where}.cpu", 200),
            "cores": _int(value["cores"], f"{where}.cores", 1, 1 << 16),
            "blas": [_str(b, f"{where}.blas[{i}]", 200)
                     for i, b in enumerate(_list(value["blas"], f"{where}.blas", 16))],
            "package": _str(value["package"], f"{where}.package", 64)}


def _provenance(value, where):
    _dict(value, where, ("machine", "threads", "date", "command"), ("notes",))
    date = _str(value["date"], f"{where}.date", 10)
    if not _DATE.fullmatch(date):
        _fail(f"{where}.date", f"expected YYYY-MM-DD, got {date!r}")
    notes = _list(value.get("notes", []), f"{where}.notes", 64)
    return {"machine": _machine(value["machine"], f"{where}.machine"),
            "threads": _int(value["threads"], f"{where}.threads", 1, 1 << 16), "date": date,
            "command": _str(value["command"], f"{where}.command", 1000),
            "notes": [_str(n, f"{where}.notes[{i}]", 4000) for i, n in enumerate(notes)]}


def _backend(value, where, reference=True):
    if value not in _BACKENDS or (value == "numpy" and not reference):
        allowed = _BACKENDS if reference else _BACKENDS[:-1]
        _fail(where, f"expected one of {allowed}, got {value!r:.60}")
    return value


def _point(value, where, kernel):
    _dict(value, where, ("at", "order"), ("speedup", "parallel"))
    spec = REGISTRY[kernel]
    at = _list(value["at"], f"{where}.at", 4)
    if len(at) != 1 + spec.args[0]:
        _fail(f"{where}.at", f"expected {1 + spec.args[0]} sizes (items, *core), got {len(at)}")
    at = tuple(_int(v, f"{where}.at[{i}]", 1, _MAX_DIM) for i, v in enumerate(at))
    if spec.family == "square" and at[1] != at[2]:
        _fail(f"{where}.at", f"expected square matrices (items, n, n), got {list(at)}")
    if spec.family == "stiefel" and at[1] < at[2]:
        _fail(f"{where}.at", f"expected n >= p in (items, n, p), got {list(at)}")
    order = tuple(_backend(b, f"{where}.order[{i}]")
                  for i, b in enumerate(_list(value["order"], f"{where}.order", 3)))
    if "numpy" not in order or len(set(order)) != len(order):
        _fail(f"{where}.order", f"expected distinct backends including 'numpy', got {list(order)}")
    speedup = _dict(value.get("speedup", {}), f"{where}.speedup", (), _BACKENDS)
    speedup = tuple((b, _float(s, f"{where}.speedup.{b}", 1e-6, 1e6))
                    for b, s in sorted(speedup.items()))
    parallel = value.get("parallel")
    if parallel is not None and parallel not in PARALLEL:
        _fail(f"{where}.parallel", f"expected one of {PARALLEL}, got {parallel!r:.60}")
    return Point(at, order, speedup, parallel)


def _kernels(value, where):
    if not isinstance(value, dict):
        _fail(where, "expected an object")
    out = {}
    for name, points in value.items():
        if name not in REGISTRY:
            _fail(where, f"unknown kernel {name!r:.60}")
        pts = tuple(_point(p, f"{where}.{name}[{i}]", name)
                    for i, p in enumerate(_list(points, f"{where}.{name}", 10_000)))
        if len({p.at for p in pts}) != len(pts):
            _fail(f"{where}.{name}", "the same shape twice")
        modes = {}
        for p in pts:  # a batch mode depends on the core shape alone (so never on the batch)
            if p.parallel is not None and modes.setdefault(p.at[1:], p.parallel) != p.parallel:
                _fail(f"{where}.{name}", f"two batch modes for core shape {list(p.at[1:])}")
        out[name] = pts
    return out


def _rule(value, where):
    _dict(value, where, ("margin", "worst_round", "portable", "same_calls"))
    if not isinstance(value["portable"], bool):
        _fail(f"{where}.portable", "expected true or false")
    same = _dict(value["same_calls"], f"{where}.same_calls", (), tuple(REGISTRY))
    same_calls = {k: {_backend(b, f"{where}.same_calls.{k}", reference=False):
                      _int(s, f"{where}.same_calls.{k}.{b}", 1, _MAX_DIM)
                      for b, s in _dict(v, f"{where}.same_calls.{k}", (), _BACKENDS).items()}
                  for k, v in same.items()}
    margin = _float(value["margin"], f"{where}.margin", 1.0, 10.0)
    return (margin, _float(value["worst_round"], f"{where}.worst_round", 0.1, margin),
            value["portable"], same_calls)


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise PolicyError(f"a key appears twice in one object: {sorted(keys)[:5]}")
    return dict(pairs)


def _no_constant(name):
    raise PolicyError(f"{name} is not a JSON number")


def parse(raw, source):
    """The :class:`Policy` in ``raw`` (bytes of a policy file), checked field by field.

    Raises
    ------
    PolicyError
        Anything that is not exactly the format: the message names ``source`` and the field.
    """
    if len(raw) > MAX_BYTES:
        raise PolicyError(f"{source}: {len(raw)} bytes, more than a policy's {MAX_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates,
                          parse_constant=_no_constant)
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PolicyError(f"{source}: not JSON ({type(exc).__name__}: {str(exc)[:100]})") from None
    _dict(data, source, ("format", "version", "provenance", "rule", "kernels"))
    if data["format"] != FORMAT:
        _fail(f"{source}: format", f"expected {FORMAT!r}, got {data['format']!r:.60}")
    if data["version"] != VERSION or isinstance(data["version"], bool):
        _fail(f"{source}: version", f"expected {VERSION}, got {data['version']!r:.60}")
    margin, worst, portable, same_calls = _rule(data["rule"], f"{source}: rule")
    return Policy(_provenance(data["provenance"], f"{source}: provenance"), margin, worst,
                  portable, same_calls, _kernels(data["kernels"], f"{source}: kernels"),
                  source=str(source))


def dumps(policy):
    """``policy`` as the text of a policy file: the fields in order, one point per line."""
    def point(p):
        d = {"at": list(p.at), "order": list(p.order)}
        if p.speedup:
            d["speedup"] = dict(p.speedup)
        if p.parallel:
            d["parallel"] = p.parallel
        return json.dumps(d)

    head = {"format": FORMAT, "version": VERSION, "provenance": policy.provenance,
            "rule": {"margin": policy.margin, "worst_round": policy.worst_round,
                     "portable": policy.portable, "same_calls": policy.same_calls}}
    text = json.dumps(head, indent=1)[:-2]
    kernels = ",\n".join(f'  "{name}": [\n' + ",\n".join("   " + point(p) for p in pts) + "\n  ]"
                         for name, pts in sorted(policy.kernels.items()))
    return text + ',\n "kernels": {\n' + kernels + "\n }\n}\n"


# ---------------------------------------------------------------- where policies live

_shipped = None


def shipped():
    """The shipped policy (``kernels/auto_policy.json``), read once."""
    global _shipped
    if _shipped is None:
        raw = resources.files(__package__).joinpath(SHIPPED).read_bytes()
        _shipped = parse(raw, "shipped")
    return _shipped


def cpu_model():
    """The CPU's model name (``/proc/cpuinfo``: x86 "model name", Arm "Model" or "Hardware";
    elsewhere ``platform``)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown"


def _package_version():
    from importlib import metadata

    try:
        return metadata.version("rfl_fast")
    except metadata.PackageNotFoundError:  # a source tree with the extension built in place
        try:  # as the dispatcher loads it (a leaf module: no import of the package)
            return importlib.import_module("rfl_fast._core").__version__
        except ImportError:
            return "0+unknown"


def blas_libraries():
    """``["<api> <version> <kernel> <threading layer>", ...]``: the BLAS libraries NumPy and
    SciPy loaded (threadpoolctl), sorted; their thread counts are not part of it."""
    import scipy.linalg  # noqa: F401  (SciPy's own BLAS, the C++ kernels' large-size routes)
    from threadpoolctl import threadpool_info

    return sorted({f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} "
                   f"{i.get('threading_layer')}" for i in threadpool_info()
                   if i.get("user_api") == "blas"})


def machine_key():
    """What a per-machine policy is keyed by: ``{"cpu", "cores", "blas", "package"}``."""
    return {"cpu": cpu_model()[:200], "cores": os.cpu_count() or 1,
            "blas": [b[:200] for b in blas_libraries()][:16], "package": _package_version()}


def cache_dir():
    """The user's cache folder for rfl_fast (``platformdirs.user_cache_dir``)."""
    import platformdirs

    return platformdirs.user_cache_dir("rfl_fast", appauthor=False)


def tuned_path(threads, key=None):
    """Where ``rfl-fast tune`` keeps this machine's policy for ``threads`` C++ threads."""
    key = machine_key() if key is None else key
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"auto-policy-{digest}-t{threads}.json")


def load_tuned(threads):
    """``(policy or None, note)``: the per-machine policy for ``threads`` C++ threads that
    ``RFL_FAST_POLICY`` and the cache give, and one line saying which, or why none is used (a
    file ignored is also logged, once per file and reason)."""
    choice = os.environ.get(ENV, "").strip()
    if choice == "shipped":
        return None, f"per-machine policy: not read ({ENV}=shipped)"
    if not choice and not glob.glob(os.path.join(glob.escape(cache_dir()),
                                                 f"auto-policy-*-t{threads}.json")):
        # no file for this thread count: the machine key (BLAS libraries) is not even asked
        return None, (f"per-machine policy: none for {threads} C++ threads in {cache_dir()} "
                      f"(rfl-fast tune writes one)")
    key = machine_key()
    path = choice or tuned_path(threads, key)
    if not os.path.isfile(path):
        if choice:
            return _ignored(path, "no such file")
        return None, f"per-machine policy: none for this machine and {threads} C++ threads " \
                     f"(rfl-fast tune writes {path})"
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
        policy = parse(raw, path)
    except OSError as exc:
        return _ignored(path, f"unreadable ({exc.strerror or exc})")
    except PolicyError as exc:
        return _ignored(path, f"not a valid policy file: {exc}")
    made = policy.provenance["machine"]
    foreign = [k for k in ("cpu", "cores", "blas") if made[k] != key[k]]
    if foreign:
        k = foreign[0]
        return _ignored(path, f"made for another machine ({k}: {made[k]!r}, here {key[k]!r})")
    if made["package"] != key["package"]:
        return _ignored(path, f"stale: made by rfl_fast {made['package']}, this is "
                              f"{key['package']}; run rfl-fast tune again")
    if policy.provenance["threads"] != threads:
        return _ignored(path, f"measured with {policy.provenance['threads']} C++ threads, "
                              f"{threads} in force")
    if policy.portable:
        return _ignored(path, "a portable (shipped-style) policy, not a per-machine one")
    return policy, f"per-machine policy {path}: {policy.describe()}"


_told = set()


def _ignored(path, why):
    note = f"per-machine policy {path} ignored: {why}"
    if note not in _told:
        _told.add(note)
        _log.warning("rfl_fast: auto policy %s ignored: %s", path, why)
    return None, note


def write(policy, path):
    """Write ``policy`` to ``path`` (a temporary file renamed over it: whole or absent)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(dumps(policy))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def today():
    return datetime.date.today().isoformat()


# ---------------------------------------------------------------- what auto uses


@dataclass(frozen=True)
class Entry:
    """A point of the effective table: its order as ``auto`` takes it, its C++ batch mode."""

    at: tuple
    order: tuple
    parallel: str | None
    source: str


def effective(tuned=None):
    """``{kernel: (Entry, ...)}``: the shipped policy's points (portable orders), each replaced
    by ``tuned``'s point at the same shape (as measured), plus ``tuned``'s other points."""
    base = shipped()
    table = {k: {p.at: Entry(p.at, base.order(k, p), p.parallel, "shipped") for p in pts}
             for k, pts in base.kernels.items()}
    if tuned is not None:
        for k, pts in tuned.kernels.items():
            for p in pts:
                table.setdefault(k, {})[p.at] = Entry(p.at, tuned.order(k, p), p.parallel,
                                                      "tuned")
    return {k: tuple(v.values()) for k, v in table.items()}


def modes(entries):
    """``{core shape: batch mode or None}`` over a kernel's ``effective`` entries (a tuned
    point's mode over a shipped one's); empty when none fixes a mode."""
    out = {}
    for e in sorted(entries, key=lambda e: e.source == "tuned"):
        if e.parallel is not None or e.at[1:] not in out:
            out[e.at[1:]] = e.parallel
    return out if any(m is not None for m in out.values()) else {}
