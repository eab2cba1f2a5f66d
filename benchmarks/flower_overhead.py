"""What Flower costs an rfl_fast exchange: rfl_fast's ClientApp against a trivial echo app on the
same loopback deployment, and the in-process protocol against the simulation.

**Deployment** (default). For each node count (``--nodes``, default 3 and 10), a
:class:`~rfl_fast.flower.local.LocalFederation` (one SuperLink and n SuperNodes on 127.0.0.1)
runs, one after the other:

* ``echo``: a trivial Flower app (imports ``flwr`` and numpy only): every exchange sends each
  node a 784 x 5 float64 array and the ClientApp sends it back; one untimed exchange first (as
  rfl_fast's ``hello``), then ``--rounds`` timed ones;
* rfl_fast's app on ``synthetic_kpca`` (d = 784, r = 5, 60 samples a client): RFedAvg (one
  exchange a round) and RFedSVRG (two: the full gradient, then the local steps);
* ``echo`` again (its two runs pooled: a load change on the shared machine hits both sides);

then a second federation of private nodes (``dp-*`` node config: such a node runs PriRFed
only) runs echo, PriRFed (one exchange a round) and echo. Per-exchange seconds: echo, each
``send_and_receive``'s wall time; rfl_fast, each round's ``wall`` (its History) divided by the
round's exchanges. Printed: medians, the ratio rfl_fast / echo, and the machine's load average
(``os.getloadavg``) before and after every run.

``--poll S`` sets Flower's ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (how often a SuperNode's
SuperExec asks for a ClientApp task to start, default 1 s) for the nodes; ``--idle S``
measures the CPU seconds the deployment's processes (SuperLink, SuperNodes and their
SuperExecs) use per second while no run is going: what the polling costs.

**In process** (``--in-process``). For RFedAvg, RFedSVRG and PriRFed on the same task:
the median round wall time of :func:`rfl_fast.federation.run` (BLAS on one thread, the
engine's default) and of :func:`rfl_fast.flower.run_federation` over an
:class:`~rfl_fast.flower.InProcessLink` (every message through the client's whole path: its
schema, the local problem from the client's cache, packing), once with BLAS limited to one
thread as the engine does and once with BLAS as the process has it; medians of ``--repeats``
runs, and the largest difference between the final iterates (RFedSVRG's simulation gathers its
full gradient from the pooled matrix, a reordered sum, and PriRFed's batches its clients: equal
to rounding).

Loopback only (127.0.0.1). Slow: Flower's SuperNode and ServerApp poll every 3 s, so an
exchange takes seconds; run it at small round counts.

    python benchmarks/flower_overhead.py [--nodes 3 10] [--rounds 4] [--poll S] [--idle S]
                                         [--only echo,RFedAvg,...] [--json PATH]
    python benchmarks/flower_overhead.py --in-process [--nodes 3] [--rounds 20] [--repeats 5]
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

D, R, SAMPLES = 784, 5, 60
ALGORITHMS = {
    "RFedAvg": ({"step": 0.1, "local_steps": 5}, 1),
    "RFedSVRG": ({"step": 0.1, "local_steps": 5}, 2),
    "PriRFed": ({"step": 0.01, "local_steps": 5, "sigma": 0.5, "clip": 1.0,
                 "batch_size": 10}, 1),
}
DP_NODE = {"dp-sigma": 0.5, "dp-clip": 1.0, "dp-epsilon": 1e6, "dp-delta": 1e-5}

ECHO_APP = '''"""A trivial Flower app: each exchange sends every node a 784 x 5 array back."""
import json
import os
import time

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

client = ClientApp()
server = ServerApp()


@client.train("echo")
def echo(msg: Message, context: Context) -> Message:
    return Message(RecordDict({"x": msg.content["x"]}), reply_to=msg)


@server.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    out, n, rounds = str(cfg["output-dir"]), int(cfg["num-clients"]), int(cfg["rounds"])
    deadline = time.monotonic() + float(cfg["node-wait"])
    while len(list(grid.get_node_ids())) < n and time.monotonic() < deadline:
        time.sleep(0.5)
    nodes = sorted(grid.get_node_ids())
    x = np.random.default_rng(0).standard_normal((784, 5))
    rows = []
    for t in range(rounds + 1):                 # exchange 0 untimed, as rfl_fast's hello
        msgs = [Message(RecordDict({"x": ArrayRecord({"x": Array(x)})}), dst_node_id=node,
                        message_type="train.echo", group_id=str(t)) for node in nodes]
        w0 = time.perf_counter()
        replies = list(grid.send_and_receive(msgs, timeout=float(cfg["timeout"])))
        wall = time.perf_counter() - w0
        ok = sum(not r.has_error() and np.array_equal(r.content["x"]["x"].numpy(), x)
                 for r in replies)
        rows.append({"wall": wall, "ok": ok, "nodes": len(nodes)})
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "echo.tmp"), "w") as f:
        json.dump(rows, f)
    os.replace(os.path.join(out, "echo.tmp"), os.path.join(out, "echo.json"))
'''


def run_config(algorithm, n, rounds, seed=0):
    kwargs = ALGORITHMS[algorithm][0] if algorithm in ALGORITHMS else {}
    return {"algorithm": algorithm if algorithm in ALGORITHMS else "RFedAvg",
            "algorithm-kwargs": json.dumps(kwargs), "participation": "Full",
            "rounds": rounds, "seed": seed, "num-clients": n, "task": "synthetic_kpca",
            "task-kwargs": json.dumps({"n_clients": n, "samples": SAMPLES, "d": D, "r": R,
                                       "seed": 1}),
            "timeout": 600.0, "node-wait": 180.0}


def load():
    return "{:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


# ---------------------------------------------------------------------------- deployment

def _cpu_seconds(pids):
    """User + system CPU seconds of the processes ``pids`` (those still readable)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def idle_cpu(fed, seconds):
    """CPU seconds per second that the deployment's processes use while no run is going."""
    from rfl_fast.flower.local import _descendants
    pids = [p.pid for p in fed.procs.values()]
    pids += [c for p in list(pids) for c in _descendants(p)]
    c0, w0 = _cpu_seconds(pids), time.perf_counter()
    time.sleep(seconds)
    return (_cpu_seconds(pids) - c0) / (time.perf_counter() - w0)


def one_run(fed, what, n, rounds, log):
    """``(per-exchange seconds list, the run's record)`` of ``what`` (``echo`` or an
    algorithm) on ``fed``."""
    rc = run_config(what, n, rounds)
    before = load()
    w0 = time.perf_counter()
    if what == "echo":
        out = fed.run(rc, timeout=900.0 + 120.0 * rounds, module=ECHO_APP, wait_for="echo.json")
        with open(os.path.join(out["out"], "echo.json")) as f:
            rows = json.load(f)
        bad = [r for r in rows if r["ok"] != n or r["nodes"] != n]
        if bad:
            raise RuntimeError(f"echo: exchanges without all {n} replies: {bad}")
        per = [r["wall"] for r in rows[1:]]
    else:
        out = fed.run(rc, timeout=900.0 + 240.0 * rounds)
        h = out["history"]
        if h.meta["rejected"]:
            raise RuntimeError(f"{what}: clients left out: {h.meta['rejected'][:3]}")
        per = [w / ALGORITHMS[what][1] for w in np.asarray(h["wall"])[1:]]
    rec = {"what": what, "nodes": n, "per_exchange": per, "load_before": before,
           "load_after": load(), "run_wall": time.perf_counter() - w0}
    log(f"  {what:8s} n={n:2d}: per exchange {', '.join(f'{p:.2f}' for p in per)} s "
        f"(median {np.median(per):.2f}); load {before} -> {rec['load_after']}")
    return rec


def deployment(nodes, rounds, only, poll=None, idle=0.0, log=print):
    from rfl_fast.flower.local import LocalFederation
    env = None if poll is None else {"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": str(poll)}
    records, idle_rows = [], []
    for n in nodes:
        for private in (False, True):
            algs = ["PriRFed"] if private else ["RFedAvg", "RFedSVRG"]
            algs = [a for a in algs if a in only]
            if not algs:
                continue
            with tempfile.TemporaryDirectory(prefix="rfl_overhead_") as tmp:
                configs = [{**DP_NODE, "dp-ledger": os.path.join(tmp, f"ledger{i}.json")}
                           if private else {} for i in range(n)]
                log(f"federation: {n} nodes{' (private)' if private else ''}, load {load()}")
                with LocalFederation(n, node_configs=configs, env=env) as fed:
                    if idle > 0:
                        time.sleep(5.0)                       # the nodes connect first
                        idle_rows.append({"nodes": n, "cpu_per_s": idle_cpu(fed, idle)})
                        log(f"  idle: {idle_rows[-1]['cpu_per_s']:.3f} CPU s per s")
                    order = (["echo"] if "echo" in only else []) + algs + \
                        (["echo"] if "echo" in only else [])
                    for what in order:
                        rec = one_run(fed, what, n, rounds, log)
                        rec["private"] = private
                        records.append(rec)
    return records, idle_rows


def table(records):
    """Rows ``(algorithm, nodes, exchanges, rfl_fast median, echo median, ratio, load)``."""
    rows = []
    for rec in records:
        if rec["what"] == "echo":
            continue
        echo = [p for e in records if e["what"] == "echo" and e["nodes"] == rec["nodes"]
                and e["private"] == rec["private"] for p in e["per_exchange"]]
        mine, base = float(np.median(rec["per_exchange"])), \
            float(np.median(echo)) if echo else float("nan")
        loads = [float(e[k].split("/")[0]) for e in records if e["nodes"] == rec["nodes"]
                 and e["private"] == rec["private"] for k in ("load_before", "load_after")]
        rows.append((rec["what"], rec["nodes"], len(rec["per_exchange"]), mine, base,
                     mine / base, f"{min(loads):.1f}-{max(loads):.1f}"))
    return rows


def print_table(rows, out=print):
    out("| algorithm | nodes | exchanges timed | rfl_fast s / exchange | echo s / exchange "
        "| ratio | load average (1 min) |")
    out("|---|---|---|---|---|---|---|")
    for alg, n, k, mine, base, ratio, loads in rows:
        out(f"| {alg} | {n} | {k} | {mine:.2f} | {base:.2f} | {ratio:.2f}x | {loads} |")


# ---------------------------------------------------------------------------- in process

def in_process(n, rounds, repeats, log=print):
    from rfl_fast.federation import run
    from rfl_fast.flower import InProcessLink, run_federation
    from rfl_fast.flower.spec import FederationConfig
    from rfl_fast.flower.tasks import synthetic_kpca
    from rfl_fast.kernels import limit_blas_threads

    rows = []
    for alg in ALGORITHMS:
        rc = run_config(alg, n, rounds)
        cfg = FederationConfig.from_run_config(rc)
        problem = synthetic_kpca.full(**cfg.task_kwargs)
        sim, one, default, diff = [], [], [], {}
        for rep in range(repeats):
            res = run(problem, cfg.build_algorithm(), rounds, participation=cfg.participation,
                      seed=cfg.seed, metrics=False)
            sim.append(float(np.median(res.history["wall"][1:])))
            for times, threads in ((one, 1), (default, None)):
                with tempfile.TemporaryDirectory(prefix="rfl_ledgers_") as tmp:
                    nodes = [{"partition-id": i} for i in range(n)]
                    if alg == "PriRFed":   # the run's noise: the engine's draws (dp-seed)
                        nodes = [{**nodes[i], "dp-sigma": 0.5, "dp-clip": 1.0,
                                  "dp-epsilon": 1e6, "dp-delta": 1e-5, "dp-seed": cfg.seed,
                                  "dp-ledger": os.path.join(tmp, f"l{i}.json")}
                                 for i in range(n)]
                    with limit_blas_threads(threads):
                        out = run_federation(InProcessLink(rc, nodes), rc, log=lambda s: None)
                times.append(float(np.median(out.history["wall"][1:])))
                diff[threads] = max(diff.get(threads, 0.0), float(np.abs(out.x - res.x).max()))
        row = {"algorithm": alg, "nodes": n, "rounds": rounds, "repeats": repeats,
               "sim_s": float(np.median(sim)), "in_process_s": float(np.median(one)),
               "in_process_default_blas_s": float(np.median(default)),
               "max_diff": diff[1], "max_diff_default_blas": diff[None], "load": load()}
        row["ratio"] = row["in_process_s"] / row["sim_s"]
        row["ratio_default_blas"] = row["in_process_default_blas_s"] / row["sim_s"]
        rows.append(row)
        log(f"{alg:8s} n={n}: simulation {row['sim_s'] * 1e3:.2f} ms/round, in process "
            f"{row['in_process_s'] * 1e3:.2f} ms ({row['ratio']:.2f}x; BLAS as the process "
            f"has it {row['in_process_default_blas_s'] * 1e3:.2f} ms, "
            f"{row['ratio_default_blas']:.2f}x); final iterate vs the simulation's: max |diff| "
            f"{row['max_diff']:.1e} ({row['max_diff_default_blas']:.1e}); load {row['load']}")
    return rows


def compile_bytecode():
    """Compile rfl_fast's modules to bytecode, as ``pip install`` does: every message starts a
    ClientApp process, and a source checkout run under ``PYTHONDONTWRITEBYTECODE`` (or with
    stale caches) would compile the package's modules again in each (0.1-0.15 s of CPU here),
    a cost no installed package pays and the echo app (flwr and numpy, installed) does not
    show. Returns whether it compiled everything."""
    import compileall

    import rfl_fast

    return compileall.compile_dir(os.path.dirname(rfl_fast.__file__), quiet=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--in-process", action="store_true")
    ap.add_argument("--poll", type=float, default=None,
                    help="FLWR_SUPEREXEC_TASK_POLL_INTERVAL of the nodes (Flower's default 1 s)")
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds to measure the idle deployment's CPU use (0: not measured)")
    ap.add_argument("--only", default="echo,RFedAvg,RFedSVRG,PriRFed")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs, load average {load()}; "
          f"python {sys.version.split()[0]}")
    if a.in_process:
        rows = in_process((a.nodes or [3])[0], a.rounds or 20, a.repeats)
        result = {"in_process": rows}
    else:
        import flwr
        compiled = compile_bytecode()
        print(f"flwr {flwr.__version__}, SuperExec task poll "
              f"{a.poll if a.poll is not None else 'default (1 s)'}; rfl_fast's bytecode "
              f"{'compiled' if compiled else 'NOT all compiled'}")
        records, idle_rows = deployment(a.nodes or [3, 10], a.rounds or 4,
                                        set(a.only.split(",")), a.poll, a.idle)
        rows = table(records)
        print()
        print_table(rows)
        for r in idle_rows:
            print(f"idle deployment, {r['nodes']} nodes: {r['cpu_per_s']:.3f} CPU s per s")
        result = {"records": records, "idle": idle_rows, "poll": a.poll,
                  "flwr": flwr.__version__,
                  "table": [dict(zip(("algorithm", "nodes", "exchanges", "rfl_fast_s",
                                      "echo_s", "ratio", "load"), r)) for r in rows]}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
