import numpy as np
import pytest

import rfl_fast as rf


@pytest.fixture(autouse=True)
def _seeded():
    """Legacy global RNG seeded for any code that uses it; tests pass explicit rngs."""
    np.random.seed(0)


@pytest.fixture(params=rf.available_backends())
def backend(request):
    """Run the test under every importable backend ("cpp", "numba", "numpy")."""
    with rf.backend(request.param):
        yield request.param
