"""Exceptions raised by rfl_fast. All input errors are ``ValueError`` subclasses."""

__all__ = [
    "BackendUnavailableError",
    "CheckpointError",
    "MethodNotAvailableError",
    "NotOnManifoldError",
    "NoSolutionError",
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
