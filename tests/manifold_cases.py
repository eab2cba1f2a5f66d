"""The manifold test cases, one registry: ``CASES`` holds one entry per class of
:data:`rfl_fast.manifolds.MANIFOLDS` (``test_every_manifold_class_has_cases`` fails for a class
without one), with what the shared identity suite (``test_manifold_identities.py``) needs -- its
instances, the maps it has no closed form for (explicit expected failures, never skips), whether
transports are tested between nearby points only, whether it has ``project``, and how two arrays
that represent one point compare. A product's entry derives all of these from its factors'
entries. Other tests that run "every manifold" take ``instances()`` from here.
"""

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import rfl_fast as rf


def _same(M, x):
    return x


@dataclass(frozen=True)
class Case:
    """What the suite needs to know of one manifold class (a value, or a function of the
    instance)."""

    instances: tuple
    lacks: Any = frozenset()        # maps without a closed form: "log", "parallel transport"
    nearby_only: Any = False        # transports only between nearby points (an antipode exists)
    project: Any = True             # has ``project`` (the nearest point)
    canonical: Callable = _same     # (M, x) -> one array per point (quotients: a normal form)


def trait(M, name):
    value = getattr(CASES[type(M)], name)
    return value(M) if callable(value) and name != "canonical" else value


def _of_factors(name, combine):
    return lambda M: combine(trait(f, name) for f in M.factors)


def _canonical_product(M, x):
    batch = x.shape[:-1]
    return np.concatenate([trait(f, "canonical")(f, part).reshape(batch + (-1,))
                           for f, part in zip(M.factors, M.split(x))], axis=-1)


CASES = {
    rf.Euclidean: Case((rf.Euclidean(4, 3),)),
    rf.Sphere: Case((rf.Sphere(5), rf.Sphere(784)), nearby_only=True),
    rf.Stiefel: Case((rf.Stiefel(7, 3), rf.Stiefel(4, 4), rf.Stiefel(50, 1)),
                     lacks=frozenset({"log", "parallel transport"})),
    rf.Grassmann: Case((rf.Grassmann(7, 3), rf.Grassmann(50, 1), rf.Grassmann(6, 5)),
                       canonical=lambda M, x: x @ np.swapaxes(x, -1, -2)),   # the projector
    rf.SPD: Case((rf.SPD(4), rf.SPD(1)), project=False),
    rf.Lorentz: Case((rf.Lorentz(2), rf.Lorentz(5)), nearby_only=True, project=False),
    rf.Product: Case(
        (rf.Product(rf.Sphere(3), rf.Stiefel(5, 2)),
         rf.Product(rf.SPD(2), rf.Lorentz(2), rf.Euclidean(3)),
         rf.Product(rf.Grassmann(5, 2), rf.Sphere(4)),
         rf.Product(rf.Product(rf.Grassmann(4, 1), rf.SPD(2)), rf.Euclidean(2, 2))),
        lacks=_of_factors("lacks", lambda s: frozenset().union(*s)),
        nearby_only=_of_factors("nearby_only", any),
        project=_of_factors("project", all),
        canonical=_canonical_product),
}


def instances(classes=None):
    """Every registered instance (of ``classes`` only, if given), in registry order."""
    return [M for cls, case in CASES.items() if classes is None or cls in classes
            for M in case.instances]


MANIFOLDS = instances()


def one_each(skip=()):
    """The first instance of every registered class but those in ``skip``, in registry order:
    "every manifold" for tests that need one of each."""
    return [case.instances[0] for cls, case in CASES.items() if cls not in skip]
