"""The shape sweep in asv: every kernel of the registry at every point of its family's grid,
on each backend (raw kernels), and auto's choice at that shape. ``rfl-fast bench --sweep``
prints the same grid as ratios against the reference in one run."""

from rfl_fast import kernels
from rfl_fast.kernels.registry import FAMILIES, REGISTRY, sweep_grid
from rfl_fast.app.sweep import _inputs, _size


def _points(family):
    name = next(k for k, v in REGISTRY.items() if v.family == family)
    return [str(p) for p in sweep_grid(name)]

class _Sweep:
    timeout = 300
    number = 1
    repeat = (1, 3, 10.0)

    def setup(self, name, point, backend):
        if REGISTRY[name].family != self.family:
            raise NotImplementedError
        if backend != "auto" and not kernels.is_available(backend):
            raise NotImplementedError
        pt = tuple(int(v) for v in point.strip("()").split(","))
        self.args = _inputs(name, pt)
        size = _size(name, pt)
        _, self.fn = kernels.resolve(name, backend if backend != "auto" else "auto", size)
        self.fn(*self.args)

    def time_kernel(self, name, point, backend):
        self.fn(*self.args)

def _suite(family):
    names = sorted(k for k, v in REGISTRY.items() if v.family == family)
    return type(f"Sweep_{family}", (_Sweep,), {
        "family": family, "params": [names, _points(family), [*kernels.BACKENDS, "auto"]],
        "param_names": ["kernel", "point", "backend"]})

# one suite per kernel family of the registry (SweepStiefel, SweepSquare, SweepVector)
for _family in FAMILIES:
    globals()[f"Sweep{_family.title()}"] = _suite(_family)
