"""The schema of every message of a deployment: declared once, typed and bounded.

A message is a *content* (:mod:`.codec`): a dict of sections. Its schema says which sections
it may hold, every config field's type, range and size (:class:`Field`), and which arrays it
may hold with which dtype and shape (from the receiver's own manifold and algorithm, never
from the sender). Both sides read every message through it:

==================  =========================================  ==================================
message             sections                                   config fields (:data:`REQUEST`...)
==================  =========================================  ==================================
hello request       ``config``                                 :data:`HELLO_REQUEST`
hello reply         ``config``                                 :data:`HELLO_REPLY`
request             ``config``, ``msg`` (+ ``.meta``),         :data:`REQUEST`
                    ``init`` (+ ``.meta``) at first contact
reply               ``config``, ``up`` (+ ``.meta``)           :data:`REPLY`
==================  =========================================  ==================================

* config fields: exactly the declared keys (unknown keys refused), each of its declared type
  (an int is never a bool or a float), inside its range, a string at most ``max_len``
  characters and, where declared, one of its choices or matching its pattern;
* arrays (:func:`read_arrays`): the names the receiver expects -- an upload holds *exactly*
  the arrays its algorithm declares for the exchange (``FederatedAlgorithm.uploads``), a
  server message a subset of ``array_kinds`` --, float64, of the shape their declared kind
  fixes on the receiver's manifold (a leading client axis of 1 in uploads), with a meta
  section holding exactly the manifold name and each array's kind, shape and dtype as
  :func:`~rfl_fast.flower.codec.pack` writes them.

Whatever does not follow its schema raises :class:`Refused`, whose message is one bounded
sentence (values shown through :func:`rfl_fast._validation.brief`): the server leaves that
client out of the round with it as the reason (the run goes on), a client refuses the message
with it. The arrays' contents are then checked as the simulation checks them
(:func:`rfl_fast.federation.arrival.check_upload`: finite, points on the manifold, tangent
vectors tangent).
"""

import math
import re
from dataclasses import dataclass

import numpy as np

from .._validation import brief
from ..federation.arrival import KINDS, check_upload
from .codec import manifold_spec, shape_str

__all__ = ["Refused", "Field", "HELLO_REQUEST", "HELLO_REPLY", "REQUEST", "REPLY", "PHASES",
           "NAME", "read_section", "read_arrays", "read_request", "read_reply", "read_hello",
           "is_hello", "read_hello_request",
           "check_arrays", "MAX_ROUNDS", "MAX_CLIENTS"]

#: A registered name as a run config or a message may write it (never an import path).
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: The exchanges of a round.
PHASES = ("prepare", "update", "finalize")
MAX_ROUNDS = 10**7
MAX_CLIENTS = 2**31 - 1


class Refused(ValueError):
    """A message that does not follow its schema; the message is the reason (bounded)."""


_TYPE_NAME = {int: "an int", float: "a number", str: "a string", bool: "true or false"}


def _is(value, kind):
    flag = isinstance(value, (bool, np.bool_))
    if kind is bool:
        return flag
    if kind is int:
        return isinstance(value, (int, np.integer)) and not flag
    if kind is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not flag
    return isinstance(value, str)


@dataclass(frozen=True)
class Field:
    """One config field: its type and bounds.

    Parameters
    ----------
    type : {int, float, str, bool}
        An int is never a bool or a float; a float may be written as an int; NaN and inf are
        refused.
    lo, hi : number, optional
        Inclusive range of an int or a float.
    choices : tuple of str, optional
        The allowed values of a string.
    max_len : int
        Longest string.
    pattern : re.Pattern, optional
        What a string must match entirely (e.g. :data:`NAME`).
    required : bool
        Whether the field must be present.
    hint : str
        What a string that does not match ``pattern`` should have been.
    """

    type: type
    lo: float = None
    hi: float = None
    choices: tuple = None
    max_len: int = 64
    pattern: re.Pattern = None
    required: bool = True
    hint: str = "a plain name (letters, digits, _)"

    def read(self, key, value):
        """``value`` checked and converted (Python int, float, str or bool); :class:`Refused`
        naming ``key`` otherwise."""
        kind = self.type
        if not _is(value, kind):
            raise Refused(f"{key}: expected {_TYPE_NAME[kind]}, got {type(value).__name__} "
                          f"({brief(value)})")
        value = kind(value)
        if kind is float and not math.isfinite(value):
            raise Refused(f"{key}: expected a finite number, got {value}")
        if kind is str:
            if len(value) > self.max_len:
                raise Refused(f"{key}: a string of {len(value)} characters, at most "
                              f"{self.max_len} allowed")
            if self.choices is not None and value not in self.choices:
                raise Refused(f"{key}: expected one of {', '.join(self.choices)}, got "
                              f"{brief(value)}")
            if self.pattern is not None and not self.pattern.fullmatch(value):
                raise Refused(f"{key}: {brief(value)} is not {self.hint}")
        elif kind is not bool and ((self.lo is not None and value < self.lo)
                                   or (self.hi is not None and value > self.hi)):
            raise Refused(f"{key}: expected a value in [{self.lo:g}, {self.hi:g}], got "
                          f"{brief(value)}")
        return value


_CLIENT = Field(int, 0, MAX_CLIENTS)
_ROUND = Field(int, 0, MAX_ROUNDS)
_PHASE = Field(str, choices=PHASES)

#: The server's first message: which client a node holds.
HELLO_REQUEST = {"phase": Field(str, choices=("hello",))}
#: A node's answer: its client id, sample count, manifold, problem and rfl_fast version.
HELLO_REPLY = {"client": _CLIENT, "n_samples": Field(int, 1, 2**53),
               "manifold": Field(str, max_len=64), "problem": Field(str, pattern=NAME),
               "rfl_fast": Field(str, max_len=64)}
#: A request's config: the exchange, the round, the client addressed, the streams' root and
#: continuation, the run's length and whether the client continues its round memo.
REQUEST = {"phase": _PHASE, "round": _ROUND, "client": _CLIENT,
           "seed": Field(int, 0, 2**63 - 1), "rounds": Field(int, 1, MAX_ROUNDS),
           "rng": Field(str, choices=("fresh", "continue")),
           "memo": Field(str, choices=("yes", "no"))}
#: A reply's config: who answers which exchange, and the CPU seconds it took.
REPLY = {"client": _CLIENT, "round": _ROUND, "phase": _PHASE, "cpu": Field(float, 0.0, 1e9)}


def _known(mapping, allowed, what, noun):
    """Refuse ``mapping`` unless it is a dict whose keys are all in ``allowed``."""
    if not isinstance(mapping, dict):
        raise Refused(f"{what}: expected a mapping, got {type(mapping).__name__}")
    for key in mapping:
        if key not in allowed:
            raise Refused(f"{what}: unknown {noun} {brief(key)}; expected "
                          f"{', '.join(allowed)}")


def read_section(section, fields, what):
    """A config section checked against ``fields`` (dict of :class:`Field`): exactly those
    keys (optional ones may be absent), each read by its field. Returns a new dict."""
    _known(section, fields, what, "key")
    out = {}
    for key, field in fields.items():
        if key in section:
            out[key] = field.read(f"{what}.{key}", section[key])
        elif field.required:
            raise Refused(f"{what}: missing {key!r}")
    return out


def _sections(content, allowed, what):
    _known(content, sorted(allowed), what, "section")
    if "config" not in content:
        raise Refused(f"{what}: no config section")


def _expected_shape(kind, M, lead):
    return lead if kind == "scalar" else lead + M.shape


def read_arrays(arrays, meta, M, kinds, names, *, exact, rows=None, what="arrays"):
    """Arrays and their meta section checked against the receiver's declarations.

    Parameters
    ----------
    arrays : dict of str to ndarray
    meta : dict
        The meta section sent with them (:func:`~rfl_fast.flower.codec.pack`).
    M : Manifold
        The receiver's manifold.
    kinds : dict of str to str
        The receiver's kind of every name (``kinds_of`` its algorithm).
    names : iterable of str
        The names expected.
    exact : bool
        Exactly ``names`` (an upload), or a subset of them (a server message).
    rows : int, optional
        The leading client axis (1 in an upload); ``None``: none.
    what : str
        How the reason names the section.

    Returns
    -------
    dict of str to ndarray

    Raises
    ------
    Refused
    """
    names = set(names)
    if not isinstance(arrays, dict) or not all(isinstance(k, str) for k in arrays):
        raise Refused(f"{what}: expected a mapping of named arrays")
    got = set(arrays)
    extra, missing = sorted(got - names), sorted(names - got)
    if extra:
        raise Refused(f"{what}: arrays {brief(extra)} besides the declared {sorted(names)}")
    if exact and missing:
        raise Refused(f"{what}: missing arrays {missing} (holds {sorted(got)})")
    fields = {"manifold": Field(str, max_len=64)}
    for name in sorted(got):
        fields.update({f"{name}.kind": Field(str, choices=KINDS),
                       f"{name}.shape": Field(str, max_len=64),
                       f"{name}.dtype": Field(str, choices=("float64",))})
    meta = read_section(meta if meta is not None else {}, fields, f"{what}.meta")
    if meta["manifold"] != manifold_spec(M):
        raise Refused(f"manifold mismatch: sent {brief(meta['manifold'])}, expected "
                      f"{manifold_spec(M)!r}")
    lead = () if rows is None else (int(rows),)
    for name in sorted(got):
        arr, kind = arrays[name], kinds[name]
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float64:
            raise Refused(f"{name}: dtype {getattr(arr, 'dtype', type(arr).__name__)}, "
                          f"expected a float64 array")
        if meta[f"{name}.kind"] != kind:
            raise Refused(f"{name}: declared kind {meta[name + '.kind']!r}, expected {kind!r}")
        want = _expected_shape(kind, M, lead)
        if arr.shape != want:
            raise Refused(f"{name}: shape {arr.shape}, expected {want}")
        if meta[f"{name}.shape"] != shape_str(arr.shape):
            raise Refused(f"{name}: shape {arr.shape} differs from the declared "
                          f"{meta[name + '.shape']!r}")
    return dict(arrays)


def is_hello(content):
    """Whether ``content`` asks for a hello (then :func:`read_hello_request` reads it)."""
    return isinstance(content, dict) and isinstance(content.get("config"), dict) \
        and content["config"].get("phase") == "hello"


def read_hello_request(content):
    """A hello request checked against :data:`HELLO_REQUEST`: its config."""
    _sections(content, {"config"}, "hello request")
    return read_section(content["config"], HELLO_REQUEST, "request.config")


def read_request(content, M, kinds, atol=1e-7):
    """A server's request checked against :data:`REQUEST` and the client's own algorithm:
    ``(config, msg, init)`` (``init`` ``None`` when absent). The message's arrays are a subset
    of the algorithm's names (not ``x0``), the initial point exactly ``x0``; both are then
    checked finite and on the manifold (within ``atol``)."""
    _sections(content, {"config", "msg", "msg.meta", "init", "init.meta"}, "request")
    config = read_section(content["config"], REQUEST, "request.config")
    message_names = [n for n in kinds if n != "x0"]
    msg = read_arrays(content.get("msg", {}), content.get("msg.meta"), M, kinds,
                      message_names, exact=False, what="msg")
    why = check_upload(M, msg, kinds, atol=atol)
    if why:
        raise Refused(f"server message refused: {why}")
    init = None
    if "init" in content or "init.meta" in content:
        init = read_arrays(content.get("init"), content.get("init.meta"), M, kinds, ("x0",),
                           exact=True, what="init")
        why = check_upload(M, init, kinds, atol=atol)
        if why:
            raise Refused(f"initial point refused: {why}")
    return config, msg, init


def read_hello(content):
    """A node's hello reply checked against :data:`HELLO_REPLY`: its config."""
    _sections(content, {"config"}, "hello reply")
    return read_section(content["config"], HELLO_REPLY, "hello")


def read_reply(content, phase, t, i, M, kinds, names):
    """Client ``i``'s reply to exchange ``phase`` of round ``t``, checked against
    :data:`REPLY`: ``(cpu, upload)``; ``upload`` holds exactly ``names`` (the algorithm's
    declared upload of the exchange, one row each), ``None`` for ``finalize``.

    Raises
    ------
    Refused
        Mislabelled (another client, round or exchange), malformed, or an upload that is not
        exactly the declared arrays of the declared shapes.
    """
    _sections(content, {"config", "up", "up.meta"}, "reply")
    config = read_section(content["config"], REPLY, "reply.config")
    if (config["client"], config["round"], config["phase"]) != (i, t, phase):
        raise Refused(f"reply labelled client {config['client']}, round {config['round']}, "
                      f"phase {config['phase']!r}")
    if phase == "finalize":
        if "up" in content or "up.meta" in content:
            raise Refused("a finalize reply carries no upload")
        return config["cpu"], None
    if "up" not in content:
        raise Refused(f"no upload; expected {sorted(names)}")
    up = read_arrays(content["up"], content.get("up.meta"), M, kinds, names, exact=True,
                     rows=1, what="upload")
    return config["cpu"], up


def check_arrays(arrays, meta, M, *, rows=None, base=None, kinds=None, expect=None, atol=1e-7):
    """Check arrays on arrival the way both sides do: ``(ok, reason)`` (reason ``""`` when
    ok).

    :func:`read_arrays` (names, dtype, shapes, the meta section), then
    :func:`~rfl_fast.federation.arrival.check_upload` (finite, on the manifold, tangent at
    ``base``).

    Parameters
    ----------
    arrays : dict of str to ndarray
    meta : dict
        The meta section sent with them (:func:`~rfl_fast.flower.codec.pack`).
    M : Manifold
        The receiver's manifold; the sender's must be the same.
    rows : int, optional
        Leading client axis (1 for a client's upload); ``None`` for a server message.
    base : ndarray, M.shape, optional
        Base point of ``"tangent"`` arrays.
    kinds : dict, optional
        The receiver's kinds (default the built-in algorithms',
        :func:`~rfl_fast.federation.arrival.builtin_kinds`).
    expect : iterable of str, optional
        The names that must be there, exactly; default: any of ``kinds``.
    atol : float
        Tolerance of the manifold and tangent checks.
    """
    from ..federation.arrival import builtin_kinds

    kinds = builtin_kinds() if kinds is None else kinds
    try:
        read_arrays(arrays, meta, M, kinds, kinds if expect is None else expect,
                    exact=expect is not None, rows=rows)
    except Refused as exc:
        return False, str(exc)
    why = check_upload(M, arrays, kinds, base=base, rows=rows, atol=atol)
    return why is None, why or ""
