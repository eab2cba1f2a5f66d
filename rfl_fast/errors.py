"""Exceptions raised by rfl_fast. All input errors are ``ValueError`` subclasses (a wrong
type of argument: ``ParameterTypeError``, a ``TypeError``)."""

__all__ = [
    "BackendUnavailableError",
    "CheckpointError",
    "MethodNotAvailableError",
    "NotOnManifoldError",
    "NoSolutionError",
    "ParameterError",
    "InvalidParameterError",
    "ParameterTypeError",
]


class BackendUnavailableError(RuntimeError):
    """A backend was requested that is not installed or lacks the kernel."""


class MethodNotAvailableError(NotImplementedError):
    """A manifold does not provide the requested operation (e.g. ``Lorentz.project``)."""


class NotOnManifoldError(ValueError):
    """A point or tangent vector is off the manifold (checked with ``validate=True``)."""


class NoSolutionError(ValueError):
    """An operation has no (unique) solution for the given input, e.g. an inverse
    retraction when ``X'Y`` is singular, or Log at antipodal points."""


class CheckpointError(ValueError):
    """A checkpoint file is missing pieces, corrupt, truncated, crafted or of another format
    version; the message names the file."""


class ParameterError(Exception):
    """An error about one argument, its parts as attributes (after scikit-learn's
    ``InvalidParameterError``): the text is formatted from them, ``"<owner>: <param>:
    <reason>"``, so a caller maps the error to its own name for the argument (an experiment
    file's ``algorithm[0].step``) from ``param`` without reading the text. Raised as
    :class:`InvalidParameterError` (a ``ValueError``: a wrong value) or
    :class:`ParameterTypeError` (a ``TypeError``: a wrong type).

    Parameters
    ----------
    param : str
        The argument, as its owner names it (``"step"``, ``"batch_size"``, ``"target"``).
    reason : str, optional
        What is wrong; default ``"expected <expected>, got <got>"``.
    owner : str, optional
        The class or function the argument belongs to (``"RFedAvg"``).
    expected : str, optional
        The constraint, in words (``"a value > 0"``, ``"an int >= 1"``).
    got : str, optional
        The given value as shown (a few hundred characters at most).

    Examples
    --------
    >>> try:
    ...     RFedAvg(step=-1.0, local_steps=2)
    ... except ParameterError as e:
    ...     e.owner, e.param, e.expected, e.got
    ('RFedAvg', 'step', 'a value > 0', '-1')
    """

    def __init__(self, param, reason=None, owner=None, expected=None, got=None):
        super().__init__(param, reason, owner, expected, got)      # args: pickled, rebuilt
        self.param, self.owner, self.expected, self.got = param, owner, expected, got
        self.reason = f"expected {expected}, got {got}" if reason is None else reason

    def __str__(self):
        return f"{self.owner}: {self.param}: {self.reason}" if self.owner else \
            f"{self.param}: {self.reason}"

    def within(self, owner):
        """This error as raised by ``owner``.

        Parameters
        ----------
        owner : str
            A class or function name.
        """
        return type(self)(self.param, self.reason, owner, self.expected, self.got)


class InvalidParameterError(ParameterError, ValueError):
    """An argument of the right type with a wrong value (:class:`ParameterError`)."""


class ParameterTypeError(ParameterError, TypeError):
    """An argument of a wrong type (:class:`ParameterError`)."""
