"""Checked by mypy in tests/test_typing.py: the public API's types reach user code."""

import numpy as np

import rfl_fast as rf

M = rf.Stiefel(5, 2)
X = M.random_point(rng=0)
U = M.proj(X, np.ones((5, 2)))
reveal_type(M.retr(X, U))  # noqa: F821
reveal_type(M.inv_retr(X, M.retr(X, U, "qr"), "qr"))  # noqa: F821
reveal_type(rf.SPD(3).dist(np.eye(3), 2 * np.eye(3)))  # noqa: F821
reveal_type(rf.Sphere(3).retr_transp([1.0, 0, 0], [0, 0.1, 0], [0, 0, 1.0]))  # noqa: F821
reveal_type(rf.linalg.sym_logm(np.eye(3)))  # noqa: F821
reveal_type(rf.get_include())  # noqa: F821
M.retr(X, U, method=3)  # wrong: a method name is a str
