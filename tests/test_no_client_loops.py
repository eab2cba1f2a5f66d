"""No Python-level loop over clients on a round's path: every registered algorithm does a round's
work in batched calls over the participants, so the number of Python function calls a round
makes inside the package does not grow with the number of participants k. (The per-client
random streams are created and drawn in comprehensions of C calls: one generator per client,
as the stream design ``(seed, t, i)`` requires, but no Python function per client.)

A round's calls are counted as those of a run of 3 rounds minus those of a run of 2 (set-up,
such as a private run's per-client accounting, counted in neither difference), at k = 6 and
k = 24 participants. A loop over clients adds at least one call per added client (18) to some
function; data-dependent branches (the BB steps' safeguards) move a few counts either way, so
the test refuses a growth of 18 or more in any function or in the total."""

import collections
import pathlib
import sys

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.algorithms import ALGORITHMS
from rfl_fast.federation import Full, Uniform, run
from rfl_fast.problems import KPCA, SPDMean

PACKAGE = str(pathlib.Path(rf.__file__).parent)

#: constructor arguments of the registered algorithms beyond (step, local_steps); each entry a
#: list of variants (every registered name is run; one not listed takes (0.01, 2) alone)
EXTRA = {"PriRFed": [dict(sigma=0.1, clip=1.0), dict(sigma=0.1, clip=1.0, batch_size=4),
                     dict(local="DP-RSVRG", inner_steps=2, sigma=0.1, clip=1.0)],
         "RFedProx": [dict(mu=0.1)], "RFedSVRG2BBS": [dict(eta_min=0.001, eta_max=0.5)]}


def _variants():
    for name, cls in ALGORITHMS.items():
        for kw in EXTRA.get(name, [{}]):
            if name == "PriRFed" and kw.get("local") == "DP-RSVRG":
                yield pytest.param(cls, (0.01, 1), kw, id=f"{name}-DP-RSVRG")
            else:
                yield pytest.param(cls, (0.01, 2), kw, id=f"{name}-{'-'.join(kw) or 'default'}")
    yield pytest.param(ALGORITHMS["RFedAvg"], (0.01, 2), dict(batch_size=4), id="RFedAvg-batch")


def _calls_per_round(problem, alg, participation):
    def count(rounds):
        calls = collections.Counter()

        def profile(frame, event, arg):
            if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
                calls[(frame.f_code.co_filename, frame.f_code.co_name)] += 1

        sys.setprofile(profile)
        try:
            run(problem, alg, rounds, participation=participation, seed=0, metrics=False)
        finally:
            sys.setprofile(None)
        return calls

    run(problem, alg, 1, participation=participation, seed=0, metrics=False)  # warm caches
    return count(3) - count(2)


def _kpca(k):
    return KPCA(np.random.default_rng(k).standard_normal((k, 12, 10)), 2)


def _spd(k):
    a = np.random.default_rng(k).standard_normal((k, 6, 3, 3))
    return SPDMean(a @ np.swapaxes(a, -1, -2) + np.eye(3))


@pytest.mark.parametrize("cls,args,kw", list(_variants()))
@pytest.mark.parametrize("make", [pytest.param(_kpca, id="kPCA"),
                                  pytest.param(_spd, id="SPDMean", marks=pytest.mark.full)])
def test_a_rounds_python_calls_do_not_grow_with_the_participants(cls, args, kw, make):
    alg = cls(*args, **kw)
    small, large = make(6), make(24)
    try:
        alg.validate(small)
    except (ValueError, TypeError) as exc:
        pytest.skip(f"{alg.name} does not take {type(small).__name__}: {exc}")
    a = _calls_per_round(small, alg, Full())
    b = _calls_per_round(large, alg, Full())
    added = 24 - 6
    grew = {f"{pathlib.Path(f).name}:{fn}": (a[(f, fn)], b[(f, fn)])
            for f, fn in set(a) | set(b) if b[(f, fn)] - a[(f, fn)] >= added}
    assert not grew, grew
    assert sum(b.values()) - sum(a.values()) < added, (sum(a.values()), sum(b.values()))
    assert sum(a.values()) > 0


def test_the_count_sees_a_loop_over_clients():
    """The check is not vacuous: a round that calls a package function once per client (the
    per-client generator lookup) grows with k."""
    from rfl_fast.federation.context import ClientRandom

    def count(k):
        calls = collections.Counter()

        def profile(frame, event, arg):
            if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
                calls[frame.f_code.co_name] += 1

        rng = ClientRandom(0, 0, np.arange(k))
        sys.setprofile(profile)
        try:
            [rng.generator(j) for j in range(k)]
        finally:
            sys.setprofile(None)
        return calls["generator"]

    assert count(24) > count(6)
    assert Uniform(3)  # the participation classes import cleanly alongside

