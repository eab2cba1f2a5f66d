"""Manifold checks of the algorithms (private): retractions with an exact inverse, transports.

Every check names the argument; the scalar checks (``check_int``, ``check_positive``, ...)
are :mod:`rfl_fast._validation`'s.
"""

from ..errors import InvalidParameterError

__all__ = ["inverse_pair", "transport_name"]


def inverse_pair(M, retraction, who):
    """The retraction name to use on ``M``: one that has an exact inverse.

    ``retraction=None`` picks the first of ``M.retractions`` that is also in
    ``M.inverse_retractions`` (Sphere, SPD, Lorentz, Euclidean: ``"exp"``, i.e. Exp/Log;
    Stiefel: ``"polar"``). Raises an ``InvalidParameterError`` (``param`` "retraction", ``owner``
    ``who``) naming the manifold and what is missing.
    """
    pairs = tuple(r for r in M.retractions if r in M.inverse_retractions)
    if retraction is None:
        if not pairs:
            raise InvalidParameterError(
                "retraction", f"manifold {M!r} has no retraction with an exact inverse "
                f"(retractions {M.retractions}, inverses {M.inverse_retractions}); {who} needs "
                f"both", who)
        return pairs[0]
    if retraction not in M.retractions:
        raise InvalidParameterError("retraction", f"manifold {M!r} has no retraction "
                                    f"{retraction!r}; available: {M.retractions}", who)
    if retraction not in M.inverse_retractions:
        raise InvalidParameterError("retraction", f"the retraction {retraction!r} of {M!r} has no "
                                    f"exact inverse `inv_retr`, which {who} needs; retractions "
                                    f"with one: {pairs}", who)
    return retraction


def transport_name(M, transport, who, needed_for):
    """The vector transport to use on ``M``: ``transport``, or the manifold's first if None.

    Raises an ``InvalidParameterError`` (``param`` "transport", ``owner`` ``who``) if ``M`` has
    no transport (saying that ``needed_for`` needs one) or no transport of that name.
    """
    if not M.transports:
        raise InvalidParameterError("transport", f"manifold {M!r} provides no vector transport "
                                    f"(`transport`), which {needed_for} needs", who)
    if transport is None:
        return M.transports[0]
    if transport not in M.transports:
        raise InvalidParameterError("transport", f"manifold {M!r} has no transport "
                                    f"{transport!r}; available: {M.transports}", who)
    return transport
