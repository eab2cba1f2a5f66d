"""The checkpoint loader, fuzzed (issue 38): byte mutations of valid checkpoints and
structural edits of their JSON document and array members, each read and probed as
``resume`` does and, when accepted, resumed for its last round. Every input is accepted or
refused with a ``CheckpointError`` naming the file (or, where the file records another
problem, resume's ``ValueError`` saying so) -- nothing else escapes, nothing crashes the
interpreter (the worker runs in a subprocess), and no input allocates more than a fixed
multiple of its file's size (tracemalloc's peak, which counts NumPy's buffers).

The default counts keep the test to a few seconds; ``test_fuzz_checkpoints_long`` (marked
slow) runs many more.
"""

import subprocess
import sys
import textwrap

import pytest

from subprocess_env import same_package

WORKER = textwrap.dedent(r'''
    import copy, io, json, os, random, sys, tempfile, tracemalloc, warnings
    import numpy as np
    import rfl_fast as rf
    from rfl_fast._files import DEFLATE_MAX_RATIO
    from rfl_fast.errors import CheckpointError, NoSolutionError
    from rfl_fast.federation import checkpoint as ckpt

    warnings.simplefilter("ignore")
    n_bytes, n_struct, seed = map(int, sys.argv[1:4])
    rng = random.Random(seed)
    folder = tempfile.mkdtemp()
    data = np.random.default_rng(0).standard_normal((3, 12, 5)) * np.linspace(2, .5, 5)
    prob = rf.problems.KPCA(data, 2)
    algs = [rf.algorithms.RFedSVRG(0.05, 2, client_option=2, global_option=2),
            rf.algorithms.RFedProj(0.05, 2, batch_size=4),
            rf.algorithms.RFedAGS(0.05, 2, batch_size=4)]
    try:
        import dp_accounting  # noqa: F401
        algs.append(rf.algorithms.PriRFed(0.05, 2, sigma=1.0, clip=1.0, output_option=2))
        algs.append(rf.algorithms.PriRFed(0.05, 1, local="DP-RSVRG", inner_steps=2,
                                          target=(20.0, 1e-5)))
    except ImportError:
        pass
    seeds = []
    for k, alg in enumerate(algs):
        good = os.path.join(folder, f"good{k}.npz")
        part = rf.federation.Bernoulli(0.7) if isinstance(alg, rf.algorithms.RFedAGS) \
            else rf.federation.Uniform(2)
        rf.federation.run(prob, alg, 3, part, seed=k, checkpoint=good, metrics=k % 2 == 0,
                          callback=lambda t, x, row: t == 2)    # stopped at round 2 of 3
        with np.load(good) as z:
            arrays = {name: z[name] for name in z.files}
        doc = json.loads(str(arrays.pop("__json__")))
        seeds.append((open(good, "rb").read(), doc, arrays))
    path = os.path.join(folder, "c.npz")
    counts = [0, 0]
    worst = [0.0]

    def probe(blob):
        with open(path, "wb") as fh:
            fh.write(blob)
        size = len(blob)
        tracemalloc.start()
        try:
            try:
                payload = ckpt.read_run(path)
                try:                        # resume's order: the problem, then the state
                    ckpt.check_problem_matches(payload["problem"], prob)
                except ValueError as exc:   # the file claims another problem: named
                    assert str(exc).startswith("resume: the problem differs"), str(exc)[:300]
                    raise CheckpointError(f"{path}: {exc}") from None
                ckpt.check_state(payload, prob, path)
            finally:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        except CheckpointError as exc:
            text = str(exc)
            assert path in text and len(text) < 1000, text[:300]
            counts[1] += 1
        else:
            counts[0] += 1
            # accepted: it resumes (its remaining rounds) without any error but the library's
            # own NoSolutionError of a run whose accepted settings (an edited step, say) take a
            # client out of the retraction's reach, as a fresh run with them does
            try:
                rf.federation.resume(path, prob, checkpoint=os.path.join(folder, "after.npz"))
            except NoSolutionError as exc:
                assert "no solution" in str(exc) or "not reached" in str(exc), str(exc)[:300]
        worst[0] = max(worst[0], peak / size)
        # read + probe: what the members inflate to (deflate's ratio), the arrays built from
        # them, a fresh run's state and the JSON document -- a fixed multiple of the file
        assert peak <= 4 * DEFLATE_MAX_RATIO * size + 4_000_000, (peak, size)

    def mutate(b):
        b = bytearray(b)
        for _ in range(rng.randint(1, 4)):
            op, i = rng.randrange(5), rng.randrange(max(len(b), 1))
            if op == 0 and b:
                b[i] = rng.randrange(256)
            elif op == 1:
                b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif op == 2:
                del b[i:i + rng.randint(1, 64)]
            elif op == 3:
                j = rng.randrange(max(len(b), 1))
                b[i:i] = b[j:j + rng.randint(1, 64)]
            else:
                del b[i:]
        return bytes(b)

    def spots(d, prefix=()):
        yield prefix
        if isinstance(d, dict):
            for k, v in d.items():
                yield from spots(v, prefix + (k,))
        elif isinstance(d, list):
            for i, v in enumerate(d):
                yield from spots(v, prefix + (i,))

    def at(d, where):
        for k in where:
            d = d[k]
        return d

    PALETTE = [None, True, 0, -1, 1, 2, 3, 10**12, 2**70, 0.5, -0.0, 1e308, float("nan"),
               float("inf"), "", "x", "a0", [], {}, [1, 2], {"__array__": "a0"},
               {"__tuple__": []}, {"__scalar__": 1, "dtype": "<f8"},
               {"__dataclass__": "rfl_fast.__main__:X", "fields": {}},
               {"__dataclass__": "rfl_fast.algorithms.participation:Full", "fields": {}},
               {"__dataclass__": "rfl_fast.algorithms.fedavg_prox:PointState",
                "fields": {"x": {"__array__": "a0"}}}]

    def structural(doc, arrays):
        d, a = copy.deepcopy(doc), dict(arrays)
        places = [p for p in spots(d["payload"]) if p]
        for _ in range(rng.randint(1, 3)):
            kind = rng.randrange(6)
            where = rng.choice(places)
            try:
                parent = at(d["payload"], where[:-1])     # (an earlier edit may have moved it)
                if kind == 0:                       # a value from the palette
                    parent[where[-1]] = copy.deepcopy(rng.choice(PALETTE))
                elif kind == 1:                     # a subtree from elsewhere
                    other = rng.choice(places)
                    parent[where[-1]] = copy.deepcopy(at(d["payload"], other))
                elif kind == 2 and isinstance(parent, dict):   # a key removed
                    del parent[where[-1]]
                elif kind == 3:                     # a number nudged
                    v = parent[where[-1]]
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        parent[where[-1]] = v * rng.choice([-1, 0, 2, 1e9]) + rng.choice([0, 1])
                elif kind == 4 and a:               # an array member changed
                    key = rng.choice(sorted(a))
                    v = a[key]
                    a[key] = rng.choice([v.astype(np.float32), v.T.copy(), v[..., :0],
                                         np.full_like(v, np.nan) if v.dtype.kind == "f" else v,
                                         np.zeros(v.shape + (2,)), v.astype(np.int64),
                                         np.array("text")])
                elif kind == 5 and a:               # an array member dropped or renamed
                    key = rng.choice(sorted(a))
                    v = a.pop(key)
                    if rng.random() < 0.5:
                        a[key + "x"] = v
            except (KeyError, IndexError, TypeError, AttributeError, ValueError):
                pass
        buf = io.BytesIO()
        np.savez(buf, **a, __json__=np.array(json.dumps(d)))
        return buf.getvalue()

    for k in range(n_bytes):
        probe(mutate(seeds[k % len(seeds)][0]))
    for k in range(n_struct):
        _, doc, arrays = seeds[k % len(seeds)]
        probe(structural(doc, arrays))
    for blob, _, _ in seeds:                        # the seeds themselves are accepted
        probe(blob)
    print(f"worst peak/size {worst[0]:.1f}")
    print(*counts)
''')


def _fuzz(n_bytes, n_struct, seed, timeout):
    out = subprocess.run([sys.executable, "-c", WORKER, str(n_bytes), str(n_struct), str(seed)],
                         capture_output=True, text=True, timeout=timeout, **same_package())
    assert out.returncode == 0, (f"exit {out.returncode}", out.stdout[-2000:],
                                 out.stderr[-4000:])
    accepted, refused = (int(v) for v in out.stdout.split()[-2:])
    print(out.stdout.strip().splitlines()[-2], f"{accepted} accepted, {refused} refused")
    return accepted, refused


def test_fuzz_checkpoints_briefly():
    """25 byte mutations and 25 structural edits of five valid checkpoints (RFedSVRG,
    RFedProj, RFedAGS, PriRFed with DP-RSGD and DP-RSVRG), in a subprocess: each accepted
    (and then resumed) or refused with a CheckpointError naming the file, within the memory
    bound."""
    accepted, refused = _fuzz(25, 25, 1, 600)
    assert accepted + refused >= 53 and refused > 25 and accepted >= 3


@pytest.mark.slow
def test_fuzz_checkpoints_long():
    """The same with 2,000 of each."""
    accepted, refused = _fuzz(2000, 2000, 2, 3600)
    assert accepted + refused >= 4003 and refused > 2000
