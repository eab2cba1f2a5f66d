"""Checked by mypy in tests/test_typing.py: the public API's types reach user code."""

import numpy as np

import rfl_fast as rf

M = rf.Stiefel(5, 2)
X = M.random_point(rng=0)
U = M.proj(X, np.ones((5, 2)))
reveal_type(M.retr(X, U))  # noqa: F821
reveal_type(M.inv_retr(X, M.retr(X, U, "qr"), "qr"))  # noqa: F821
reveal_type(rf.SPD(3).dist(np.eye(3), 2 * np.eye(3)))  # noqa: F821
reveal_type(rf.linalg.sym_logm(np.eye(3)))  # noqa: F821
reveal_type(rf.get_include())  # noqa: F821
M.retr(X, U, method=3)  # wrong: a method name is a str

from rfl_fast.algorithms import RFedAvg  # noqa: E402
from rfl_fast.federation import run  # noqa: E402
from rfl_fast.privacy import clip_factors, dp_rsgd_sigma  # noqa: E402
from rfl_fast.problems import SpherePCA  # noqa: E402

P = SpherePCA([np.eye(3), 2 * np.eye(3)])
R = run(P, RFedAvg(step=0.1, local_steps=2, batch_size=None), rounds=1)
reveal_type(R.x)  # noqa: F821
reveal_type(P.f(R.x))  # noqa: F821
reveal_type(P.rgrad([0, 1], np.stack([R.x, R.x])))  # noqa: F821
reveal_type(clip_factors([1.0, 2.0], 1.0))  # noqa: F821
reveal_type(dp_rsgd_sigma(1.0, 1e-5, n_samples=100, local_steps=5))  # noqa: F821
with rf.backend("numpy") as chosen:
    reveal_type(chosen)  # noqa: F821
reveal_type(rf.get_threads())  # noqa: F821
dp_rsgd_sigma(1.0, 1e-5, n_samples=100, local_steps="5")  # wrong: local_steps is an int
