"""conftest.py of geomstats 2.8.0's tests as tools/peer_tests.py runs them (the shipped one,
two hook imports, is kept at the end).

``PEER_MODE=ours``: geomstats' metric classes are replaced by rfl_fast's (the module attribute
each space's ``default_metric()`` returns, and the name test modules import) before any test
module is imported; ``PEER_MODE=theirs``: geomstats' own (the baseline). The tests draw
dimensions with ``random`` at import and data with NumPy's global generator: both are seeded
here (at import, and per test from its id), so the two modes run the same cases."""

import os
import random
import sys
import types
import zlib

import numpy as np
import pytest

# geomstats.test.parametrizers imports nbformat and nbconvert at the top for its notebook
# tests, which are not run here: empty stand-ins instead of Jupyter
for _name in ("nbformat", "nbconvert", "nbconvert.preprocessors"):
    _module = types.ModuleType(_name)
    _module.ExecutePreprocessor = None
    sys.modules.setdefault(_name, _module)

random.seed(0)
np.random.seed(0)

import rfl_fast.interop.geomstats as ours  # noqa: E402  (imports geomstats, NumPy 2.4 shim)

SWAPPED = {  # module of geomstats.geometry -> metric class name (the same name in ours)
    "spd_matrices": "SPDAffineMetric",
    "hypersphere": "HypersphereMetric",
    "hyperboloid": "HyperboloidMetric",
    "stiefel": "StiefelCanonicalMetric",
    "grassmannian": "GrassmannianCanonicalMetric",
}

_OURS = ()      # rfl_fast's metric classes swapped in (PEER_MODE=ours)

if os.environ.get("PEER_MODE") == "ours":
    import importlib

    for _module_name, _class_name in SWAPPED.items():
        if not hasattr(ours, _class_name):   # an older rfl_fast: that class stays geomstats'
            continue
        _module = importlib.import_module(f"geomstats.geometry.{_module_name}")
        setattr(_module, _class_name, getattr(ours, _class_name))
        _OURS += (getattr(ours, _class_name),)
    from geomstats.geometry.hypersphere import Hypersphere

    assert type(Hypersphere(3).metric) is ours.HypersphereMetric


@pytest.fixture(autouse=True)
def _seeded(request):
    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    np.random.seed(seed)
    yield
    space = getattr(request.instance, "space", None)
    if isinstance(getattr(space, "metric", None), _OURS):        # tools/peer_tests.py counts
        request.node.user_properties.append(("rfl_fast", True))  # the tests on our metrics


from geomstats.test.conf import (  # noqa: E402,F401  (the shipped conftest.py)
    pytest_collection_modifyitems,
    pytest_make_parametrize_id,
)
