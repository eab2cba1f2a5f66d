"""Adding a manifold, a kernel and an algorithm touches no hand list: each is registered once,
in its registry (``rfl_fast.manifolds.MANIFOLDS``, ``rfl_fast.kernels.REGISTRY``,
``rfl_fast.algorithms.ALGORITHMS``), and everything else derives from it. The toys below are
defined here and registered with ``monkeypatch``, which removes them again after the test (each
xdist worker is its own process, so no other test sees them)."""

from dataclasses import dataclass, replace

import numpy as np
import pytest

import rfl_fast as rf
import test_manifold_identities as identities
from manifold_cases import CASES, Case
from rfl_fast.algorithms import FederatedAlgorithm, PointState
from rfl_fast.algorithms.base import participant_weights, stacked
from rfl_fast.app import names
from rfl_fast.app.config import build_plan, resolve_config
from rfl_fast.kernels import _dispatch
from rfl_fast.federation import Full, run, tangent_mean
from rfl_fast.flower import manifold_from_spec, manifold_spec
from rfl_fast.flower.spec import build_algorithm
from rfl_fast.kernels.registry import Kernel


def _toy_axpy(x, u):
    """The toy kernel's reference: ``(x, u) -> x + 2u`` on vectors (N, d)."""
    return x + 2.0 * u


def _toy_inputs(rng, n_items, d):
    """The toy kernel's random arguments for the tests and benchmarks."""
    return rng.standard_normal((n_items, d)), rng.standard_normal((n_items, d))


class ToyPlane(rf.Euclidean):
    """A toy manifold: flat R^d whose exponential map (hence retraction) is the toy kernel."""

    def exp(self, x, u, *, backend=None):
        x, u = self._point_vector(x, u)
        return rf.kernels.call("toy_axpy", x, 0.5 * u, backend=backend)


@dataclass(frozen=True)
class ToyRGD(FederatedAlgorithm):
    """One Riemannian gradient step per client and round; tangent-space mean on the server."""

    step: float = 0.05

    array_kinds = {"x": "point"}
    uploads = {"update": ("x",)}

    def init_server(self, problem, x0, ctx):
        return PointState(x=np.array(x0))

    def broadcast(self, problem, state, ctx):
        return {"x": state.x}

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        x = stacked(msg["x"], idx.size)
        return {"x": problem.manifold.retr(x, -self.step * problem.rgrad(idx, x))}, cstate, memo

    def server_update(self, problem, state, idx, upload, ctx):
        w = participant_weights(problem, idx)
        return replace(state, x=tangent_mean(problem.manifold, state.x, upload["x"],
                                             weights=w)), None


@pytest.fixture
def toys(monkeypatch):
    monkeypatch.setitem(rf.kernels.REGISTRY, "toy_axpy",
                        Kernel("toy_axpy", (1, 1), 1, "vector", reference=_toy_axpy,
                               inputs=_toy_inputs))
    monkeypatch.setitem(rf.manifolds.MANIFOLDS, "ToyPlane", ToyPlane)
    monkeypatch.setitem(CASES, ToyPlane, Case((ToyPlane(3), ToyPlane(7))))
    monkeypatch.setitem(rf.algorithms.ALGORITHMS, "ToyRGD", ToyRGD)
    yield
    _dispatch.forget_choices()      # drops the dispatcher's cached resolution of toy_axpy


def test_a_toy_kernel_dispatches_on_every_choice_that_has_it(toys):
    x, u = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    assert rf.kernels.KERNELS["toy_axpy"] == ((1, 1), 1)
    for choice in ("auto", "numpy"):
        np.testing.assert_array_equal(rf.kernels.call("toy_axpy", x, u, backend=choice),
                                      x + 2.0)
        with rf.backend(choice):
            assert rf.kernels.resolve("toy_axpy", shape=x.shape)[0] == "numpy"
    with pytest.raises(ValueError, match="u"):        # call checks it like any kernel
        rf.kernels.call("toy_axpy", x, np.ones((2, 4)))


def test_a_toy_kernel_is_benchmarked_from_its_declaration(toys, capsys):
    from rfl_fast.app import bench

    (row,) = bench.run([("toy_axpy", (8, 5))], repeats=1, bandwidth=1e10, warmup_s=0.0)
    assert row["agree"]["numpy"] and row["times"]["numpy"] > 0
    assert "toy_axpy" in capsys.readouterr().out


@pytest.mark.parametrize("check", [
    identities.test_random_points_and_tangents_are_valid,
    identities.test_proj_is_idempotent_and_tangent,
    identities.test_exp_log_dist,
    identities.test_batched_equals_per_item_loop_and_broadcasts,
    identities.test_float32_works_to_float32_tolerance,
], ids=lambda f: f.__name__)
def test_a_toy_manifold_passes_the_shared_identities(toys, check):
    for M in CASES[ToyPlane].instances:
        for backend in ("numpy", "auto"):
            with rf.backend(backend):
                check(M, backend)
        for method in M.retractions:
            identities.test_retraction_identities(M, method, "auto")


def test_a_toy_manifold_is_registered_and_crosses_the_wire(toys):
    M = ToyPlane(4)
    assert manifold_from_spec(manifold_spec(M)) == M
    assert manifold_from_spec("Product(ToyPlane(2), Sphere(3))") \
        == rf.Product(ToyPlane(2), rf.Sphere(3))


def test_a_toy_algorithm_runs_by_name_from_an_experiment_file_and_flower(toys):
    assert "ToyRGD" in names.ALGORITHMS and names.get("algorithm", "toyrgd") is ToyRGD
    cfg = resolve_config({"rounds": 3, "problem": {"type": "KPCA", "r": 2},
                          "data": {"source": "heterogeneous_gaussian", "n_clients": 3,
                                   "n_samples": 12, "d": 4},
                          "participation": {"type": "full"},
                          "algorithm": [{"name": "ToyRGD", "step": 0.1}]})
    (_, alg), = build_plan(cfg).algorithms
    assert alg == ToyRGD(step=0.1) == build_algorithm("ToyRGD", {"step": 0.1})
    problem = build_plan(cfg).problem
    res = run(problem, alg, rounds=3, participation=Full(), seed=0)
    assert res.x.shape == problem.manifold.shape and np.isfinite(res.history["grad_norm"]).all()


def test_the_toys_are_gone_after_the_fixture():
    assert "toy_axpy" not in rf.kernels.KERNELS and "ToyPlane" not in rf.manifolds.MANIFOLDS
    assert "ToyRGD" not in names.ALGORITHMS
