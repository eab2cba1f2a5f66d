"""Docstrings written once: an override documents what differs, the base class the rest."""

import inspect
import re

__all__ = ["inherit_sections"]

#: The first numpydoc section header of a docstring (``Parameters`` and its underline, ...).
_SECTIONS = re.compile(r"^(Parameters|Returns|Yields|Raises|Notes|Examples)\n-{3,}$", re.M)


def inherit_sections(cls):
    """Give each method ``cls`` overrides with a summary of its own (what differs: a formula, a
    domain, an error case) but no numpydoc sections the sections of the method it overrides, so
    that ``help``, ``inspect.getdoc`` and Sphinx show both; the sections are written once, in
    the base class. An override without a docstring inherits the whole one by itself."""
    for name, fn in vars(cls).items():
        own = inspect.getdoc(fn) if inspect.isfunction(fn) and fn.__doc__ else None
        if own is None or _SECTIONS.search(own):
            continue
        base = next((inspect.getdoc(getattr(k, name)) for k in cls.__mro__[1:]
                     if name in vars(k) and getattr(k, name).__doc__), None)
        found = _SECTIONS.search(base or "")
        if found:
            fn.__doc__ = f"{own}\n\n{base[found.start():]}"
