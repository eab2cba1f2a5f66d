"""Adapters that let other manifold libraries run on rfl_fast's manifolds and kernels.

* :mod:`rfl_fast.interop.pymanopt`: our manifolds as pymanopt manifolds, so pymanopt's
  solvers (steepest descent, conjugate gradient, trust regions) run on our retractions;
* :mod:`rfl_fast.interop.geomstats`: our SPD, hyperboloid and sphere maps behind geomstats'
  metric interface, so its learning tools (``FrechetMean``, ``TangentPCA``) use them.

Each needs its library (``pip install "rfl_fast[interop]"``); importing an adapter without it
raises an ``ImportError`` saying what to install. Nothing is imported here, so
``import rfl_fast.interop`` never needs either library.
"""
