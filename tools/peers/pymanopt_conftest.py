"""conftest.py of pymanopt 2.2.1's tests as tools/peer_tests.py runs them (it replaces the
shipped one, which imports TensorFlow and PyTorch for its backend tests, not run here).

``PEER_MODE=ours``: pymanopt's manifold classes are replaced by rfl_fast's adapters before any
test module imports them; ``PEER_MODE=theirs``: pymanopt's own classes (the baseline). The
seeding is the shipped conftest's (42 before every test)."""

import importlib
import os
import random

import numpy as np
import pytest

import pymanopt.manifolds

SWAPPED = {  # pymanopt's name -> the adapter's (the first that exists: older rfl_fast)
    "Euclidean": ("Euclidean",),
    "Grassmann": ("Grassmann",),
    "Sphere": ("Sphere",),
    "Stiefel": ("Stiefel",),
    "SymmetricPositiveDefinite": ("SymmetricPositiveDefinite", "SPD"),
}

_CREATED = [0]   # calls of an adapter class so far (PEER_MODE=ours)

if os.environ.get("PEER_MODE") == "ours":
    import rfl_fast.interop.pymanopt as ours

    def _counted_new(cls, *args, **kwargs):   # before __init__: a refused signature counts
        _CREATED[0] += 1
        return object.__new__(cls)

    ours.Adapter.__new__ = staticmethod(_counted_new)

    for theirs_name, candidates in SWAPPED.items():
        adapter = next((getattr(ours, n) for n in candidates if hasattr(ours, n)), None)
        if adapter is None:                # an older rfl_fast: that class stays pymanopt's
            continue
        theirs = getattr(pymanopt.manifolds, theirs_name)
        setattr(pymanopt.manifolds, theirs_name, adapter)
        setattr(importlib.import_module(theirs.__module__), theirs_name, adapter)
    assert type(pymanopt.manifolds.Sphere(3)).__module__ == "rfl_fast.interop.pymanopt"


@pytest.fixture(autouse=True)
def initialize_test_state(request):
    random.seed(42)
    np.random.seed(42)
    before = _CREATED[0]
    yield
    if _CREATED[0] > before:   # the test (or its setup) called an adapter: tools/peer_tests.py
        request.node.user_properties.append(("rfl_fast", True))   # counts it
