"""Step-size schedules: ``schedule(t) -> float`` for round ``t`` (0-based).

Algorithms accept a plain number (a fixed step) or a schedule wherever they take a step size.
"""

from dataclasses import dataclass

from .._validation import COUNT, POSITIVE, Checked, check_positive

__all__ = ["Schedule", "Constant", "Decaying", "as_schedule"]


class Schedule(Checked):
    """Base class: a callable ``t -> step`` with ``t`` the round index (0-based)."""

    def __call__(self, t):
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(Schedule):
    """The fixed step ``value``.

    Parameters
    ----------
    value : float
        The step, > 0.
    """

    value: float

    CHECKS = {"value": POSITIVE}

    def __call__(self, t):
        return self.value


@dataclass(frozen=True)
class Decaying(Schedule):
    """Huang et al. 2025's decaying rule: ``a_0`` at ``t = 0``, then ``a_t = a_0 / (beta + c_t)**power``
    with ``c_t = floor(t / dec)`` (``c_t`` grows by one every ``dec`` rounds).

    ``power = 1`` is the rule of the experiments (Huang et al. 2025, section "decaying step sizes");
    ``power`` in ``(1/2, 1]`` is the family of its Theorem 3.

    Parameters
    ----------
    a0 : float
        First step, > 0.
    beta : float
        Offset, > 0.
    dec : int
        Rounds per decay stage, >= 1.
    power : float
        Exponent, > 0.
    """

    a0: float
    beta: float = 1.0
    dec: int = 1
    power: float = 1.0

    CHECKS = {"a0": POSITIVE, "beta": POSITIVE, "dec": COUNT, "power": POSITIVE}

    def __call__(self, t):
        if t == 0:
            return self.a0
        return self.a0 / (self.beta + t // self.dec) ** self.power


def as_schedule(step, name="step"):
    """``step`` as a :class:`Schedule`: a number becomes ``Constant(step)`` (checked > 0)."""
    if isinstance(step, Schedule):
        return step
    return Constant(check_positive(step, name))
