"""Checks of a client's upload on arrival at the server, shared by the simulation engine and
a real deployment.

:func:`check_upload` answers ``None`` (accept) or a one-sentence reason (reject) for one
client's upload, by the *kind* of each array:

=============  =================================================================
kind           checks (after: present, float, the expected shape, finite)
=============  =================================================================
``"point"``    on the manifold (``M.check_point``)
``"tangent"``  tangent at the base point, the server's ``x_t`` (``M.check_tangent``)
``"ambient"``  shape and finiteness only (e.g. RFedProj's ``zhat``, off the manifold)
``"scalar"``   one finite number
``"any"``      finiteness only (unknown names)
=============  =================================================================

Every algorithm names the kinds of its arrays in its class attribute ``array_kinds``
(:class:`rfl_fast.algorithms.FederatedAlgorithm`); :func:`kinds_of` adds the initial point
``x0`` that a deployment sends before the first round. Without an algorithm the checks use
:func:`builtin_kinds`, the union over the built-in algorithms.
"""

import numpy as np

from .._validation import brief

__all__ = ["KINDS", "INIT_KINDS", "check_upload", "kinds_of", "builtin_kinds"]

KINDS = ("point", "tangent", "ambient", "scalar", "any")

#: The arrays every deployment sends besides the algorithm's own: the initial point.
INIT_KINDS = {"x0": "point"}


def kinds_of(algorithm):
    """Kinds of the arrays exchanged when running ``algorithm``: its ``array_kinds`` and
    :data:`INIT_KINDS`."""
    return {**INIT_KINDS, **algorithm.array_kinds}


def builtin_kinds():
    """The kinds of the arrays of every built-in algorithm (their ``array_kinds``, which
    agree on shared names) and :data:`INIT_KINDS`: the default of the checks."""
    from ..algorithms import algorithm_classes  # the algorithms import this package

    kinds = dict(INIT_KINDS)
    for cls in algorithm_classes().values():
        kinds.update(cls.array_kinds)
    return kinds


def check_upload(M, upload, kinds=None, *, base=None, rows=None, expect=None, exact=False,
                 atol=1e-7):
    """Why ``upload`` must be rejected, or ``None`` if it is acceptable.

    Parameters
    ----------
    M : Manifold
        The model's manifold.
    upload : dict of str to array_like, or None
        One client's upload; ``None`` means nothing arrived (a dropped client).
    kinds : dict of str to str, optional
        Kind of each array name (default :func:`builtin_kinds`; see the module docstring).
    base : ndarray, M.shape, optional
        Base point of ``"tangent"`` arrays (the server point ``x_t``); without it tangent
        arrays are checked for shape and finiteness only.
    rows : int, optional
        Leading client axis every point/tangent/ambient array must have (1 for one client's
        row of a batched upload); ``None``: exactly ``M.shape``.
    expect : iterable of str, optional
        Names that must be present (default: none required).
    exact : bool
        Refuse names other than ``expect`` too: the upload holds exactly ``expect``.
    atol : float
        Tolerance of the manifold and tangent checks.

    Returns
    -------
    str or None
        E.g. ``"x: 2 entries are NaN or inf"``, ``"x: not a point of Sphere(5): ..."``,
        ``"zeta: shape (1, 4), expected (1, 5)"``, ``"no upload (dropped)"``.
    """
    if upload is None:
        return "no upload (dropped)"
    if not isinstance(upload, dict):
        return f"upload: expected a dict of arrays, got {type(upload).__name__}"
    kinds = builtin_kinds() if kinds is None else kinds
    if exact:
        extra = [n for n in upload if n not in set(expect or ())]
        if extra:
            return (f"arrays {brief(sorted(map(str, extra)))} besides the declared "
                    f"{sorted(expect or ())}")
    missing = sorted(set(expect or ()) - set(upload))
    if missing:
        return f"missing arrays {missing}"
    lead = () if rows is None else (int(rows),)
    for name, value in upload.items():
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - any conversion failure is a rejection
            return f"{name}: not an array ({type(exc).__name__})"
        kind = kinds.get(name, "any")
        if arr.dtype.kind not in "fiu":
            return f"{name}: dtype {arr.dtype}, expected a real float array"
        if kind in ("point", "tangent", "ambient") and arr.shape != lead + M.shape:
            return f"{name}: shape {arr.shape}, expected {lead + M.shape}"
        if kind == "scalar" and arr.size != 1:
            return f"{name}: expected a scalar, got shape {arr.shape}"
        finite = np.isfinite(arr)
        if not finite.all():
            return f"{name}: {int((~finite).sum())} entries are NaN or inf"
        if kind == "point":
            ok, why = M.check_point(arr, atol=atol)
            if not ok:
                return f"{name}: not a point of {M!r}: {why}"
        elif kind == "tangent" and base is not None:
            ok, why = M.check_tangent(np.broadcast_to(base, arr.shape), arr, atol=atol)
            if not ok:
                return f"{name}: not tangent at the server point: {why}"
    return None
